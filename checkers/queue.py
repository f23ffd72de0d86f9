"""The `queue` and `order` checkers: message accounting by id, order per key.

Every message is followed by its id (retries of a send reuse the id, so they
count once). Per id, one Spark aggregation counts the send attempts (best
outcome: ok > info > fail) and the consumptions (from the value lists of ok
polls), which classifies each id:

- lost: acknowledged (a send attempt was ok), never consumed, and not in the
  final log (Jepsen's :lost);
- lost_after_consume: consumed by a poll but not in the final log: the log
  lost it after a consumer had seen it (a failover truncated it away);
- duplicated: consumed more than once (RocketMQ delivers at least once, so
  this fails the run only when run.json asks for `delivery: exactly-once`);
- unexpected: consumed but never sent;
- recovered: sent as info or fail but consumed. An info send may have
  happened, so this is fine; a send that only ever failed was promised not to
  have happened (docs/history-format.md), so consuming it fails the run.

The final log is what the durability audit (workloads.audit, `audit` ops)
read after healing; lost_after_consume needs a complete audit (every written
queue read to its end). checkers/offsets.py adds the offset anomalies
inconsistent_offsets, poll_skip and nonmonotonic_poll (Jepsen's
:inconsistent-offsets, :poll-skip, :nonmonotonic-poll). The log workload gets
the same names from checkers/logs.py, in the same `queue` section.

Order (runs with `ordered: true`): per key, messages in the order they were
first consumed; message B is out of order when some message A consumed before
it was sent only after B's send had been acknowledged (A's first send invoke is
later than B's ok completion). A running maximum over the consumption order
finds these in one pass. Gaps are loss, reported by the queue checker, not here.
"""
from __future__ import annotations

import functools
import json
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from . import logs, offsets
from .anomalies import ID_EXAMPLES, OFFSET_CATEGORIES, audit_summary, first_rows, queue_section
from .context import CheckContext, RunFacts
from .ops import AUDIT_FUNCTION
from .registry import Sections
from .routes import LOG_ANOMALIES, MESSAGE_ANOMALIES, route
from .schema import QUEUE_ANOMALIES
from .spark.jvmfunctions import json_fields, poll_items, register

ORDER_EXAMPLES = 100
BROADCAST_ANOMALIES = 200_000
_POSITIONS = 1024  # consumption order = poll completion time * _POSITIONS + position in the poll



# Per-id aggregations use only fixed-width buffers (counts, min/max of longs):
# Spark then hash-aggregates; a string or struct buffer (first(key), min of a
# struct) would make it sort millions of rows instead. Keys are looked up
# afterwards for the few rows that need them.

def send_rows(history: DataFrame) -> DataFrame:
    """One row per send attempt: run, id, key, type, invoke_time, complete_time, and for an
    acknowledged one where it landed: ack_key, ack_offset, ack_id (its offset observation).

    One scan of the history for both, and one read of each JSON value's bytes
    (json_fields answers what json_tuple does; at 10 M events this table took
    11 CPU-s instead of 29). Fields come back as text, numbers as their digits.
    """
    register(history.sparkSession)
    # two projections: each value is read once, however many of its fields are used
    sent = history.filter(F.col("f") == "send").select(
        "run", "key", "type", "invoke_time", "complete_time",
        json_fields(F.col("invoke_value"), "id", "key").alias("sent"),
        json_fields(F.when(F.col("type") == "ok", F.col("value")), "queue", "offset", "id").alias("landed"))
    return sent.select(
        "run", F.col("sent")[0].alias("id"), F.coalesce("key", F.col("sent")[1]).alias("key"), "type",
        "invoke_time", "complete_time", F.coalesce("key", F.col("landed")[0]).alias("ack_key"),
        F.col("landed")[1].cast("long").alias("ack_offset"), F.col("landed")[2].alias("ack_id"))


def consumption_rows(history: DataFrame) -> DataFrame:
    """One row per item of an ok poll or audit read: run, id, key, offset, order, spot,
    unreadable, has_item, audit (the item was found by the durability audit).

    A poll whose value is not a list of messages yields one row with
    `unreadable` set and id null, so that it is counted, not skipped.
    """
    register(history.sparkSession)
    polls = history.filter(F.col("f").isin("poll", AUDIT_FUNCTION) & (F.col("type") == "ok"))
    parsed = polls.select("run", "complete_time", (F.col("f") == AUDIT_FUNCTION).alias("audit"),
                          poll_items(F.col("value")).alias("items"))
    items = parsed.select("run", "complete_time", "audit", F.col("items").isNull().alias("unreadable"),
                          F.posexplode_outer("items").alias("pos", "item"))
    return items.select(
        "run", F.col("item.id").alias("id"), F.col("item.key").alias("key"),
        F.col("item.offset").alias("offset"),
        (F.col("complete_time") * _POSITIONS + F.least("pos", F.lit(_POSITIONS - 1))).alias("order"),
        F.xxhash64("item.queue", "item.offset").alias("spot"),
        "unreadable", F.col("item").isNotNull().alias("has_item"), "audit")


def send_observations(sends: DataFrame) -> DataFrame:
    """Where acknowledged sends landed: run, key, offset, id, source (from send_rows)."""
    return sends.filter(F.col("type") == "ok").select(
        "run", F.col("ack_key").alias("key"), F.col("ack_offset").alias("offset"),
        F.col("ack_id").alias("id"), F.lit("send").alias("source"))


def item_observations(items: DataFrame) -> DataFrame:
    return items.select("run", "key", "offset", "id",
                        F.when(F.col("audit"), F.lit("audit")).otherwise(F.lit("poll")).alias("source"))


def message_table(sends: DataFrame, items: DataFrame) -> DataFrame:
    """Per (run, message id): send attempts and outcomes, consumptions, first times.

    Sends and consumed items are stacked and aggregated together: one hash
    aggregation instead of two and a join. The row of id null counts sends
    without an id, unreadable polls and items without an id.
    """
    stacked = sends.select(
        "run", "id", F.lit(True).alias("is_send"), "type", "invoke_time", "complete_time",
        F.lit(None).cast("long").alias("order"), F.lit(None).cast("long").alias("spot"),
        F.lit(False).alias("unreadable"), F.lit(False).alias("has_item"), F.lit(False).alias("audit"),
    ).unionByName(items.select(
        "run", "id", F.lit(False).alias("is_send"), F.lit(None).cast("string").alias("type"),
        F.lit(None).cast("long").alias("invoke_time"), F.lit(None).cast("long").alias("complete_time"),
        "order", "spot", "unreadable", "has_item", "audit"))
    send, ok = F.col("is_send"), F.col("is_send") & (F.col("type") == "ok")
    found = ~F.col("is_send") & F.col("id").isNotNull()
    consumption, in_log = found & ~F.col("audit"), found & F.col("audit")
    return stacked.groupBy("run", "id").agg(
        F.count_if(send).alias("sends"),
        F.count_if(ok).alias("ok"),
        F.count_if(send & (F.col("type") == "info")).alias("info"),
        F.count_if(send & (F.col("type") == "fail")).alias("fail"),
        F.min(F.when(send, F.col("invoke_time"))).alias("first_invoke"),
        F.min(F.when(ok, F.col("complete_time"))).alias("ok_complete"),
        F.count_if(consumption).alias("consumed"),
        F.count_if(in_log).alias("in_log"),
        F.min(F.when(consumption, F.col("spot"))).alias("min_spot"),
        F.max(F.when(consumption, F.col("spot"))).alias("max_spot"),
        F.min(F.when(consumption, F.col("order"))).alias("first_order"),
        F.count_if(F.col("unreadable")).alias("unreadable_polls"),
        F.count_if(F.col("has_item") & F.col("id").isNull()).alias("items_without_id"),
    )


def classify(messages: DataFrame, audited: list[int] | None = None) -> DataFrame:
    """Name each id's anomalies (`categories`) and its best send outcome.

    `audited`: the runs whose durability audit read every queue to its end;
    only there can a consumed message be missing from the final log.
    """
    outcome = (F.when(F.col("ok") > 0, "ok").when(F.col("info") > 0, "info")
               .when(F.col("fail") > 0, "fail"))
    has_id, times, in_log = F.col("id").isNotNull(), F.col("consumed"), F.col("in_log") > 0
    seen = (times > 0) | in_log
    complete_audit = F.col("run").isin(audited) if audited else F.lit(False)
    categories = F.array_compact(F.array(
        F.when(has_id & (outcome == "ok") & ~seen, F.lit("lost")),
        F.when(has_id & complete_audit & (times > 0) & ~in_log, F.lit("lost_after_consume")),
        F.when(has_id & (times > 1), F.lit("duplicated")),
        F.when(has_id & (F.col("sends") == 0) & seen, F.lit("unexpected")),
        F.when(has_id & outcome.isin("info", "fail") & seen, F.lit("recovered")),
    ))
    return messages.select("*", outcome.alias("send_outcome"), categories.alias("categories"))


def _total_columns() -> dict[str, Column]:
    """Per-run counts over the classified ids."""
    has_id = F.col("id").isNotNull()

    def category(name: str) -> Column:
        return F.array_contains("categories", name)

    return {
        "messages": F.count_if(has_id & (F.col("sends") > 0)),
        "acknowledged": F.count_if(has_id & (F.col("send_outcome") == "ok")),
        "send_attempts": F.sum(F.when(has_id, F.col("sends"))),
        "retried": F.count_if(has_id & (F.col("sends") > 1)),
        "consumed_ids": F.count_if(has_id & (F.col("consumed") > 0)),
        "consumptions": F.sum(F.when(has_id, F.col("consumed"))),
        "in_final_log": F.count_if(has_id & (F.col("in_log") > 0)),
        "lost": F.count_if(category("lost")),
        "lost_after_consume": F.count_if(category("lost_after_consume")),
        # the acknowledged ones: what a campaign's no-lost-on-safe gate adds to `lost`
        "lost_after_consume_acknowledged": F.count_if(category("lost_after_consume")
                                                      & (F.col("send_outcome") == "ok")),
        "duplicated": F.count_if(category("duplicated")),
        "unexpected": F.count_if(category("unexpected")),
        "recovered_info": F.count_if(category("recovered") & (F.col("send_outcome") == "info")),
        "recovered_fail": F.count_if(category("recovered") & (F.col("send_outcome") == "fail")),
        "sends_without_id": F.sum(F.when(~has_id, F.col("sends"))),
        "unreadable_polls": F.sum("unreadable_polls"),
        "items_without_id": F.sum("items_without_id"),
    }


def _totals(joined: DataFrame, runs: list[int]) -> dict[int, dict[str, int]]:
    columns = _total_columns()
    totals = {run: dict.fromkeys(columns, 0) for run in runs}
    for row in joined.groupBy("run").agg(*[c.alias(n) for n, c in columns.items()]).collect():
        totals[row["run"]] = {name: int(row[name] or 0) for name in columns}
    return totals


def _anomalies(joined: DataFrame, keys: DataFrame, expected_rows: int) -> DataFrame:
    """One row per (id, category), with its key: the table published as checked/queue.parquet.

    Anomalies are usually few: then they are broadcast, and looking up their
    keys is one pass over the staged keys instead of a shuffle of all of them
    (adaptive execution would only switch to broadcast after that shuffle).
    """
    found = joined.filter(F.size("categories") > 0).select(
        "run", F.explode("categories").alias("category"), "id",
        "sends", "send_outcome", (F.col("first_invoke") / 1e9).alias("first_send_s"),
        F.col("consumed").cast("long").alias("consumed"),
        (F.col("min_spot") == F.col("max_spot")).alias("same_offset"),
        F.lit(None).cast("long").alias("offset"), F.lit(None).cast("string").alias("detail"))
    ids = found.select("run", "id").distinct()
    small = expected_rows <= BROADCAST_ANOMALIES
    found_keys = (keys.join(F.broadcast(ids) if small else ids, ["run", "id"])
                  .groupBy("run", "id").agg(F.min("key").alias("key")))
    table = found.join(found_keys, ["run", "id"], "left")
    return table.select("run", *QUEUE_ANOMALIES.fieldNames())


def offset_anomalies(observations: DataFrame, consumed: DataFrame) -> DataFrame:
    """Rows of checked/queue.parquet for the offset anomalies (checkers/offsets.py)."""
    none = {"sends": F.lit(None).cast("long"), "send_outcome": F.lit(None).cast("string"),
            "first_send_s": F.lit(None).cast("double"), "consumed": F.lit(None).cast("long"),
            "same_offset": F.lit(None).cast("boolean")}
    diverged = offsets.inconsistent_offsets(observations).select(
        "run", F.lit("inconsistent_offsets").alias("category"), F.explode("ids").alias("id"), "key",
        "offset", F.to_json(F.struct("ids", "sources")).alias("detail"))
    jumps = offsets.poll_jumps(consumed, observations).select(
        "run", "category", "id", "key", "offset",
        F.to_json(F.struct("previous", "skipped")).alias("detail"))
    table = diverged.unionByName(jumps)
    return table.select("run", *[none.get(name, F.col(name)).alias(name) for name in QUEUE_ANOMALIES.fieldNames()])


def offset_totals(anomalies: DataFrame, runs: list[int]) -> dict[int, dict[str, int]]:
    """Per run: distinct offsets that diverged, poll skips and nonmonotonic polls."""
    totals = {run: dict.fromkeys(OFFSET_CATEGORIES, 0) for run in runs}
    counted = F.when(F.col("category") == "inconsistent_offsets",
                     F.concat_ws(":", "key", "offset")).otherwise(F.concat_ws(":", "key", "offset", "id"))
    for row in (anomalies.filter(F.col("category").isin(*OFFSET_CATEGORIES))
                .groupBy("run", "category").agg(F.count_distinct(counted).alias("n")).collect()):
        totals[row["run"]][row["category"]] = row["n"]
    return totals


def order_scan(joined: DataFrame, items: DataFrame) -> DataFrame:
    """Messages in order of first consumption per key; `violation` marks one consumed
    after a message that was sent later than it was acknowledged."""
    first = (items.filter(F.col("id").isNotNull()).groupBy("run", "id", "key")
             .agg(F.min("order").alias("order")))
    sent = joined.filter(F.col("id").isNotNull() & (F.col("sends") > 0)).select(
        "run", "id", "first_invoke", "ok_complete")
    earlier = (Window.partitionBy("run", "key").orderBy("order")
               .rowsBetween(Window.unboundedPreceding, -1))
    scanned = first.join(sent, ["run", "id"]).select(
        "run", "id", "key", "ok_complete", "order",
        F.max("first_invoke").over(earlier).alias("latest_earlier_send"),
        F.max_by("id", "first_invoke").over(earlier).alias("consumed_after"))
    violation = F.coalesce(F.col("ok_complete") < F.col("latest_earlier_send"), F.lit(False))
    return scanned.withColumn("violation", violation)


def order_section(checked: bool, violations: int, keys: int,
                  examples: list[dict[str, Any]]) -> dict[str, Any]:
    """The order verdict (pure)."""
    if not checked:
        return {"valid": True, "checked": False,
                "reason": "not an ordered run (run.json has no `ordered: true`)"}
    return {"valid": violations == 0, "checked": True, "violations": violations, "keys": keys,
            "examples": examples}


def _not_applicable(run: RunFacts) -> dict[str, Any]:
    return {"valid": True, "checked": False,
            "reason": f"not a queue workload (workload: {run.workload})"}


def _example(row: Any) -> dict[str, Any]:
    if row["category"] in OFFSET_CATEGORIES:
        return {"id": row["id"], "key": row["key"], "offset": row["offset"], **json.loads(row["detail"] or "{}")}
    return {"id": row["id"], "key": row["key"], "sends": row["sends"],
            "send_outcome": row["send_outcome"], "first_send_s": row["first_send_s"],
            "consumed": row["consumed"], "same_offset": row["same_offset"]}


class QueueChecker:
    """The `queue` and `order` sections of the runs routed to an anomaly accounting
    (checkers/routes.py): message ids here, log offsets in checkers/logs.py (the
    same anomaly names). All anomaly rows become checked/queue.parquet."""

    name = "queue and order"
    sections = ("queue", "order")

    def applies_to(self, run: RunFacts) -> bool:
        found = route(run.workload)
        return found is not None and found.anomalies is not None

    def not_applicable(self, run: RunFacts) -> Sections:
        return {"queue": _not_applicable(run), "order": _not_applicable(run)}

    def check(self, ctx: CheckContext, runs: list[RunFacts]) -> list[Sections]:
        by_ids = [r.index for r in runs if route(r.workload).anomalies == MESSAGE_ANOMALIES]
        by_offsets = [r.index for r in runs if route(r.workload).anomalies == LOG_ANOMALIES]
        queue: dict[int, dict[str, Any]] = {}
        order = {r.index: _not_applicable(r) for r in runs}
        tables: list[DataFrame] = []
        if by_ids:
            found, queue_sections, order_sections = _check_queue_runs(ctx, by_ids)
            queue.update(queue_sections)
            order.update(order_sections)
            tables.append(found)
        if by_offsets:
            found, log_sections = logs.check(ctx, by_offsets)
            queue.update(log_sections)
            tables.append(found)
        ctx.staging.write(functools.reduce(DataFrame.unionByName, tables), "queue")
        return [{"queue": queue[r.index], "order": order[r.index]} for r in runs]


def _check_queue_runs(ctx: CheckContext, runs: list[int]) -> tuple[DataFrame, dict[int, dict], dict[int, dict]]:
    """Anomaly rows, queue sections and order sections of the queue runs.

    Send attempts and consumed items are staged once (the poll values are
    parsed once); the per-id join is kept in memory for the passes over it.
    """
    history = ctx.history_of(runs)
    ctx.staging.write(send_rows(history), "queue_sends")
    ctx.staging.write(consumption_rows(history), "queue_items")
    sends, items = ctx.staging.read("queue_sends"), ctx.staging.read("queue_items")
    audited = offsets.audited_runs(history, "send", ctx.with_operation(runs, AUDIT_FUNCTION))
    joined = classify(message_table(sends, items), audited).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        keys = sends.select("run", "id", "key").unionByName(items.select("run", "id", "key"))
        observations = send_observations(sends).unionByName(item_observations(items))
        polled = items.filter(~F.col("audit") & F.col("id").isNotNull())
        totals = _totals(joined, runs)
        expected = sum(t[c] for t in totals.values() for c in (
            "lost", "lost_after_consume", "duplicated", "unexpected", "recovered_info", "recovered_fail"))
        ctx.staging.write(_anomalies(joined, keys, expected)
                          .unionByName(offset_anomalies(observations, polled)), "queue_ids")
        found = ctx.staging.read("queue_ids")
        for run, counts in offset_totals(found, runs).items():
            totals[run].update(counts)
        return (found, sections(ctx, found, totals, runs, audited),
                _order_sections(ctx, joined, polled, runs))
    finally:
        joined.unpersist()


def sections(ctx: CheckContext, found: DataFrame, totals: dict[int, dict[str, int]],
             runs: list[int], audited: list[int]) -> dict[int, dict]:
    """Queue sections with examples per category (the first ID_EXAMPLES by send time)."""
    examples: dict[int, dict[str, list]] = {run: {} for run in runs}
    order = [F.col("first_send_s").asc_nulls_last(), F.col("offset").asc_nulls_last(), F.col("id")]
    for row in first_rows(found, ["run", "category"], order, ID_EXAMPLES):
        examples[row["run"]].setdefault(row["category"], []).append(_example(row))
    return {run: queue_section(totals[run], examples[run], ctx.runs[run].spec.tolerates_duplicates,
                               audit_summary(run in audited, totals[run]))
            for run in runs}


def _order_sections(ctx: CheckContext, joined: DataFrame, items: DataFrame,
                    runs: list[int]) -> dict[int, dict]:
    ordered = [run for run in runs if ctx.runs[run].spec.ordered]
    sections = {run: order_section(False, 0, 0, []) for run in runs}
    if not ordered:
        return sections
    scanned = order_scan(joined.filter(F.col("run").isin(ordered)),
                         items.filter(F.col("run").isin(ordered)))
    counts = {row["run"]: row for row in scanned.groupBy("run").agg(
        F.count_if(F.col("violation")).alias("violations"),
        F.count_distinct("key").alias("keys")).collect()}
    examples: dict[int, list] = {run: [] for run in ordered}
    for row in first_rows(scanned.filter("violation"), ["run"], [F.col("order")], ORDER_EXAMPLES):
        examples[row["run"]].append({
            "key": row["key"], "id": row["id"], "consumed_after": row["consumed_after"],
            "acknowledged_s": row["ok_complete"] / 1e9,
            "later_send_s": row["latest_earlier_send"] / 1e9,
            "consumed_s": row["order"] // _POSITIONS / 1e9})
    for run in ordered:
        found = counts.get(run)
        sections[run] = order_section(True, found["violations"] if found else 0,
                                      found["keys"] if found else 0, examples[run])
    return sections
