"""Turning a history of events into operations: the one place that pairs
invocations with completions, for both engines.

A history is a list of event dicts (docs/history-format.md, or Jepsen EDN after
`edn.read_history`): `process`, `type` (invoke/ok/fail/info), `f`, `value`,
optional `key`, `index`, `time`. List order is real-time order, as in Jepsen.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Hashable, Iterable

NEMESIS = "nemesis"
UNKNOWN: Any = object()
"""Output of an op whose result nobody saw (info, or a read of nil)."""


class HistoryError(ValueError):
    """The history is malformed; the message says which event and why."""


@dataclass(slots=True)
class Operation:
    """One invocation and its completion. `ret` is None for an indeterminate
    (info) op: it may take effect at any point after its call, or never."""

    number: int
    process: Any
    f: str
    input: Any
    output: Any
    call: int
    ret: int | None
    invoke: dict
    completion: dict | None = field(default=None)
    done: int | None = field(default=None)
    failed: bool = field(default=False)

    @property
    def ok(self) -> bool:
        return self.ret is not None

    def shown_invoke(self) -> dict:
        return described(self.invoke, self.call)

    def shown_completion(self) -> dict:
        """The completion event as reported (the invoke for an op never completed)."""
        if self.completion is None:
            return self.shown_invoke()
        return described(self.completion, self.done)


def described(event: dict, position: int) -> dict:
    """An event as reported back: with its position as `index` unless it has one."""
    if "index" in event:
        return event
    return {**event, "index": position}


def operations(history: Iterable[dict], positions: list[int] | None = None) -> list[Operation]:
    """Pairs events by process; drops failed ops (they did not happen) and
    nemesis events; an invoke never completed counts as info. `positions`
    gives each event's place in the whole history when this is one key's part."""
    pending: dict[Hashable, Operation] = {}
    ops: list[Operation] = []
    failed = False
    take = pending.pop
    for i, event in enumerate(history):
        pos = i if positions is None else positions[i]
        try:
            process = event.get("process")
            kind = event.get("type")
            if kind == "invoke":
                if process in pending or process is None or process == NEMESIS:
                    if process == NEMESIS:
                        continue
                    _bad_invoke(event, pos, pending)
                f = event.get("f")
                if f.__class__ is not str:
                    raise HistoryError(f"event #{pos} has no operation name (f): {event!r:.120}")
                op = Operation(len(ops), process, f, event.get("value"), UNKNOWN, pos, None, event)
                pending[process] = op
                ops.append(op)
                continue
            op = take(process, None)
        except AttributeError:
            raise HistoryError(f"event #{pos} is not a map/object: {event!r:.80}") from None
        except TypeError:
            raise HistoryError(f"event #{pos}: process must be an int or string, "
                               f"got {event.get('process')!r:.40}") from None
        if kind == "ok" and op is not None:
            op.completion = event
            op.done = op.ret = pos
            op.output = event.get("value")
            continue
        if process == NEMESIS:
            continue
        if kind not in ("ok", "fail", "info"):
            raise HistoryError(
                f"event #{pos}: type must be invoke, ok, fail or info, got {kind!r:.40}")
        if op is None:
            if kind == "info":
                continue  # a bare info (a log line, a crash report) did nothing to the model
            raise HistoryError(f"event #{pos}: {kind} of process {process} without an invoke")
        op.completion = event
        op.done = pos
        if kind == "fail":
            op.failed = True
            failed = True
    if failed:
        ops = [op for op in ops if not op.failed]
        for number, op in enumerate(ops):
            op.number = number
    return ops


def _bad_invoke(event: dict, pos: int, pending: dict) -> None:
    process = event.get("process")
    if process is None:
        raise HistoryError(f"event #{pos} has no process: {event!r:.120}")
    raise HistoryError(f"event #{pos}: process {process} invoked again before its op at event "
                       f"#{pending[process].call} completed")


def key_of(event: dict) -> Hashable:
    """The partition key of an event (None when it has none), made hashable."""
    key = _frozen(event.get("key"))
    try:
        hash(key)
    except TypeError:
        raise HistoryError(f"event {event!r:.120}: its key holds a map; a key is a value or a list "
                           f"of values") from None
    return key


def _frozen(value: Any) -> Any:
    """Lists (Jepsen's vectors) as tuples, at any depth, so they can key a dict."""
    return tuple(_frozen(v) for v in value) if isinstance(value, list) else value


def split_positions(history: Iterable[dict]) -> dict[Hashable, list[int]]:
    """Like split_by_key, but the positions of each key's events in the history."""
    parts: dict[Hashable, list[int]] = {}
    for pos, event in enumerate(history):
        if isinstance(event, dict) and event.get("process") == NEMESIS:
            continue
        parts.setdefault(key_of(event) if isinstance(event, dict) else None, []).append(pos)
    return parts


def split_by_key(history: Iterable[dict]) -> dict[Hashable, list[dict]]:
    """Groups events by their `key`, keeping order; nemesis events are left out.

    Linearizability is local (Herlihy & Wing): a history of independent objects
    is linearizable iff each object's sub-history is, so each key can be checked
    alone (P-compositionality), in parallel (checkers.knossos.analyze_keys).
    """
    parts: dict[Hashable, list[dict]] = {}
    for event in history:
        if isinstance(event, dict) and event.get("process") == NEMESIS:
            continue
        parts.setdefault(key_of(event) if isinstance(event, dict) else None, []).append(event)
    return parts
