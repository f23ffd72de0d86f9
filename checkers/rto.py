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
- Availability of a window is measured over time, so that clients blocked on
  a stalled master cannot hide an outage by making few attempts: the share of
  the window's 100 ms buckets in which at least one write succeeded.
  `availability_attempts` keeps the attempt ratio (successful writes / writes
  invoked in the window) as a second figure, and `goodput` compares the
  window's successful writes per second with the requested write rate.
- `detection_s` is the profile's failure detection time (run.json's `checks`), and
  `exercises_failover` says whether the window lasted detection + margin.
- `failovers` counts changes of the node that served successful writes (per
  second, the node that served most of them): with one broker group only
  the master accepts writes, so each change is a master (leader) change.
- run.json may set `rto_threshold_s` (every window's RTO must stay at or
  under it) and `min_availability` (for writes inside fault windows).

Windows are few, writes are many: each step is one scan of the writes joined
with a broadcast table of windows.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from records import CheckInputs

from .context import CheckContext, RunFacts
from .spark.frames import local_frame
from .ops import PRECONDITION_FAILED_ERRORS, WRITE_FUNCTIONS
from .verdict import UNKNOWN
from .windows import LONG_MAX, FaultWindow

BUCKET_NS = 100_000_000      # availability over time: 100 ms buckets
FAILOVER_BUCKET_NS = 1_000_000_000


def writes_of(history: DataFrame) -> DataFrame:
    """run, invoke_time, end (completion; never for dangling), ok, complete_time, in_fault."""
    answered = (F.col("type") == "ok") | (
        (F.col("type") == "fail") & F.col("error").isin(*PRECONDITION_FAILED_ERRORS))
    return history.filter(F.col("f").isin(*WRITE_FUNCTIONS)).select(
        "run", "invoke_time", "complete_time", "node",
        F.coalesce("complete_time", F.lit(LONG_MAX)).alias("end"),
        F.coalesce(answered, F.lit(False)).alias("ok"),
        (F.size("faults") > 0).alias("in_fault"))


def _window_table(spark: SparkSession, runs: list[RunFacts]) -> DataFrame:
    rows = [(r.index, w.id, w.start, LONG_MAX if w.stop is None else w.stop)
            for r in runs for w in r.windows]
    return local_frame(spark, rows, "w_run int, window int, start long, stop long")


def window_stats(writes: DataFrame, windows: DataFrame) -> dict[tuple[int, int], dict[str, Any]]:
    """Per window: writes invoked in it, how many succeeded, the first failure, and the
    successful completions inside it (and in how many 100 ms buckets): one join."""
    after_start = F.col("invoke_time") >= F.col("start")
    hit = (F.col("invoke_time") < F.col("stop")) & (after_start | (F.col("end") >= F.col("start")))
    inside = F.col("ok") & (F.col("complete_time") >= F.col("start")) & (F.col("complete_time") < F.col("stop"))
    rows = (writes.join(F.broadcast(windows), (F.col("run") == F.col("w_run")) & (hit | inside))
            .groupBy("w_run", "window").agg(
                F.count_if(hit & after_start).alias("writes"),
                F.count_if(hit & after_start & F.col("ok")).alias("ok_writes"),
                F.min(F.when(hit & ~F.col("ok") & (F.col("end") >= F.col("start")),
                             F.greatest("invoke_time", "start"))).alias("outage_from"),
                F.count_distinct(F.when(inside, F.floor((F.col("complete_time") - F.col("start")) / BUCKET_NS)))
                .alias("ok_buckets"),
                F.count_if(inside).alias("ok_completions"))
            .collect())
    return {(r["w_run"], r["window"]): r.asDict() for r in rows}


def recoveries(spark: SparkSession, writes: DataFrame,
               outages: list[tuple[int, int, int]]) -> dict[tuple[int, int], int]:
    """Per outage (run, window, from): completion of the first success invoked after it."""
    if not outages:
        return {}
    starts = local_frame(spark, outages, "o_run int, window int, outage_from long")
    after = (F.col("run") == F.col("o_run")) & (F.col("invoke_time") >= F.col("outage_from"))
    rows = (writes.filter("ok").join(F.broadcast(starts), after).groupBy("o_run", "window")
            .agg(F.min("complete_time").alias("recovered")).collect())
    return {(r["o_run"], r["window"]): r["recovered"] for r in rows}


def write_counts(writes: DataFrame) -> list[Any]:
    """Writes per (run, in_fault, ok), successful ones also per second and serving node:
    one aggregation for both `availability` and `failovers` (small: runs x seconds x nodes)."""
    served = F.col("ok") & F.col("node").isNotNull()
    second = F.floor(F.col("complete_time") / FAILOVER_BUCKET_NS)
    return (writes.groupBy("run", "in_fault", "ok", F.when(served, second).alias("second"),
                           F.when(served, F.col("node")).alias("node"))
            .agg(F.count(F.lit(1)).alias("writes")).collect())


def availability(counts: list[Any]) -> dict[int, dict[str, dict[str, int]]]:
    """Per run: writes and successful writes inside and outside fault windows (from write_counts)."""
    result: dict[int, dict[str, dict[str, int]]] = {}
    for r in counts:
        side = "in_faults" if r["in_fault"] else "outside_faults"
        totals = result.setdefault(r["run"], {}).setdefault(side, {"writes": 0, "ok": 0})
        totals["writes"] += r["writes"]
        totals["ok"] += r["writes"] if r["ok"] else 0
    return result


def failovers(counts: list[Any]) -> dict[int, dict[str, Any]]:
    """Per run: how often the node serving successful writes changed, and the sequence
    (per second, the node that served most successful writes; ties go to the greater
    name). From write_counts."""
    per_node: dict[tuple[int, int], dict[str, int]] = {}
    for r in counts:
        if r["node"] is not None:
            nodes = per_node.setdefault((r["run"], r["second"]), {})
            nodes[r["node"]] = nodes.get(r["node"], 0) + r["writes"]
    result: dict[int, dict[str, Any]] = {}
    for (run, second), nodes in sorted(per_node.items()):
        node = max(nodes, key=lambda name: (nodes[name], name))
        entry = result.setdefault(run, {"failovers": 0, "masters": []})
        if not entry["masters"] or entry["masters"][-1]["node"] != node:
            if entry["masters"]:
                entry["failovers"] += 1
            entry["masters"].append({"node": node, "from_s": float(second)})
    return result


def _share(ok: int, total: int) -> float | None:
    return None if total == 0 else ok / total


def window_report(window: FaultWindow, stats: dict[str, Any] | None, recovered: int | None,
                  run_end: int, threshold_s: float | None, failover: FailoverFacts | None = None
                  ) -> dict[str, Any]:
    """One window's RTO entry (pure)."""
    stats = stats or {"writes": 0, "ok_writes": 0, "outage_from": None}
    outage_from = stats["outage_from"]
    length = max(0, (run_end if window.stop is None else window.stop) - window.start)
    buckets = max(1, -(-length // BUCKET_NS))
    ok_completions = stats.get("ok_completions", 0)
    entry = {**window.as_json(), "writes": stats["writes"], "ok_writes": stats["ok_writes"],
             "availability": min(1.0, stats.get("ok_buckets", 0) / buckets),
             "availability_attempts": _share(stats["ok_writes"], stats["writes"]),
             "goodput": _goodput(ok_completions, length, failover),
             **_failover_fields(length, failover),
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


@dataclass(frozen=True)
class FailoverFacts:
    """What the run says about failover: detection time, needed window, requested write rate."""

    detection_s: float | None
    needed_s: float | None
    write_rate: float | None


def _failover_fields(length_ns: int, facts: FailoverFacts | None) -> dict[str, Any]:
    if facts is None or facts.needed_s is None:
        return {"detection_s": None, "exercises_failover": None}
    return {"detection_s": facts.detection_s, "exercises_failover": length_ns / 1e9 >= facts.needed_s}


def _goodput(ok: int, length_ns: int, facts: FailoverFacts | None) -> float | None:
    """Successful writes per second in the window over the requested write rate."""
    if facts is None or not facts.write_rate or length_ns <= 0:
        return None
    return round(ok / (length_ns / 1e9) / facts.write_rate, 4)


def failover_facts(spec: CheckInputs) -> FailoverFacts:
    """Detection time and needed window of the run's profile and timing, as the harness wrote them."""
    return FailoverFacts(spec.detection_s, spec.failover_window_s, spec.write_rate)


def rto_section(run: RunFacts, windows: list[dict[str, Any]],
                avail: dict[str, dict[str, int]], changes: dict[str, Any] | None = None) -> dict[str, Any]:
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
        "failovers": (changes or {}).get("failovers", 0),
        "masters": (changes or {}).get("masters", []),
        "windows_exercising_failover": sum(1 for w in windows if w.get("exercises_failover")),
        "short_windows": [w["id"] for w in windows if w.get("exercises_failover") is False],
    }


def check(ctx: CheckContext) -> list[dict[str, Any]]:
    """RTO and availability of every run, in three scans of the writes of all runs."""
    writes = writes_of(ctx.history)
    with_windows = [r for r in ctx.runs if r.windows]
    stats = window_stats(writes, _window_table(ctx.spark, with_windows)) if with_windows else {}
    outages = [(run, window, s["outage_from"]) for (run, window), s in stats.items()
               if s["outage_from"] is not None]
    recovered = recoveries(ctx.spark, writes, outages)
    counts = write_counts(writes)
    avail, changes = availability(counts), failovers(counts)
    sections = []
    for run in ctx.runs:
        facts = failover_facts(run.spec)
        entries = [window_report(w, stats.get((run.index, w.id)), recovered.get((run.index, w.id)),
                                 run.end, run.spec.rto_threshold_s, facts) for w in run.windows]
        sections.append({"rto": rto_section(run, entries, avail.get(run.index, {}),
                                            changes.get(run.index))})
    return sections
