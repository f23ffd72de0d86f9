"""Where messages sit in the log: the offset anomalies of Jepsen's Kafka/queue workload.

The queue and log workloads both see offsets: an acknowledged send (or
append) says at which offset of its queue the message landed, a poll (or
read) and the durability audit (workloads.audit) say what they found there.
Every such sighting is an *observation* (run, key = queue, offset, id). From
them, per queue:

- inconsistent offsets: one offset seen holding two different messages: the
  log diverged (a failover kept another replica's history);
- poll skip: a consumer's next consumed offset jumped over offsets that hold
  messages (some observation saw them);
- nonmonotonic poll: a consumer's next consumed offset is not after the one
  before (redelivery: the consumer's position went back).

A queue has one consumer in our workloads (one per queue after rebalancing),
so "a consumer's successive polls" are the polls of that queue in completion
order. The functions return DataFrames; queue.py turns them into counts,
examples and rows of checked/queue.parquet.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from .ops import AUDIT_FUNCTION

OBSERVATION_COLUMNS = ("run", "key", "offset", "id", "source")


def audited_runs(history: DataFrame, write_function: str, candidates: list[int]) -> list[int]:
    """Of `candidates` (the runs with audit operations), those whose audit read every written
    queue to its end (an ok audit that found nothing). No candidates: no Spark job."""
    if not candidates:
        return []
    history = history.filter(F.col("run").isin(candidates))
    ended = (history.filter((F.col("f") == AUDIT_FUNCTION) & (F.col("type") == "ok")
                            & (F.size(F.from_json("value", "array<string>")) == 0))
             .select("run", "key").distinct().withColumn("ended", F.lit(True)))
    written = history.filter(F.col("f") == write_function).select("run", "key").distinct()
    audits = history.filter(F.col("f") == AUDIT_FUNCTION).select("run").distinct()
    rows = (written.join(ended, ["run", "key"], "left").groupBy("run")
            .agg(F.count_if(F.col("ended").isNull()).alias("unread"))
            .join(audits, "run").filter(F.col("unread") == 0).select("run").collect())
    return sorted(row["run"] for row in rows)


def inconsistent_offsets(observations: DataFrame) -> DataFrame:
    """run, key, offset, ids (sorted), sources: offsets seen holding more than one message."""
    return (observations.filter(F.col("id").isNotNull() & F.col("offset").isNotNull())
            .groupBy("run", "key", "offset")
            .agg(F.array_sort(F.collect_set("id")).alias("ids"),
                 F.array_sort(F.collect_set("source")).alias("sources"))
            .filter(F.size("ids") > 1))


def poll_jumps(consumed: DataFrame, observations: DataFrame) -> DataFrame:
    """Successive consumptions of a queue that jump: run, key, id, offset, previous, category, skipped.

    `consumed` holds run, key, offset, id, order (consumption order). A jump
    back (offset <= previous) is a nonmonotonic poll; a jump forward over
    offsets that some observation saw holding a message is a poll skip, with
    `skipped` the number of such offsets.
    """
    earlier = Window.partitionBy("run", "key").orderBy("order")
    steps = (consumed.filter(F.col("offset").isNotNull())
             .select("run", "key", "offset", "id", F.lag("offset", 1, -1).over(earlier).alias("previous")))
    back = (steps.filter(F.col("offset") <= F.col("previous"))
            .select("*", F.lit("nonmonotonic_poll").alias("category"), F.lit(None).cast("long").alias("skipped")))
    gaps = steps.filter(F.col("offset") > F.col("previous") + 1).alias("g")
    known = observations.select("run", "key", F.col("offset").alias("seen")).distinct().alias("k")
    inside = ((F.col("g.run") == F.col("k.run")) & (F.col("g.key") == F.col("k.key"))
              & (F.col("k.seen") > F.col("g.previous")) & (F.col("k.seen") < F.col("g.offset")))
    skips = (gaps.join(known, inside).groupBy("g.run", "g.key", "g.offset", "g.id", "g.previous")
             .agg(F.count(F.lit(1)).alias("skipped"))
             .select("run", "key", "offset", "id", "previous", F.lit("poll_skip").alias("category"),
                     "skipped"))
    return back.unionByName(skips)
