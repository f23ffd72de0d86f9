"""The `log` workload: each queue as an append-only log, checked for linearizability.

- `append`: invoke value = a unique payload (the op index), ok value =
  `{"offset": n, "value": payload}` with the queue offset the broker assigned;
- `read`: invoke value = `{"offset": n}`, ok value = `{"offset": n, "value":
  payload}`, the value being null when there is nothing at that offset (yet).
The history `key` is the queue id, so the `log` model checks each queue alone.

Reads go where a RocketMQ consumer's pulls go: to the master, and to a
replica when the master is unreachable (or the route is stale). A replica
may lag (a restarted DLedger follower rebuilds its store from the Raft log;
a follower learns the commit index late), so "nothing at offset n" from a
broker that says it is not the master proves nothing: such a read is a
`fail` (a read has no effect), as a consumer would simply pull again. What
a replica does return is committed data, so it stays a read.

Reads aim at recent offsets: the plan draws a look-back distance (mostly
0-8, sometimes -1 = one past the end) and the read goes to "highest offset
acknowledged so far on this queue minus look-back". A stale replica, a lost
acknowledged entry or a reused offset then shows up as a read that no
linearization explains. The final phase reads every offset of every queue up
to a little past the highest one seen.
"""
from __future__ import annotations

import random
from typing import Any

from workloads.audit import AUDIT, AuditsQueues
from workloads.base import Completion, OpRunner, Workload, WorkloadOptions, spread, weighted_choice
from workloads.clients import OnTopic
from workloads.generator import PlannedOp
from workloads.registry import LOG_ANOMALIES, Route, register

LOOKBACK_MEAN = 4.0
READ_PAST_END = 3


@register
class LogWorkload(AuditsQueues, OnTopic, Workload):
    name = "log"
    route = Route(frozenset({"append"}), anomalies=LOG_ANOMALIES, model="log")
    description = "append to queues and read recent offsets back; checked with the log model"
    default_mix = {"append": 1.0, "read": 1.0}

    def __init__(self, options: WorkloadOptions) -> None:
        super().__init__(options)
        # Per queue: one past the highest offset any append was acknowledged at.
        self.head = {q: 0 for q in range(options.queues)}

    def plan_op(self, rng: random.Random, index: int, worker: int, concurrency: int) -> tuple[str, Any, Any]:
        f = weighted_choice(rng, self.mix)
        queue = rng.randrange(self.options.queues)
        if f == "append":
            return "append", queue, index
        return "read", queue, {"lookback": int(rng.expovariate(1 / LOOKBACK_MEAN)) - 1}

    def prepare(self, op: PlannedOp) -> tuple[str, Any, Any]:
        if op.f == "read":
            return "read", op.key, {"offset": max(0, self.head[op.key] - 1 - op.value["lookback"])}
        return op.f, op.key, op.value

    async def execute(self, client: Any, worker: int, f: str, key: Any, value: Any) -> Completion:
        if f == "append":
            done = await client.send(key, str(value).encode(), f"a{value}")
            result = {"offset": done.value, "value": value} if done.type == "ok" else value
            return Completion(done.type, result, done.node, done.error)
        if f == "read":
            offset = value["offset"]
            done = await client.pull(key, offset, 1)
            if done.type != "ok":
                return Completion(done.type, value, done.node, done.error)
            batch, _next, from_master = done.value
            found = [body for at, body in batch if at == offset]
            if not found and not from_master:
                # A replica that has nothing at this offset may only lag behind: as
                # a RocketMQ consumer, this read learned nothing (it pulls again).
                return Completion("fail", value, done.node, "nothing on a replica that is not the master")
            return Completion("ok", {"offset": offset, "value": _payload(found[0]) if found else None},
                              done.node)
        if f == AUDIT:
            return await self.audit_read(client, key, value["offset"])
        raise ValueError(f"log workload: unknown operation {f!r}")

    def audit_item(self, queue: int, offset: int, body: bytes) -> dict[str, Any]:
        return {"key": queue, "queue": queue, "offset": offset, "value": _payload(body)}

    def observe(self, worker: int, f: str, key: Any, value: Any, done: Completion) -> None:
        if f == "append" and done.type == "ok":
            self.head[key] = max(self.head[key], done.value["offset"] + 1)

    async def final_phase(self, run: OpRunner) -> None:
        async def read_all(worker: int, queue: int) -> None:
            for offset in range(self.head[queue] + READ_PAST_END):
                await run(worker, "read", queue, {"offset": offset})
        await spread(self.options.concurrency, sorted(self.head), read_all)


def _payload(body: bytes) -> Any:
    """The appended payload (an int id); anything else verbatim, so the checker flags it."""
    text = body.decode("utf-8", "replace")
    try:
        return int(text)
    except ValueError:
        return text
