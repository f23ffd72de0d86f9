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
    """run, key, offset, ids (sorted), sources: offsets seen holding more than one message.

    Offsets are many and divergences rare. The least and greatest hash of the
    ids seen at each offset (window aggregates of longs) keep only the
    observations of offsets that saw two ids, and only those are collected
    into sets: collect_set over every offset is Spark's object aggregation,
    which falls back to sorting (3x slower at 10 M events).
    """
    at_offset = Window.partitionBy("run", "key", "offset")
    digest = F.xxhash64("id")
    seen = observations.filter(F.col("id").isNotNull() & F.col("offset").isNotNull()).select(
        "*", F.min(digest).over(at_offset).alias("least"), F.max(digest).over(at_offset).alias("greatest"))
    return (seen.filter(F.col("least") != F.col("greatest"))
            .groupBy("run", "key", "offset")
            .agg(F.array_sort(F.collect_set("id")).alias("ids"),
                 F.array_sort(F.collect_set("source")).alias("sources"))
            .filter(F.size("ids") > 1))


def poll_jumps(consumed: DataFrame, observations: DataFrame) -> DataFrame:
    """Successive consumptions of a queue that jump: run, key, id, offset, previous, category, skipped.

    `consumed` holds run, key, offset, id, order (consumption order). A jump
    back (offset <= previous) is a nonmonotonic poll; a jump forward over
    offsets that some observation saw holding a message is a poll skip, with
    `skipped` the number of such offsets. One pass: the jumps (few) are
    left-joined with the observations inside their gap, which a jump back has
    none of.
    """
    earlier = Window.partitionBy("run", "key").orderBy("order")
    steps = (consumed.filter(F.col("offset").isNotNull())
             .select("run", "key", "offset", "id", F.lag("offset", 1, -1).over(earlier).alias("previous")))
    back = F.col("offset") <= F.col("previous")
    jumps = steps.filter(back | (F.col("offset") > F.col("previous") + 1)).alias("g")
    seen = observations.select("run", "key", F.col("offset").alias("seen")).alias("k")
    inside = ((F.col("g.run") == F.col("k.run")) & (F.col("g.key") == F.col("k.key"))
              & (F.col("k.seen") > F.col("g.previous")) & (F.col("k.seen") < F.col("g.offset")))
    counted = (jumps.join(seen, inside, "left")
               .groupBy("g.run", "g.key", "g.offset", "g.id", "g.previous")
               .agg(F.count_distinct("k.seen").alias("skipped")))
    return counted.filter(back | (F.col("skipped") > 0)).select(
        "run", "key", "offset", "id", "previous",
        F.when(back, F.lit("nonmonotonic_poll")).otherwise(F.lit("poll_skip")).alias("category"),
        F.when(~back, F.col("skipped")).alias("skipped"))
