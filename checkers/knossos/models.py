"""The models the engines know, and how each op becomes ints for the JVM.

One table (`SPECS`) says, per model, which operations exist, the initial state
when none is given, and how an `Operation` is encoded: an op code, input ints
and output ints (None = output unknown). Values are interned per history to
small ids (0 = null), so the JVM compares ints, not objects. The Java side of
each model documents the same layout (checkers/knossos/java/chaos/lin/*Model.java).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from .history import UNKNOWN, HistoryError, Operation

DROP = None
"""Encoder result for an op that can be left out: it cannot change the state
and nothing is known about what it saw (a read whose result is unknown), so
it is linearizable anywhere and only costs search time."""


def json_text(value: Any) -> str:
    """Canonical JSON of a value (one line), also used as its identity."""
    return json.dumps(value, sort_keys=True, default=_json_fallback)


def _json_fallback(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=json_text)
    if isinstance(value, tuple):
        return list(value)
    return str(value)


class Values:
    """Interns values to ids for one history; id 0 is null."""

    def __init__(self) -> None:
        self._ids: dict[Any, int] = {}
        self.json: list[str] = ["null"]

    def id(self, value: Any) -> int:
        if value is None:
            return 0
        kind = type(value)
        key = (kind, value) if kind is int or kind is str else ("json", json_text(value))
        found = self._ids.get(key)
        if found is None:
            found = len(self.json)
            self._ids[key] = found
            self.json.append(str(value) if kind is int else json_text(value))
        return found

    def fresh(self, shown: Any) -> int:
        """A new id equal to no other value (shown as `shown` in reports)."""
        self.json.append(json_text(shown))
        return len(self.json) - 1


Encoded = tuple[int, list[int], "list[int] | None"]


NIL_READS = ("absent", "unknown")
"""What a read that returned null means. "absent": it saw an empty register
or key (our workloads: a key never written reads null). "unknown": nothing
was learnt, it matches any value (Knossos' convention for nil reads, which
its test histories rely on)."""


class Encoder:
    """Encodes the ops of one history for one model."""

    ops: dict[str, int] = {}

    def __init__(self, values: Values, init: Any, nil_reads: str = "absent") -> None:
        if nil_reads not in NIL_READS:
            raise ValueError(f"nil_reads must be one of {', '.join(NIL_READS)}, got {nil_reads!r}")
        self.values = values
        self.init = init
        self.nil_unknown = nil_reads == "unknown"

    def code(self, op: Operation) -> int:
        try:
            return self.ops[op.f]
        except KeyError:
            raise HistoryError(
                f"event #{op.call}: the {self.model} model has no op {op.f!r}; "
                f"it knows {', '.join(self.ops)}") from None

    model = ""

    def encode(self, op: Operation) -> Encoded | None:
        raise NotImplementedError

    def relevant(self, ops: list[Operation]) -> list[Operation]:
        """The ops worth searching. Crashed ops cost the most: each may take
        effect at any later point or never. A crashed op whose written value
        nobody ever observed can always be left out: in any linearization
        that includes it, no op depends on it, so taking it out keeps the rest
        valid. Models that can tell "observed" say so in `_written`/`_observed`."""
        observed = self._observed(ops)
        if observed is None:
            return ops
        return [op for op in ops
                if op.ok or not (written := self._written(op)) or not written.isdisjoint(observed)]

    def _observed(self, ops: list[Operation]) -> set | None:
        return None

    def _written(self, op: Operation) -> set:
        return set()

    def init_ids(self) -> list[int]:
        return [self.values.id(self.init)]

    def aux_ids(self) -> list[int]:
        return []


def _need(op: Operation, ok: bool, what: str) -> None:
    if not ok:
        raise HistoryError(f"event #{op.call}: {op.f} needs {what}, got {op.input!r:.60}")


class RegisterEncoder(Encoder):
    model = "register"
    ops = {"read": 0, "write": 1}

    def encode(self, op: Operation) -> Encoded | None:
        code = self.code(op)
        if code == 0:
            if op.output is UNKNOWN or (op.output is None and self.nil_unknown):
                return DROP
            return 0, [], [self.values.id(op.output)]
        if code == 1:
            return 1, [self.values.id(op.input)], []
        _need(op, isinstance(op.input, list) and len(op.input) == 2, "a value [expected, new]")
        return 2, [self.values.id(op.input[0]), self.values.id(op.input[1])], []


    def _observed(self, ops: list[Operation]) -> set | None:
        seen = {self.values.id(op.output) for op in ops
                if op.ok and op.f == "read" and not (op.output is None and self.nil_unknown)}
        seen |= {self.values.id(op.input[0]) for op in ops
                 if op.f == "cas" and isinstance(op.input, list) and len(op.input) == 2}
        return seen

    def _written(self, op: Operation) -> set:
        if op.f == "write":
            return {self.values.id(op.input)}
        if op.f == "cas" and isinstance(op.input, list) and len(op.input) == 2:
            return {self.values.id(op.input[1])}
        return set()


class CasRegisterEncoder(RegisterEncoder):
    model = "cas-register"
    ops = {"read": 0, "write": 1, "cas": 2}


class MutexEncoder(Encoder):
    model = "mutex"
    ops = {"acquire": 0, "release": 1}

    def encode(self, op: Operation) -> Encoded | None:
        return self.code(op), [], []

    def init_ids(self) -> list[int]:
        return [1 if self.init else 0]


class SetEncoder(Encoder):
    model = "set"
    ops = {"add": 0, "read": 1}

    def encode(self, op: Operation) -> Encoded | None:
        if self.code(op) == 0:
            return 0, [self.values.id(op.input)], []
        if op.output is UNKNOWN or op.output is None:
            return DROP
        if not isinstance(op.output, (list, set, frozenset, tuple)):
            raise HistoryError(f"event #{op.ret}: a set read must return a list, got {op.output!r:.60}")
        return 1, [], sorted({self.values.id(v) for v in op.output})

    def init_ids(self) -> list[int]:
        return [self.values.id(v) for v in (self.init or [])]

    def _observed(self, ops: list[Operation]) -> set | None:
        return {self.values.id(v) for op in ops
                if op.ok and op.f == "read" and isinstance(op.output, (list, set, frozenset, tuple))
                for v in op.output}

    def _written(self, op: Operation) -> set:
        return {self.values.id(op.input)} if op.f == "add" else set()


class FifoQueueEncoder(Encoder):
    model = "fifo-queue"
    ops = {"enqueue": 0, "dequeue": 1}

    def encode(self, op: Operation) -> Encoded | None:
        if self.code(op) == 0:
            _need(op, op.input is not None, "a value to enqueue")
            return 0, [self.values.id(op.input)], []
        return 1, [], None if op.output is UNKNOWN else [self.values.id(op.output)]

    def init_ids(self) -> list[int]:
        return [self.values.id(v) for v in (self.init or [])]

    def _observed(self, ops: list[Operation]) -> set | None:
        return {self.values.id(op.output) for op in ops
                if op.ok and op.f == "dequeue" and op.output is not None}

    def _written(self, op: Operation) -> set:
        return {self.values.id(op.input)} if op.f == "enqueue" and op.input is not None else set()


class UnorderedQueueEncoder(FifoQueueEncoder):
    model = "unordered-queue"


class KvEncoder(Encoder):
    """Strings per key; values that are not strings count as their JSON text."""

    model = "kv"
    ops = {"get": 0, "put": 1, "append": 2}

    def encode(self, op: Operation) -> Encoded | None:
        code = self.code(op)
        if code == 0:
            if op.output is UNKNOWN or (op.output is None and self.nil_unknown):
                return DROP
            return 0, [], [self.values.id(op.output)]  # null reads as "" (absent key)
        _need(op, op.input is not None, "a string value")
        return code, [self.values.id(op.input)], []

    def init_ids(self) -> list[int]:
        return [self.values.id(self.init if self.init is not None else "")]


class LogEncoder(Encoder):
    """append: invoke value = payload, ok value = {"offset": n, "value": payload};
    read: invoke value = {"offset": n}, ok value = {"offset": n, "value": payload or null}."""

    model = "log"
    ops = {"append": 0, "read": 1}
    _read: set[int] = set()
    _unread = -1

    def relevant(self, ops: list[Operation]) -> list[Operation]:
        """Notes which payloads some read saw. A crashed append of a payload
        nobody read gets one shared anonymous payload: such appends differ
        only in when they may happen, so the search can treat them as one
        class (Search.java) instead of trying each."""
        self._read = {self.values.id(_field_value(op.output)) for op in ops
                      if op.ok and op.f == "read"}
        return ops

    def encode(self, op: Operation) -> Encoded | None:
        if self.code(op) == 0:
            _need(op, op.input is not None, "a payload")
            offset = _field(op.output, "offset")
            known = isinstance(offset, int) and not isinstance(offset, bool)
            payload = self.values.id(op.input)
            if not op.ok and payload not in self._read:
                if self._unread < 0:
                    self._unread = self.values.fresh("(a payload no read saw)")
                payload = self._unread
            return 0, [payload], [offset] if known else None
        offset = _field(op.input, "offset")
        _need(op, isinstance(offset, int) and not isinstance(offset, bool), 'a value {"offset": n}')
        if op.output is UNKNOWN:
            return DROP
        return 1, [offset], [self.values.id(_field_value(op.output))]

    def init_ids(self) -> list[int]:
        return [self.values.id(v) for v in (self.init or [])]


def _field_value(output: Any) -> Any:
    return output.get("value") if isinstance(output, dict) else output


def _field(value: Any, name: str) -> Any:
    if isinstance(value, dict):
        return value.get(name)
    return value if name == "offset" and isinstance(value, int) else None


ANY = -1
"""A multi-register micro-op read whose value is unknown."""


class MultiRegisterEncoder(Encoder):
    """txn over micro-ops [f k v], f read or write; registers get indices in
    order of first appearance (the init map's keys first)."""

    model = "multi-register"
    ops = {"txn": 0}

    def __init__(self, values: Values, init: Any, nil_reads: str = "absent") -> None:
        super().__init__(values, init or {}, nil_reads)
        if not isinstance(self.init, dict):
            raise HistoryError(f"multi-register init must be a map of register -> value, got {init!r:.60}")
        self.registers: dict[Any, int] = {}
        for name in self.init:
            self._register(name)

    def _register(self, name: Any) -> int:
        index = self.registers.get(name)
        if index is None:
            index = self.registers[name] = len(self.registers)
        return index

    def encode(self, op: Operation) -> Encoded | None:
        self.code(op)
        micro = op.output if op.ok and isinstance(op.output, list) else op.input
        _need(op, isinstance(micro, list), "a list of [f register value] micro-ops")
        flat: list[int] = []
        writes = False
        for m in micro:
            if not (isinstance(m, list) and len(m) == 3 and m[0] in ("read", "write")):
                raise HistoryError(f"event #{op.call}: micro-op must be [read|write register value], "
                                   f"got {m!r:.60}")
            writes |= m[0] == "write"
            if m[0] == "write":
                value = self.values.id(m[2])
            elif not op.ok or (m[2] is None and self.nil_unknown):
                value = ANY
            else:
                value = self.values.id(m[2])
            flat += (0 if m[0] == "read" else 1, self._register(_hashable(m[1])), value)
        if not writes and all(v == ANY for v in flat[2::3]):
            return DROP
        return 0, flat, []

    def _observed(self, ops: list[Operation]) -> set | None:
        return {(_hashable(m[1]), self.values.id(m[2])) for op in ops
                if op.ok and isinstance(op.output, list)
                for m in op.output
                if isinstance(m, list) and len(m) == 3 and m[0] == "read"
                and not (m[2] is None and self.nil_unknown)}

    def _written(self, op: Operation) -> set:
        micro = op.input if isinstance(op.input, list) else []
        return {(_hashable(m[1]), self.values.id(m[2])) for m in micro
                if isinstance(m, list) and len(m) == 3 and m[0] == "write"}

    def init_ids(self) -> list[int]:
        ids = [0] * len(self.registers)
        for name, value in self.init.items():
            ids[self.registers[name]] = self.values.id(value)
        return ids

    def aux_ids(self) -> list[int]:
        return [self.values.id(name) for name in self.registers]


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


@dataclass(frozen=True)
class ModelSpec:
    """A model as users name it: its ops, default initial state, encoder."""

    name: str
    encoder: Callable[[Values, Any, str], Encoder]
    default_init: Any
    summary: str


SPECS: dict[str, ModelSpec] = {s.name: s for s in [
    ModelSpec("register", RegisterEncoder, None, "read / write"),
    ModelSpec("cas-register", CasRegisterEncoder, None, "read / write / cas [expected new]"),
    ModelSpec("multi-register", MultiRegisterEncoder, {}, "txn over [f register value] micro-ops"),
    ModelSpec("mutex", MutexEncoder, False, "acquire / release"),
    ModelSpec("set", SetEncoder, [], "add v / read -> all elements"),
    ModelSpec("fifo-queue", FifoQueueEncoder, [], "enqueue v / dequeue -> head (null when empty)"),
    ModelSpec("unordered-queue", UnorderedQueueEncoder, [],
              "enqueue v / dequeue -> any element (null when empty)"),
    ModelSpec("kv", KvEncoder, "", "get / put / append of strings, per key"),
    ModelSpec("log", LogEncoder, [], "append -> offset / read offset -> payload or null"),
]}

MODELS: tuple[str, ...] = tuple(SPECS)


def spec(model: str) -> ModelSpec:
    """The model named `model`, or a one-line error listing the known ones."""
    try:
        return SPECS[model]
    except KeyError:
        raise ValueError(f"unknown model {model!r}; known models: {', '.join(MODELS)}") from None
