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
from typing import Any

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
                   corrupt: float = 0.0, values: int = 5) -> list[dict]:
    """A random history of `ops` operations by `processes` concurrent clients.

    info: chance per op that the client crashes (info) instead of seeing ok.
    keys > 1: ops spread over that many independent objects (a `key` field).
    corrupt: chance that one observed result is changed afterwards.
    """
    sim = _Sim(model, rng, values)
    states = {k: sim.initial() for k in range(keys)}
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
