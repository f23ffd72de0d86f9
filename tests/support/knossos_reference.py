"""A small pure-Python linearizability checker, only to cross-check the JVM
engine in differential tests and benchmarks.

Written from the definition rather than from the Java code: a configuration
is (set of linearized ops, model state); from one, any op not yet linearized
whose call precedes the earliest return among the unlinearized ok ops may be
linearized next; the history is linearizable iff some reachable configuration
holds every ok op. Info ops have no return and need never be linearized.
Models work on the plain values, not on interned ids.
"""
from __future__ import annotations

import json
import time
from typing import Any, Callable, Iterable

from checkers.knossos.history import UNKNOWN, Operation
from checkers.knossos.models import spec

State = Any
Step = Callable[[State, Operation, bool], Iterable[State]]


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


def _unknown(value: Any, nil_unknown: bool) -> bool:
    return value is UNKNOWN or (value is None and nil_unknown)


def _register(state: State, op: Operation, nil_unknown: bool) -> Iterable[State]:
    if op.f == "read":
        if _unknown(op.output, nil_unknown) or op.output == state:
            yield state
    elif op.f == "write":
        yield op.input
    elif op.f == "cas" and state == op.input[0]:
        yield op.input[1]


def _mutex(state: State, op: Operation, nil_unknown: bool) -> Iterable[State]:
    if op.f == "acquire" and not state:
        yield True
    elif op.f == "release" and state:
        yield False


def _set(state: State, op: Operation, nil_unknown: bool) -> Iterable[State]:
    if op.f == "add":
        yield state | {op.input}
    elif op.output is UNKNOWN or op.output is None or set(op.output) == state:
        yield state


def _fifo(state: State, op: Operation, nil_unknown: bool) -> Iterable[State]:
    if op.f == "enqueue":
        yield state + (op.input,)
    elif op.output is UNKNOWN:
        yield state[1:]
    elif op.output is None:
        if not state:
            yield state
    elif state and state[0] == op.output:
        yield state[1:]


def _unordered(state: State, op: Operation, nil_unknown: bool) -> Iterable[State]:
    if op.f == "enqueue":
        yield tuple(sorted(state + (op.input,), key=repr))
    elif op.output is UNKNOWN:
        if not state:
            yield state
        for v in dict.fromkeys(state):
            i = state.index(v)
            yield state[:i] + state[i + 1:]
    elif op.output is None:
        if not state:
            yield state
    elif op.output in state:
        i = state.index(op.output)
        yield state[:i] + state[i + 1:]


def _kv(state: State, op: Operation, nil_unknown: bool) -> Iterable[State]:
    if op.f == "get":
        if _unknown(op.output, nil_unknown) or _text(op.output) == state:
            yield state
    elif op.f == "put":
        yield _text(op.input)
    else:
        yield state + _text(op.input)


def _log(state: State, op: Operation, nil_unknown: bool) -> Iterable[State]:
    if op.f == "append":
        offset = op.output.get("offset") if isinstance(op.output, dict) else None
        if offset is None or offset == len(state):
            yield state + (op.input,)
        return
    if op.output is UNKNOWN:
        yield state
        return
    offset = op.input["offset"] if isinstance(op.input, dict) else op.input
    seen = op.output.get("value") if isinstance(op.output, dict) else op.output
    there = state[offset] if 0 <= offset < len(state) else None
    if seen == there:
        yield state


def _multi_register(state: State, op: Operation, nil_unknown: bool) -> Iterable[State]:
    regs = dict(state)
    micro = op.output if op.ok and isinstance(op.output, list) else op.input
    for f, k, v in micro:
        if f == "read":
            if op.ok and not (v is None and nil_unknown) and regs.get(k) != v:
                return
        else:
            regs[k] = v
    yield tuple(sorted(regs.items(), key=repr))


STEPS: dict[str, Step] = {
    "register": _register, "cas-register": _register, "mutex": _mutex, "set": _set,
    "fifo-queue": _fifo, "unordered-queue": _unordered, "kv": _kv, "log": _log,
    "multi-register": _multi_register,
}


def initial_state(model: str, init: Any) -> State:
    init = spec(model).default_init if init is None else init
    if model == "set":
        return frozenset(init)
    if model == "fifo-queue" or model == "log":
        return tuple(init)
    if model == "unordered-queue":
        return tuple(sorted(init, key=repr))
    if model == "kv":
        return _text(init)
    if model == "multi-register":
        return tuple(sorted(init.items(), key=repr))
    if model == "mutex":
        return bool(init)
    return init


def check(model: str, ops: list[Operation], init: Any = None,
          time_limit: float | None = None, nil_reads: str = "absent") -> dict:
    """valid True/False, and for False the op that no configuration got past
    (the first ok op, in completion order, that the furthest configurations
    miss: the rule Knossos uses). "unknown" past `time_limit` seconds."""
    deadline = None if time_limit is None else time.monotonic() + time_limit
    step = STEPS[model]
    nil_unknown = nil_reads == "unknown"
    oks = sorted((op for op in ops if op.ok), key=lambda op: op.ret)
    rank = {op.number: i for i, op in enumerate(oks)}
    start = (frozenset(), initial_state(model, init))
    seen = {start}
    todo = [start]
    furthest = 0
    while todo:
        if deadline is not None and len(seen) % 512 == 0 and time.monotonic() > deadline:
            return {"valid": "unknown", "op": None}
        done, state = todo.pop()
        missing = [op for op in oks if op.number not in done]
        if not missing:
            return {"valid": True, "op": None}
        furthest = max(furthest, rank[missing[0].number])
        window = min(op.ret for op in missing)
        for op in ops:
            if op.number in done or op.call > window:
                continue
            for after in step(state, op, nil_unknown):
                config = (done | {op.number}, after)
                if config not in seen:
                    seen.add(config)
                    todo.append(config)
    return {"valid": False, "op": oks[furthest].number}
