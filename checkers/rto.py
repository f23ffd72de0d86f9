"""The `rto` checker: how long writes were unavailable after each fault.

Definitions (docs/history-format.md repeats them for report readers):

- A write is an operation in ops.WRITE_FUNCTIONS. It *succeeded* when it
  completed ok, or failed only because a cas precondition did not hold (the
  system answered). Every other completion, including an invocation that
  never completed, is a failed write.
- Per fault window [start, stop): the outage begins at the first failed write
  that was invoked before the stop and completed at or after the start (at
  its invoke time, but not before the start: a write already in flight when
  the fault hit counts from the fault). It ends at the completion of the
  first successful write invoked at or after the outage began. The RTO of
  the window is the difference; without a failed write it is 0.
- A window whose outage has no successful write after it before the end of
  the run is "not recovered": it fails the checker.
- Availability = successful writes / completed-or-closed writes, per window
  (writes invoked in it), inside any window and outside all windows.
- run.json may set `rto_threshold_s` (every window's RTO must stay at or
  under it) and `min_availability` (for writes inside fault windows).

Windows are few, writes are many: each step is one scan of the writes joined
with a broadcast table of windows.
"""
from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from .context import CheckContext, RunFacts
from .ops import PRECONDITION_FAILED_ERRORS, WRITE_FUNCTIONS
from .verdict import UNKNOWN
from .windows import LONG_MAX, FaultWindow



def writes_of(history: DataFrame) -> DataFrame:
    """run, invoke_time, end (completion; never for dangling), ok, complete_time, in_fault."""
    answered = (F.col("type") == "ok") | (
        (F.col("type") == "fail") & F.col("error").isin(*PRECONDITION_FAILED_ERRORS))
    return history.filter(F.col("f").isin(*WRITE_FUNCTIONS)).select(
        "run", "invoke_time", "complete_time",
        F.coalesce("complete_time", F.lit(LONG_MAX)).alias("end"),
        F.coalesce(answered, F.lit(False)).alias("ok"),
        (F.size("faults") > 0).alias("in_fault"))


def _window_table(spark: SparkSession, runs: list[RunFacts]) -> DataFrame:
    rows = [(r.index, w.id, w.start, LONG_MAX if w.stop is None else w.stop)
            for r in runs for w in r.windows]
    return spark.createDataFrame(rows, "w_run int, window int, start long, stop long")


def window_stats(writes: DataFrame, windows: DataFrame) -> dict[tuple[int, int], dict[str, Any]]:
    """Per window: writes invoked in it, how many succeeded, and the first failure."""
    after_start = F.col("invoke_time") >= F.col("start")
    hit = (F.col("run") == F.col("w_run")) & (F.col("invoke_time") < F.col("stop")) & (
        after_start | (F.col("end") >= F.col("start")))
    rows = (writes.join(F.broadcast(windows), hit).groupBy("w_run", "window").agg(
        F.count_if(after_start).alias("writes"),
        F.count_if(after_start & F.col("ok")).alias("ok_writes"),
        F.min(F.when(~F.col("ok") & (F.col("end") >= F.col("start")),
                     F.greatest("invoke_time", "start"))).alias("outage_from"))
            .collect())
    return {(r["w_run"], r["window"]): r.asDict() for r in rows}


def recoveries(spark: SparkSession, writes: DataFrame,
               outages: list[tuple[int, int, int]]) -> dict[tuple[int, int], int]:
    """Per outage (run, window, from): completion of the first success invoked after it."""
    if not outages:
        return {}
    starts = spark.createDataFrame(outages, "o_run int, window int, outage_from long")
    after = (F.col("run") == F.col("o_run")) & (F.col("invoke_time") >= F.col("outage_from"))
    rows = (writes.filter("ok").join(F.broadcast(starts), after).groupBy("o_run", "window")
            .agg(F.min("complete_time").alias("recovered")).collect())
    return {(r["o_run"], r["window"]): r["recovered"] for r in rows}


def availability(writes: DataFrame) -> dict[int, dict[str, dict[str, int]]]:
    """Per run: writes and successful writes inside and outside fault windows."""
    result: dict[int, dict[str, dict[str, int]]] = {}
    for r in writes.groupBy("run", "in_fault").agg(
            F.count(F.lit(1)).alias("writes"), F.count_if(F.col("ok")).alias("ok")).collect():
        side = "in_faults" if r["in_fault"] else "outside_faults"
        result.setdefault(r["run"], {})[side] = {"writes": r["writes"], "ok": r["ok"]}
    return result


def _share(ok: int, total: int) -> float | None:
    return None if total == 0 else ok / total


def window_report(window: FaultWindow, stats: dict[str, Any] | None, recovered: int | None,
                  run_end: int, threshold_s: float | None) -> dict[str, Any]:
    """One window's RTO entry (pure)."""
    stats = stats or {"writes": 0, "ok_writes": 0, "outage_from": None}
    outage_from = stats["outage_from"]
    entry = {**window.as_json(), "writes": stats["writes"], "ok_writes": stats["ok_writes"],
             "availability": _share(stats["ok_writes"], stats["writes"]),
             "outage_from_s": None if outage_from is None else outage_from / 1e9,
             "recovered_at_s": None, "unavailable_s": 0.0, "recovered": True,
             "over_threshold": False}
    if outage_from is None:
        return entry
    if recovered is None:
        entry.update(recovered=False, unavailable_s=max(0, run_end - outage_from) / 1e9)
        return entry
    unavailable = (recovered - outage_from) / 1e9
    entry.update(recovered_at_s=recovered / 1e9, unavailable_s=unavailable,
                 over_threshold=threshold_s is not None and unavailable > threshold_s)
    return entry


def rto_section(run: RunFacts, windows: list[dict[str, Any]],
                avail: dict[str, dict[str, int]]) -> dict[str, Any]:
    """The rto verdict of one run from its window entries and availability counts (pure)."""
    spec = run.spec
    sides = {side: {**avail.get(side, {"writes": 0, "ok": 0})} for side in ("in_faults", "outside_faults")}
    for counts in sides.values():
        counts["availability"] = _share(counts["ok"], counts["writes"])
    problems = [f"window {w['id']} ({w['fault']}) never recovered before the run ended"
                for w in windows if not w["recovered"]]
    problems += [f"window {w['id']} ({w['fault']}): {w['unavailable_s']:.3f}s unavailable, "
                 f"over the {spec.rto_threshold_s}s threshold" for w in windows if w["over_threshold"]]
    in_faults = sides["in_faults"]["availability"]
    if spec.min_availability is not None and in_faults is not None and in_faults < spec.min_availability:
        problems.append(f"availability during faults {in_faults:.3f} is under {spec.min_availability}")
    doubts = []
    if windows and not any(sides[s]["writes"] for s in sides):
        doubts.append("no writes in the history: nothing to measure recovery with")
    return {
        "valid": False if problems else UNKNOWN if doubts else True,
        "problems": problems + doubts,
        "threshold_s": spec.rto_threshold_s,
        "min_availability": spec.min_availability,
        "windows": windows,
        "not_recovered": [w["id"] for w in windows if not w["recovered"]],
        "max_unavailable_s": max((w["unavailable_s"] for w in windows), default=0.0),
        "availability": sides,
    }


def check(ctx: CheckContext) -> list[dict[str, Any]]:
    """RTO and availability of every run, in three scans of the writes of all runs."""
    writes = writes_of(ctx.history)
    with_windows = [r for r in ctx.runs if r.windows]
    stats = window_stats(writes, _window_table(ctx.spark, with_windows)) if with_windows else {}
    outages = [(run, window, s["outage_from"]) for (run, window), s in stats.items()
               if s["outage_from"] is not None]
    recovered = recoveries(ctx.spark, writes, outages)
    avail = availability(writes)
    sections = []
    for run in ctx.runs:
        entries = [window_report(w, stats.get((run.index, w.id)), recovered.get((run.index, w.id)),
                                 run.end, run.spec.rto_threshold_s) for w in run.windows]
        sections.append({"rto": rto_section(run, entries, avail.get(run.index, {}))})
    return sections
