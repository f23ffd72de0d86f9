"""The `linearizable` checker: each key's history through the JVM engine, one Spark task per group of keys.

The keys of a run in one Spark partition go to the engine in one call: they
are searched in parallel threads, and once one is proven not linearizable the
others stop (verdict unknown, cause "stopped", counted as `stopped_keys`).

Linearizability is local, so a history of independent keys is checked key by
key (P-compositionality). Spark partitions the operations by (run, key); each
Python worker turns a key's operations back into a Jepsen-style event list and
calls `checkers.knossos.analysis` with the run's per-key time budget (the
engine answers `unknown` when the budget runs out). Only the small verdicts
travel back to the driver.
"""
from __future__ import annotations

import functools
import importlib
import itertools
import json
from typing import Any, Callable, Iterable, Iterator

from pyspark.sql import functions as F

from .context import CheckContext, RunFacts
from .ops import AUDIT_FUNCTION
from .registry import Sections
from .routes import route
from .spark.shipping import use_shipped_engine
from .verdict import UNKNOWN, merge_valid

Analyze = Callable[..., dict[str, Any]]
FAILURE_EXAMPLES = 5
UNKNOWN_EXAMPLES = 20
_COLUMNS = ("run", "key", "index", "process", "f", "type", "invoke_time", "complete_time",
            "invoke_value", "value")


def _json(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def key_history(ops: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Operations of one key -> the engine's event list, in real-time order.

    At equal times an invocation comes before a completion, so ops touching
    the same instant count as concurrent (never a false "happened before").
    Both events carry the operation's `index` in checked/history.parquet, so a
    counterexample points at a row there.
    """
    events = []
    for op in ops:
        base = {"process": op["process"], "f": op["f"]}
        events.append(({**base, "type": "invoke", "value": _json(op["invoke_value"]),
                        "time": op["invoke_time"], "index": op["index"]},
                       (op["invoke_time"], 0, op["index"])))
        if op["complete_time"] is not None:
            events.append(({**base, "type": op["type"], "value": _json(op["value"]),
                            "time": op["complete_time"], "index": op["index"]},
                           (op["complete_time"], 1, op["index"])))
    return [event for event, _ in sorted(events, key=lambda e: e[1])]


def check_key(model: str, ops: list[dict[str, Any]], time_limit: float,
              analyze: Analyze) -> dict[str, Any]:
    """The engine's verdict on one key; an error becomes `unknown` with the error."""
    try:
        return analyze(model, key_history(ops), time_limit=time_limit)
    except Exception as exc:  # a bad history or a missing engine must not kill the job
        return {"valid": UNKNOWN, "error": f"{type(exc).__name__}: {exc}"}


def check_partition(rows: Iterator[Any], models: dict[int, str], limits: dict[int, float],
                    analyze: Analyze | None = None) -> Iterator[tuple[int, str | None, str]]:
    """Spark mapPartitions body: rows sorted by (run, key, index) -> (run, key, verdict JSON).

    With the real engine (no `analyze` given) the keys of one run in this
    partition are checked together, in parallel JVM threads, and once one key
    is proven not linearizable the others still searching stop (verdict
    unknown, cause "stopped"); an `analyze` function checks key by key.
    """
    by_run = itertools.groupby(rows, key=lambda r: r["run"])
    if analyze is None:
        use_shipped_engine()
        try:
            from checkers.knossos import analysis, analyze_keys
        except Exception as exc:
            error = f"linearizability engine not available: {type(exc).__name__}: {exc}"
            analyze = functools.partial(_unavailable, error)
        else:
            for run, run_rows in by_run:
                keys = {key: [r.asDict() if hasattr(r, "asDict") else r for r in group]
                        for key, group in itertools.groupby(run_rows, key=lambda r: r["key"])}
                for key, result in _check_keys(models[run], keys, limits[run], analyze_keys,
                                               analysis).items():
                    yield run, key, json.dumps(result, default=str)
            return
    for run, run_rows in by_run:
        for key, group in itertools.groupby(run_rows, key=lambda r: r["key"]):
            ops = [r.asDict() if hasattr(r, "asDict") else r for r in group]
            yield run, key, json.dumps(check_key(models[run], ops, limits[run], analyze),
                                       default=str)


def _check_keys(model: str, keys: dict[Any, list[dict[str, Any]]], time_limit: float,
                analyze_keys: Callable[..., dict], analyze: Analyze) -> dict[Any, dict[str, Any]]:
    """All keys in one engine call; if that fails (a malformed key history),
    key by key, so the error stays with its key."""
    try:
        return analyze_keys(model, {k: key_history(ops) for k, ops in keys.items()},
                            time_limit=time_limit)
    except Exception:
        return {k: check_key(model, ops, time_limit, analyze) for k, ops in keys.items()}


def _unavailable(error: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
    raise RuntimeError(error)


def engine_problem() -> str | None:
    """Why the engine cannot run here, or None (checked once on the driver)."""
    try:
        importlib.import_module("checkers.knossos")
    except Exception as exc:
        return f"linearizability engine not available: {type(exc).__name__}: {exc}"
    return None


def linearizable_section(model: str, time_limit: float,
                         verdicts: list[tuple[str | None, dict[str, Any]]]) -> dict[str, Any]:
    """Merge per-key verdicts (pure): false > unknown > true."""
    failures = [{**v, "key": key} for key, v in verdicts if v.get("valid") is False]
    stopped = [key for key, v in verdicts if v.get("cause") == "stopped"]
    unknown = [{"key": key, "cause": v.get("cause"), "error": v.get("error")}
               for key, v in verdicts if v.get("valid") == UNKNOWN and v.get("cause") != "stopped"]
    problems = [f"key {f['key']}: cannot linearize {_shown(f.get('op'))}" for f in failures]
    problems += [f"key {u['key']}: unknown ({u['cause'] or u['error']})" for u in unknown]
    return {
        "valid": merge_valid(v.get("valid", UNKNOWN) for _, v in verdicts),
        "problems": problems[:FAILURE_EXAMPLES],
        "model": model,
        "time_limit_s": time_limit,
        "keys": len(verdicts),
        "counts": {"valid": len(verdicts) - len(failures) - len(unknown) - len(stopped),
                   "invalid": len(failures), "unknown": len(unknown)},
        "stopped_keys": len(stopped),
        "failures": failures[:FAILURE_EXAMPLES],
        "unknown": unknown[:UNKNOWN_EXAMPLES],
    }


def _shown(op: dict[str, Any] | None) -> str:
    """An operation as one line: `ok read 2 by process 1 (#3)`."""
    if not op:
        return "?"
    where = f" (#{op['index']})" if "index" in op else ""
    return (f"{op.get('type')} {op.get('f')} {json.dumps(op.get('value'), default=str)} "
            f"by process {op.get('process')}{where}")


class LinearizableChecker:
    """Linearizability of every run whose workload has a model (checkers/routes.py)."""

    name = "linearizability"
    sections = ("linearizable",)

    def __init__(self, analyze: Analyze | None = None) -> None:
        self.analyze = analyze  # None: the JVM engine, several keys per call

    def applies_to(self, run: RunFacts) -> bool:
        found = route(run.workload)
        return found is not None and found.model is not None

    def not_applicable(self, run: RunFacts) -> Sections:
        if route(run.workload) is None:
            return {"linearizable": {"valid": UNKNOWN, "checked": False,
                                     "reason": f"no linearizability model for workload {run.workload!r}"}}
        return {"linearizable": {
            "valid": True, "checked": False,
            "reason": f"not applicable: the {run.workload} workload is checked by the queue checker"}}

    def check(self, ctx: CheckContext, runs: list[RunFacts]) -> list[Sections]:
        models = {r.index: route(r.workload).model for r in runs}
        problem = engine_problem() if self.analyze is None else None
        if problem:
            sections = {run: {"valid": UNKNOWN, "checked": False, "model": model, "reason": problem,
                              "problems": [problem]} for run, model in models.items()}
        else:
            sections = self._verdicts(ctx, models, {r.index: r.spec.linearizable_time_limit_s for r in runs})
        return [{"linearizable": sections[r.index]} for r in runs]

    def _verdicts(self, ctx: CheckContext, models: dict[int, str],
                  limits: dict[int, float]) -> dict[int, dict[str, Any]]:
        """Each run's section from its keys' verdicts (one Spark job for all runs)."""
        ops = (ctx.history_of(list(models)).filter(F.col("f") != AUDIT_FUNCTION).select(*_COLUMNS)
               .repartition("run", "key").sortWithinPartitions("run", "key", "index"))
        body = functools.partial(check_partition, models=models, limits=limits, analyze=self.analyze)
        per_run: dict[int, list] = {run: [] for run in models}
        for run, key, verdict in ops.rdd.mapPartitions(body).collect():
            per_run[run].append((key, json.loads(verdict)))
        return {run: linearizable_section(models[run], limits[run], per_run[run]) for run in models}
