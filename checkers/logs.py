"""The log workload's anomalies, named as the queue checker names them.

Besides the linearizability verdict (checkers/linearizable.py), a log run is
checked for what a Jepsen user knows from the Kafka/queue workload:

- lost: an acknowledged append whose value is not in the final log (the
  durability audit, workloads.audit; needs a complete audit);
- inconsistent_offsets: one offset of a queue seen (by appends, reads or the
  audit) holding two different values;
- poll_skip: a stale read: a read found nothing at an offset below the
  acknowledged end, i.e. an append at that offset or later had been
  acknowledged before the read was invoked.

The section is the `queue` section of the run, with the same categories and
examples, so reports and campaigns read one format.
"""
from __future__ import annotations

import json
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from . import offsets
from .anomalies import ID_EXAMPLES, LOG_AUDITED, audit_summary, first_rows, queue_section
from .context import CheckContext
from .ops import AUDIT_FUNCTION
from .schema import QUEUE_ANOMALIES

AUDIT_ITEMS = "array<struct<key:string,queue:string,offset:long,value:string>>"
LOG_CATEGORIES = ("lost", "inconsistent_offsets", "poll_skip")


def appends_of(history: DataFrame) -> DataFrame:
    """Acknowledged appends: run, key, offset, id (the appended value), complete_time."""
    return history.filter((F.col("f") == "append") & (F.col("type") == "ok")).select(
        "run", "key", F.get_json_object("value", "$.offset").cast("long").alias("offset"),
        F.get_json_object("value", "$.value").alias("id"), "complete_time")


def reads_of(history: DataFrame) -> DataFrame:
    """Ok reads: run, key, offset, id (the value read; null = nothing), invoke_time, node."""
    return history.filter((F.col("f") == "read") & (F.col("type") == "ok")).select(
        "run", "key", F.get_json_object("value", "$.offset").cast("long").alias("offset"),
        F.get_json_object("value", "$.value").alias("id"), "invoke_time", "node")


def audit_items(history: DataFrame) -> DataFrame:
    reads = history.filter((F.col("f") == AUDIT_FUNCTION) & (F.col("type") == "ok"))
    items = reads.select("run", F.explode(F.from_json("value", AUDIT_ITEMS)).alias("item"))
    return items.select("run", F.col("item.key").alias("key"), F.col("item.offset").alias("offset"),
                        F.col("item.value").alias("id"))


def stale_reads(appends: DataFrame, reads: DataFrame) -> DataFrame:
    """Reads of nothing below the acknowledged end: run, key, offset, id (the value
    acknowledged at that offset, if known), read_at_s, acknowledged_end, node (that served it)."""
    nothing = reads.filter(F.col("id").isNull()).alias("r")
    acked = appends.alias("a")
    before = ((F.col("r.run") == F.col("a.run")) & (F.col("r.key") == F.col("a.key"))
              & (F.col("a.offset") >= F.col("r.offset")) & (F.col("a.complete_time") < F.col("r.invoke_time")))
    stale = (nothing.join(acked, before).groupBy("r.run", "r.key", "r.offset", "r.invoke_time", "r.node")
             .agg((F.max("a.offset") + 1).alias("acknowledged_end"),
                  F.max(F.when(F.col("a.offset") == F.col("r.offset"), F.col("a.id"))).alias("id")))
    return stale.select("run", "key", "offset", "id", (F.col("invoke_time") / 1e9).alias("read_at_s"),
                        "acknowledged_end", "node")


def _rows(df: DataFrame, category: str, detail: list[str]) -> DataFrame:
    """Rows of checked/queue.parquet."""
    values = {"run": F.col("run"), "category": F.lit(category), "id": F.col("id"), "key": F.col("key"),
              "offset": F.col("offset"),
              "detail": F.to_json(F.struct(*detail)) if detail else F.lit(None).cast("string")}
    return df.select(*[values.get(name, F.lit(None)).cast(dtype).alias(name) for name, dtype in
                       [("run", "int")] + [(f.name, f.dataType) for f in QUEUE_ANOMALIES.fields]])


def check(ctx: CheckContext, runs: list[int]) -> tuple[DataFrame, dict[int, dict[str, Any]]]:
    """The anomaly rows of the log runs and their `queue` sections."""
    history = ctx.history_of(runs)
    appends, reads, audit = appends_of(history), reads_of(history), audit_items(history)
    audited = offsets.audited_runs(history, "append", ctx.with_operation(runs, AUDIT_FUNCTION))
    observations = (appends.select(*offsets.OBSERVATION_COLUMNS[:-1], F.lit("append").alias("source"))
                    .unionByName(reads.filter(F.col("id").isNotNull())
                                 .select("run", "key", "offset", "id", F.lit("read").alias("source")))
                    .unionByName(audit.select("run", "key", "offset", "id", F.lit("audit").alias("source"))))
    in_log = audit.select("run", "key", "id").distinct()
    lost = (appends.filter(F.col("run").isin(audited) if audited else F.lit(False))
            .join(in_log, ["run", "key", "id"], "left_anti"))
    table = (_rows(lost, "lost", [])
             .unionByName(_rows(offsets.inconsistent_offsets(observations).select(
                 "run", "key", "offset", F.explode("ids").alias("id"), "ids", "sources"),
                 "inconsistent_offsets", ["ids", "sources"]))
             .unionByName(_rows(stale_reads(appends, reads), "poll_skip", ["read_at_s", "acknowledged_end", "node"])))
    ctx.staging.write(table, "log_anomalies")
    found = ctx.staging.read("log_anomalies")
    counts = {run: {"appends_acknowledged": 0, **dict.fromkeys(LOG_CATEGORIES, 0)} for run in runs}
    for row in appends.groupBy("run").count().collect():
        counts[row["run"]]["appends_acknowledged"] = row["count"]
    distinct = F.when(F.col("category") == "poll_skip", F.concat_ws(":", "key", "offset", "detail")) \
        .otherwise(F.concat_ws(":", "key", "offset"))
    for row in found.groupBy("run", "category").agg(F.count_distinct(distinct).alias("n")).collect():
        counts[row["run"]][row["category"]] = row["n"]
    examples: dict[int, dict[str, list]] = {run: {} for run in runs}
    for row in first_rows(found, ["run", "category"], [F.col("offset"), F.col("id")], ID_EXAMPLES):
        example = {"id": row["id"], "key": row["key"], "offset": row["offset"]}
        if row["detail"]:
            example.update(json.loads(row["detail"]))
        examples[row["run"]].setdefault(row["category"], []).append(example)
    sections = {}
    for run in runs:
        section = queue_section(_full(counts[run]), examples[run], True, audit_summary(run in audited, {}, LOG_AUDITED))
        section["workload"] = "log"
        sections[run] = section
    return found, sections


def _full(counts: dict[str, int]) -> dict[str, int]:
    """The log counts plus zeros for the queue-only counters queue_section reads."""
    return {**dict.fromkeys(("unexpected", "recovered_fail", "duplicated", "nonmonotonic_poll",
                             "lost_after_consume", "unreadable_polls", "items_without_id",
                             "sends_without_id"), 0), **counts}
