"""knossos-py: `analysis(model, history)` with a Knossos-shaped result.

The history is split into independent parts first (by `key`, and a
multi-register by groups of registers that no transaction spans), each part
is checked alone, and the verdicts merge as Jepsen's do: false > unknown > true.
"""
from __future__ import annotations

import time
from typing import Any, Hashable, Iterable

from ..verdict import UNKNOWN, is_verdict
from . import jvm
from .history import HistoryError, Operation, key_of, operations, split_by_key, split_positions
from .models import MODELS, spec

DEFAULT_TIME_LIMIT = 60.0
MEMORY_SHARE = 0.5
"""Share of the JVM heap one check's configuration cache may use before it
gives up with `unknown` (cause "memory") instead of an OutOfMemoryError."""


def analysis(model: str, history: Iterable[dict], time_limit: float | None = DEFAULT_TIME_LIMIT,
             init: Any = None, engine: str = "jvm", max_configs: int = 0,
             nil_reads: str = "absent") -> dict:
    """Checks `history` against `model`; returns a JSON-serializable dict:
    valid (True/False/"unknown"), op (the completion that could not be
    linearized), previous-ok, configs (up to 10 of: model state, last op,
    pending ops), cause (why unknown), analyzer, time (seconds), and the key
    of the failing part when the history was split.

    `nil_reads`: "absent" (a read of null saw an empty register: our
    workloads) or "unknown" (it matches anything: Knossos' convention, which
    its EDN test histories need). `max_configs` caps the configuration cache
    (0: only the memory guard). `engine="knossos"` runs a Knossos jar named by
    KNOSSOS_JAR instead (Knossos always reads nil as unknown).
    """
    if engine in ("jvm", "knossos"):
        jvm.engine()  # JVM start-up is reported by jvm.startup_seconds(), not as check time
    started = time.perf_counter()
    history = list(history)
    if engine == "knossos":
        from . import knossos_jar
        result = knossos_jar.analysis(model, history, time_limit=time_limit, init=init)
        result["time"] = time.perf_counter() - started
        return result
    if engine != "jvm":
        raise ValueError(f"unknown engine {engine!r}; use 'jvm' or 'knossos'")
    parts = partitions(model, history, init)
    call = time.perf_counter()
    results = _check_parts(model, parts, time_limit, max_configs, nil_reads, groups=[0] * len(parts))
    merged = _merged(parts, results)
    merged["engine-seconds"] = time.perf_counter() - call
    merged["time"] = time.perf_counter() - started
    return merged


def analyze_batch(model: str, histories: list[list[dict]], time_limit: float | None = DEFAULT_TIME_LIMIT,
                  init: Any = None, max_configs: int = 0, nil_reads: str = "absent") -> list[dict]:
    """`analysis` of many histories in one JVM call: each history has its own
    time limit (shared by its parts); histories run in parallel, and the parts
    of one history stop once one of them is proven invalid."""
    jvm.engine()
    started = time.perf_counter()
    all_parts = [partitions(model, h, init) for h in histories]
    flat = [part for parts in all_parts for part in parts]
    groups = [i for i, parts in enumerate(all_parts) for _ in parts]
    results = iter(_check_parts(model, flat, time_limit, max_configs, nil_reads, groups=groups))
    out = []
    for parts in all_parts:
        mine = [next(results) for _ in parts]
        merged = _merged(parts, mine)
        merged["engine-seconds"] = sum(r["engine-seconds"] for r in mine)
        out.append(merged)
    for r in out:
        r["time"] = (time.perf_counter() - started) / max(1, len(out))
    return out


def analyze_keys(model: str, histories: dict[Hashable, list[dict]],
                 time_limit: float | None = DEFAULT_TIME_LIMIT, init: Any = None,
                 nil_reads: str = "absent") -> dict[Hashable, dict]:
    """A verdict per key for histories already split by key (the Spark
    pipeline's groups), checked as the parts of one history: in parallel,
    sharing the time limit, and once one key is proven invalid the keys still
    searching stop (their verdict is unknown with cause "stopped")."""
    jvm.engine()
    keys = list(histories)
    all_parts = [partitions(model, histories[k], init) for k in keys]
    flat = [part for parts in all_parts for part in parts]
    results = iter(_check_parts(model, flat, time_limit, 0, nil_reads, groups=[0] * len(flat)))
    out = {}
    for key, parts in zip(keys, all_parts):
        out[key] = {**_merged(parts, [next(results) for _ in parts]), "key": key}
    return out


Part = tuple[Hashable, list[Operation], Any]


def _merged(parts: list[Part], results: list[dict]) -> dict:
    """The merged verdict with totals over the parts: how many, how many were
    stopped early, the engine's CPU time over all of them."""
    merged = merge([(label, r) for (label, _, _), r in zip(parts, results)])
    merged["partitions"] = len(parts)
    merged["stopped"] = sum(r.get("cause") == "stopped" for r in results)
    merged["engine-cpu-seconds"] = sum(r.get("engine-cpu-seconds", 0) for r in results)
    return merged


def partitions(model: str, history: list[dict], init: Any = None) -> list[Part]:
    """Independent parts of a history: (label, paired ops, initial state)."""
    model_spec = spec(model)
    init = model_spec.default_init if init is None else init
    if any(isinstance(e, dict) and "key" in e and key_of(e) is not None for e in history):
        by_key = split_positions(history)
    else:
        by_key = {None: None}
    parts: list[Part] = []
    for key in sorted(by_key, key=_sort_key):
        positions = by_key[key]
        ops = operations(history if positions is None else [history[p] for p in positions],
                         positions)
        if model == "multi-register":
            parts += [(key if len(groups) == 1 else (key, regs), group, _restrict(init, regs))
                      for groups in [_register_groups(ops)] for regs, group in groups]
        else:
            parts.append((key, ops, init))
    return parts


def _sort_key(key: Hashable) -> tuple[str, str]:
    return (type(key).__name__, str(key))


def _restrict(init: Any, registers: tuple) -> Any:
    if not isinstance(init, dict):
        return init
    return {k: v for k, v in init.items() if k in registers}


def _register_groups(ops: list[Operation]) -> list[tuple[tuple, list[Operation]]]:
    """Splits multi-register ops into groups of registers no txn spans
    (union-find); each group is an independent object."""
    parent: dict[Any, Any] = {}

    def find(x: Any) -> Any:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    touched: list[list] = []
    for op in ops:
        micro = op.output if op.ok and isinstance(op.output, list) else op.input
        regs = [tuple(m[1]) if isinstance(m[1], list) else m[1]
                for m in (micro if isinstance(micro, list) else [])
                if isinstance(m, list) and len(m) == 3]
        for r in regs[1:]:
            parent[find(r)] = find(regs[0])
        if regs:
            find(regs[0])
        touched.append(regs)
    groups: dict[Any, list[Operation]] = {}
    members: dict[Any, set] = {}
    for op, regs in zip(ops, touched):
        root = find(regs[0]) if regs else None
        groups.setdefault(root, []).append(op)
        members.setdefault(root, set()).update(regs)
    return [(tuple(sorted(members[r], key=str)), groups[r]) for r in groups]


def _check_parts(model: str, parts: list[Part], time_limit: float | None, max_configs: int,
                 nil_reads: str, groups: list[int]) -> list[dict]:
    """One JVM call; parts with the same group number are one history's parts
    (their time limit counts from when the engine starts on them together)."""
    budget = int(jvm.max_heap_bytes() * MEMORY_SHARE)
    prepared = [jvm.encode(model, ops, init, time_limit, max_configs, budget, nil_reads)
                for _, ops, init in parts]
    raw = jvm.check_prepared(prepared, groups=groups)
    return [decode(p, r) for p, r in zip(prepared, raw)]


def decode(prepared: jvm.Prepared, raw: dict) -> dict:
    """Turns the engine's op numbers back into the history's own events."""
    result: dict[str, Any] = {"valid": raw["valid"], "analyzer": "wgl", "model": prepared.model,
                              "op": None, "previous-ok": None, "configs": [], "cause": None,
                              "configs-explored": raw.get("configs-explored"),
                              "engine-seconds": raw.get("nanos", 0) / 1e9,
                              "engine-cpu-seconds": raw.get("cpu-nanos", 0) / 1e9}
    if is_verdict(raw["valid"], UNKNOWN):
        result["cause"] = raw.get("cause")
        result["detail"] = raw.get("detail")
    if is_verdict(raw["valid"], False):
        ops = prepared.ops
        failing = ops[raw["op"]]
        result["op"] = failing.shown_completion()
        result["previous-ok"] = previous_ok(ops, failing)
        result["configs"] = [{
            "model": c["model"],
            "last-op": None if c["last-op"] is None else ops[c["last-op"]].shown_completion(),
            "pending": [ops[i].shown_invoke() for i in c["pending"]],
            "pending-count": c["pending-count"],
        } for c in raw["configs"]]
    return result


def previous_ok(ops: list[Operation], failing: Operation) -> dict | None:
    """The last ok completion before the failing one, as Knossos reports it."""
    best = None
    for op in ops:
        if op.ret is not None and op.ret < failing.ret and (best is None or op.ret > best.ret):
            best = op
    return None if best is None else best.shown_completion()


def merge(results: list[tuple[Hashable, dict]]) -> dict:
    """One verdict for a split history: the first invalid part, else the first
    unknown one (not counting parts stopped because another was invalid),
    else valid."""
    for wanted in (False, UNKNOWN):
        for label, r in results:
            if is_verdict(r["valid"], wanted) and r.get("cause") != "stopped":
                return {**r, "key": _json_key(label)}
    for label, r in results:
        if r.get("cause") == "stopped":  # not proven either way
            return {**r, "key": _json_key(label)}
    if not results:
        return {"valid": True, "analyzer": "wgl", "op": None, "previous-ok": None,
                "configs": [], "cause": None, "key": None}
    for label, r in results:
        if not is_verdict(r["valid"], True):  # neither true, false nor "unknown": proves nothing
            return {**r, "valid": UNKNOWN, "cause": f"not a verdict: {r['valid']!r}",
                    "key": _json_key(label)}
    return {**results[0][1], "key": None}


def _json_key(label: Hashable) -> Any:
    return list(label) if isinstance(label, tuple) else label


__all__ = ["analysis", "analyze_batch", "analyze_keys", "partitions", "split_by_key", "MODELS", "HistoryError"]
