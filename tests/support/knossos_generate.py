"""Random concurrent histories, for the differential tests and benchmarks.

Simulates clients against one true sequential object per key: each op is
invoked, takes effect at a random later moment (its linearization point), then
completes ok; some crash (info) before or after taking effect, and a crashed
op that had not taken effect may still do so later, as a real timed-out
request can. Such histories are linearizable; `corrupt` then changes one
observed result so that most of them are not.
"""
from __future__ import annotations

import random
import string
from dataclasses import dataclass
from typing import Any, Callable

FAIL = object()


def initial(model: str) -> Any:
    """The initial state the simulated objects start from (pass it as `init`)."""
    return {"register": 0, "cas-register": 0, "mutex": False, "set": [], "fifo-queue": [],
            "unordered-queue": [], "kv": "", "log": [], "multi-register": {"x": 0, "y": 0}}[model]


def _payload(rng: random.Random, counter: list[int]) -> int:
    counter[0] += 1
    return counter[0]


class _Sim:
    """Invocations and true effects for one model."""

    def __init__(self, model: str, rng: random.Random, values: int) -> None:
        self.model, self.rng, self.values = model, rng, values
        self.counter = [0]

    def initial(self) -> Any:
        init = initial(self.model)
        return frozenset(init) if self.model == "set" else \
            tuple(init) if isinstance(init, list) else init

    def invoke(self) -> tuple[str, Any]:
        rng, v = self.rng, self.values
        m = self.model
        if m in ("register", "cas-register"):
            f = rng.choice(["read", "write", "cas"] if m == "cas-register" else ["read", "write"])
            return f, None if f == "read" else rng.randrange(v) if f == "write" else \
                [rng.randrange(v), rng.randrange(v)]
        if m == "mutex":
            return rng.choice(["acquire", "release"]), None
        if m == "set":
            return ("add", _payload(rng, self.counter)) if rng.random() < 0.6 else ("read", None)
        if m in ("fifo-queue", "unordered-queue"):
            if rng.random() < 0.55:
                return "enqueue", _payload(rng, self.counter) % max(2, v * 2)
            return "dequeue", None
        if m == "kv":
            f = rng.choice(["get", "put", "append"])
            return f, None if f == "get" else "".join(rng.choice(string.ascii_lowercase[:3])
                                                        for _ in range(rng.randint(1, 2)))
        if m == "log":
            if rng.random() < 0.5:
                return "append", _payload(rng, self.counter)
            return "read", {"offset": rng.randrange(max(1, self.counter[0] + 1))}
        if m == "multi-register":
            micro = [["read", k, None] if rng.random() < 0.5 else ["write", k, rng.randrange(v)]
                     for k in rng.sample(["x", "y"], rng.randint(1, 2))]
            return "txn", micro
        raise ValueError(m)

    def apply(self, state: Any, f: str, value: Any) -> tuple[Any, Any]:
        """(new state, observed value) or (state, FAIL) when the op cannot happen."""
        m = self.model
        if m in ("register", "cas-register"):
            if f == "read":
                return state, state
            if f == "write":
                return value, value
            return (value[1], value) if state == value[0] else (state, FAIL)
        if m == "mutex":
            if (f == "acquire") == state:
                return state, FAIL
            return f == "acquire", None
        if m == "set":
            return (state | {value}, value) if f == "add" else (state, sorted(state))
        if m in ("fifo-queue", "unordered-queue"):
            if f == "enqueue":
                return state + (value,), value
            if not state:
                return state, None
            i = 0 if m == "fifo-queue" else self.rng.randrange(len(state))
            return state[:i] + state[i + 1:], state[i]
        if m == "kv":
            if f == "get":
                return state, state
            return (value if f == "put" else state + value), value
        if m == "log":
            if f == "append":
                return state + (value,), {"offset": len(state), "value": value}
            o = value["offset"]
            return state, {"offset": o, "value": state[o] if o < len(state) else None}
        regs = dict(state)
        out = []
        for g, k, x in value:
            if g == "read":
                out.append(["read", k, regs[k]])
            else:
                regs[k] = x
                out.append(["write", k, x])
        return regs, out

    def corrupt(self, event: dict) -> None:
        """Changes what an ok op observed."""
        rng, m, v = self.rng, self.model, event["value"]
        if m in ("register", "cas-register") and event["f"] == "read":
            event["value"] = rng.choice([None, (v + rng.randint(1, self.values)) % (self.values + 1)])
        elif m == "set" and event["f"] == "read":
            event["value"] = sorted(set(v) ^ {rng.randint(1, max(1, self.counter[0]))})
        elif m in ("fifo-queue", "unordered-queue") and event["f"] == "dequeue":
            event["value"] = rng.choice([None, rng.randrange(max(2, self.values * 2))])
        elif m == "kv" and event["f"] == "get":
            event["value"] = rng.choice([None, v + rng.choice("abc")])
        elif m == "log":
            event["value"] = {**v, "offset": v["offset"] + rng.choice([-1, 1])} \
                if event["f"] == "append" else {**v, "value": rng.choice([None, 1, 2, 3])}
        elif m == "multi-register" and event["value"] and event["value"][0][0] == "read":
            first = event["value"][0]
            seen = rng.choice([None, (first[2] or 0) + 1])
            event["value"] = [["read", first[1], seen], *event["value"][1:]]


def random_history(model: str, rng: random.Random, ops: int, processes: int,
                   info: float = 0.1, fail_ok: bool = True, keys: int = 1,
                   corrupt: float = 0.0, values: int = 5, stragglers: int = 0) -> list[dict]:
    """A random history of `ops` operations by `processes` concurrent clients.

    info: chance per op that the client crashes (info) instead of seeing ok.
    keys > 1: ops spread over that many independent objects (a `key` field).
    corrupt: chance that one observed result is changed afterwards.
    stragglers: that many clients hang on their first op until every other op
    is done, then it takes effect and completes: ops concurrent with the whole
    history that no read saw (the shape of Porcupine's 50-client kv test).
    """
    sim = _Sim(model, rng, values)
    states = {k: sim.initial() for k in range(keys)}
    hanging = set(rng.sample(range(processes), min(stragglers, processes)))
    busy: dict[int, dict] = {}
    process = list(range(processes))
    next_process = processes
    zombies: list[dict] = []
    events: list[dict] = []
    invoked = 0
    while invoked < ops or busy:
        slot = rng.randrange(processes)
        if zombies and rng.random() < 0.05:
            z = zombies.pop(rng.randrange(len(zombies)))
            states[z["key"]], _ = sim.apply(states[z["key"]], z["f"], z["value"])
        op = busy.get(slot)
        if op is not None and slot in hanging and (
                invoked < ops or any(s not in hanging for s in busy)):
            continue
        if op is None:
            if invoked >= ops:
                continue
            f, value = sim.invoke()
            op = {"process": process[slot], "f": f, "value": value, "key": rng.randrange(keys),
                  "applied": False, "out": None}
            busy[slot] = op
            invoked += 1
            events.append(_event(op, "invoke", value, keys))
            continue
        crash = rng.random() < info / 2
        if not op["applied"]:
            if crash:
                if rng.random() < 0.5:
                    zombies.append(op)
            else:
                states[op["key"]], out = sim.apply(states[op["key"]], op["f"], op["value"])
                if out is FAIL:
                    if fail_ok:
                        events.append(_event(op, "fail", op["value"], keys))
                        del busy[slot]
                        continue
                    crash = True
                else:
                    op["applied"], op["out"] = True, out
                    continue
        if crash:
            events.append(_event(op, "info", op["value"], keys))
            process[slot] = next_process
            next_process += 1
        else:
            events.append(_event(op, "ok", op["out"], keys))
        del busy[slot]
    if corrupt and rng.random() < corrupt:
        if model == "mutex":
            failed = [e for e in events if e["type"] == "fail"]
            if failed:
                rng.choice(failed)["type"] = "ok"
        else:
            oks = [e for e in events if e["type"] == "ok"]
            if oks:
                sim.corrupt(rng.choice(oks))
    return events


def _event(op: dict, kind: str, value: Any, keys: int) -> dict:
    event = {"process": op["process"], "type": kind, "f": op["f"], "value": value}
    if keys > 1:
        event["key"] = op["key"]
    return event


# --- Adversarial histories: valid ones with one completion made impossible ---

NEVER_WRITTEN = "never-written"
"""A value no generated op ever writes (generated kv strings use a-c only)."""


@dataclass
class Mutation:
    """Where a history was made non-linearizable, and how.

    `index` is the completion event (position in the history) that was
    changed or inserted, `call` its invocation; `related` are the positions of
    the events the change depends on (the op it duplicates, the write it
    loses).
    """

    kind: str
    index: int
    call: int
    related: tuple[int, ...] = ()

    def may_blame(self, position: int) -> bool:
        """Whether a checker may rightly name the completion at `position`:
        the mutated op, one it depends on, or one that completed while the
        mutated op was running (it may have seen the mutated op's true
        effect, which the mutation took away)."""
        return position in (self.index, *self.related) or self.call < position < self.index


def adversarial_history(model: str, rng: random.Random, ops: int, processes: int,
                        info: float = 0.05, keys: int = 1, stragglers: int = 0,
                        late: bool = False, tries: int = 50) -> tuple[list[dict], Mutation]:
    """A linearizable random history with one completion mutated so that it
    is certainly not linearizable (see `mutate`), and the mutation.

    late: mutate the last candidate completion rather than a random one. The
    hardest case for a checker: it must rule out every linearization of
    almost the whole history before it may say no."""
    for _ in range(tries):
        history = random_history(model, rng, ops=ops, processes=processes, info=info, keys=keys,
                                 values=10**9, stragglers=stragglers)
        mutation = mutate(model, history, _Last(rng) if late else rng)
        if mutation is not None:
            return history, mutation
    raise ValueError(f"no mutable completion in {tries} {model} histories of {ops} ops")


def mutate(model: str, history: list[dict], rng: random.Random) -> Mutation | None:
    """Changes one completion of a linearizable history in place so that no
    linearization exists; None when the history offers no such completion.

    Each mutation is impossible whatever the other ops did:
    - stale read (kv): a get returns "" after a non-empty write completed
      (no generated put writes "", so the string never empties again);
    - read of a value never written (register, cas-register, multi-register, kv);
    - lost add (set): a read misses an element whose add completed before it;
    - duplicated dequeue (queues): a dequeue returns a value another dequeue
      returned before it was invoked (enqueued values are unique);
    - lost append (log): a read finds nothing at an offset an append got
      before the read was invoked;
    - double acquire (mutex): a second acquire succeeds while the lock is
      certainly held (no release could have run in between; when no such
      moment exists, two new clients acquire it before anything else).
    """
    pos = _positions(history)
    return _MUTATORS[model](history, pos, rng)


class _Last:
    """An rng whose `choice` takes the last item (the latest completion)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def choice(self, items: list) -> Any:
        return items[-1]

    def random(self) -> float:
        return 1.0


@dataclass
class _Op:
    call: int
    done: int | None
    event: dict
    completion: dict | None


def _positions(history: list[dict]) -> list[_Op]:
    """Invoke/completion pairs by position (fails dropped, crashes kept)."""
    pending: dict[Any, _Op] = {}
    out = []
    for i, e in enumerate(history):
        if e["type"] == "invoke":
            pending[e["process"]] = op = _Op(i, None, e, None)
            out.append(op)
        else:
            op = pending.pop(e["process"])
            op.done, op.completion = i, e
    return [op for op in out if op.completion is None or op.completion["type"] != "fail"]


def _ok(ops: list[_Op], f: str) -> list[_Op]:
    return [op for op in ops if op.completion is not None and op.completion["type"] == "ok"
            and op.event["f"] == f]


def _indeterminate(op: _Op) -> bool:
    """A crashed or never completed op: it may take effect at any later time."""
    return op.completion is None or op.completion["type"] == "info"


def _same_key(a: _Op, b: _Op) -> bool:
    return a.event.get("key") == b.event.get("key")


def _completed_before(ops: list[_Op], reader: _Op, f: str) -> list[_Op]:
    return [op for op in _ok(ops, f) if op.done < reader.call and _same_key(op, reader)]


def _never_written_read(f: str, fresh: Any) -> Callable:
    def mutator(history: list[dict], ops: list[_Op], rng: random.Random) -> Mutation | None:
        reads = _ok(ops, f)
        if not reads:
            return None
        op = rng.choice(reads)
        op.completion["value"] = fresh(op.completion["value"])
        return Mutation("read of a value never written", op.done, op.call)
    return mutator


def _multi_register_fresh(history: list[dict], ops: list[_Op], rng: random.Random) -> Mutation | None:
    reading = [op for op in _ok(ops, "txn") if any(m[0] == "read" for m in op.completion["value"])]
    if not reading:
        return None
    op = rng.choice(reading)
    micro = [list(m) for m in op.completion["value"]]
    next(m for m in micro if m[0] == "read")[2] = NEVER_WRITTEN
    op.completion["value"] = micro
    return Mutation("read of a value never written", op.done, op.call)


def _kv_stale_read(history: list[dict], ops: list[_Op], rng: random.Random) -> Mutation | None:
    candidates = [(op, w) for op in _ok(ops, "get")
                  for w in [_completed_before(ops, op, "append") + _completed_before(ops, op, "put")]
                  if w]
    if not candidates or rng.random() < 0.3:
        return _never_written_read("get", lambda v: NEVER_WRITTEN)(history, ops, rng)
    op, writes = rng.choice(candidates)
    op.completion["value"] = ""
    return Mutation("stale read", op.done, op.call, tuple(w.done for w in writes))


def _set_lost_add(history: list[dict], ops: list[_Op], rng: random.Random) -> Mutation | None:
    candidates = [(op, adds) for op in _ok(ops, "read")
                  for adds in [_completed_before(ops, op, "add")] if adds]
    if not candidates:
        return _never_written_read("read", lambda v: sorted([*v, -1]))(history, ops, rng)
    op, adds = rng.choice(candidates)
    lost = rng.choice(adds)
    op.completion["value"] = [v for v in op.completion["value"] if v != lost.event["value"]]
    return Mutation("lost add", op.done, op.call, (lost.call, lost.done))


def _duplicated_dequeue(history: list[dict], ops: list[_Op], rng: random.Random) -> Mutation | None:
    candidates = [(op, first) for op in _ok(ops, "dequeue")
                  for first in _completed_before(ops, op, "dequeue")
                  if first.completion["value"] is not None]
    if not candidates:
        return _never_written_read("dequeue", lambda v: -1)(history, ops, rng)
    op, first = rng.choice(candidates)
    op.completion["value"] = first.completion["value"]
    return Mutation("duplicated dequeue", op.done, op.call, (first.done,))


def _log_lost_append(history: list[dict], ops: list[_Op], rng: random.Random) -> Mutation | None:
    candidates = [(op, a) for op in _ok(ops, "read") for a in _completed_before(ops, op, "append")]
    if not candidates:
        return _never_written_read("read", lambda v: {**v, "value": -1})(history, ops, rng)
    op, append = rng.choice(candidates)
    offset = append.completion["value"]["offset"]
    op.event["value"] = {"offset": offset}
    op.completion["value"] = {"offset": offset, "value": None}
    return Mutation("lost append", op.done, op.call, (append.done,))


def _mutex_double_acquire(history: list[dict], ops: list[_Op], rng: random.Random) -> Mutation | None:
    releases = [op for op in ops if op.event["f"] == "release"]
    held = [a for a in _ok(ops, "acquire")
            if not any(r.call < a.done and (_indeterminate(r) or r.done > a.call) for r in releases)]
    intruder = max(e["process"] for e in history if isinstance(e["process"], int)) + 1
    if not held:
        # Busy clients leave no moment where the lock is certainly held: two
        # new clients acquire it one after the other before anything else.
        key = {"key": history[0]["key"]} if "key" in history[0] else {}
        history[0:0] = [{"process": p, "type": t, "f": "acquire", "value": None, **key}
                        for p in (intruder, intruder + 1) for t in ("invoke", "ok")]
        return Mutation("double acquire", 3, 2, (1,))
    acquire = rng.choice(held)
    at = acquire.done + 1
    key = {"key": acquire.event["key"]} if "key" in acquire.event else {}
    history[at:at] = [{"process": intruder, "type": t, "f": "acquire", "value": None, **key}
                      for t in ("invoke", "ok")]
    return Mutation("double acquire", at + 1, at, (acquire.done,))


_MUTATORS: dict[str, Callable[[list[dict], list[_Op], random.Random], Mutation | None]] = {
    "register": _never_written_read("read", lambda v: NEVER_WRITTEN),
    "cas-register": _never_written_read("read", lambda v: NEVER_WRITTEN),
    "multi-register": _multi_register_fresh,
    "kv": _kv_stale_read,
    "set": _set_lost_add,
    "fifo-queue": _duplicated_dequeue,
    "unordered-queue": _duplicated_dequeue,
    "log": _log_lost_append,
    "mutex": _mutex_double_acquire,
}
