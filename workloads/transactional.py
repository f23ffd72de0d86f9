"""The `transactional` workload: RocketMQ's transactional messages (half messages).

Producers send every message in a transaction (RocketMQ's TransactionMQProducer,
workloads/rocketmq_types.py): the broker stores a half message, the producer runs
its local transaction, whose answer the run's seed chose (`decision`: commit,
rollback or unknown), and ends the transaction with it. A transaction left
unknown is resolved by the broker's check service, which asks a producer of the
group back (check-back); the answer (`resolution`, also seeded) travels in the
message so any producer of the group gives the same one. A transaction the
producer ended commits or rolls back as it said; if its end request is lost the
check-back answers the same decision.

Operations: `send` (key null: the producer picks the queue; value {id, shard,
payload, decision, resolution}; ok adds the send status, the local state and the
transaction id), `poll` (as in the queue workload: one consumer per queue, from
its own offset), `tx-check` (ok value: the check-backs the driver's producers
answered since the last one: {key, tx_id, answer, wall_ms}). The final phase
takes check-backs until every acknowledged unknown transaction was asked about
(at most half the drain timeout), drains the queues and takes the last check-backs; the
durability audit then reads every queue.

Checked by checkers/message_types.py (`transactional` section).
"""
from __future__ import annotations

import asyncio
import random
import time
from typing import Any

from sut.rocketmq.driver import DriverDied, DriverError, classify_error, classify_send, error_text
from workloads.base import Completion, OpRunner, WorkloadOptions
from workloads.queue import QueueWorkload, encode_message
from workloads.registry import Route, register
from workloads.rocketmq_types import TransactionalProducer

DECISIONS = {"commit": 0.5, "rollback": 0.25, "unknown": 0.25}
CHECK_EVERY = 4        # a consumer's every CHECK_EVERY-th step takes the check-backs
CHECK_PAUSE_S = 0.5


class TxClient:
    """A worker's client: the queue workload's (polls, audit) plus a transactional producer."""

    def __init__(self, inner: Any, tx: TransactionalProducer) -> None:
        self.inner, self.tx = inner, tx

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def close(self) -> None:
        try:
            await self.tx.close()
        finally:
            await self.inner.close()


@register
class TransactionalWorkload(QueueWorkload):
    name = "transactional"
    route = Route(frozenset({"tx-check"}))
    description = ("transactional messages: half messages whose local transaction commits, rolls back or stays "
                   "unknown until the broker's check-back; committed ones delivered, rolled-back ones never")

    def __init__(self, options: WorkloadOptions) -> None:
        super().__init__(options)
        self.unknown_acked: set[str] = set()
        self.checked: set[str] = set()

    def client(self, endpoints: Any, node_names: dict[str, str] | None = None) -> TxClient:
        tx = TransactionalProducer(endpoints.namesrv, f"{self.options.group}-tx", self.options.topic,
                                   max(0.5, self.options.op_timeout * 0.8), self.options.route_refresh_s)
        return TxClient(super().client(endpoints, node_names), tx)

    def plan_op(self, rng: random.Random, index: int, worker: int, concurrency: int) -> tuple[str, Any, Any]:
        f, key, value = super().plan_op(rng, index, worker, concurrency)
        if f == "poll":
            return ("tx-check", None, None) if (index // concurrency) % CHECK_EVERY == CHECK_EVERY - 1 else (f, key, value)
        decision = rng.choices(sorted(DECISIONS), weights=[DECISIONS[d] for d in sorted(DECISIONS)])[0]
        resolution = rng.choice(("commit", "rollback")) if decision == "unknown" else decision
        return "send", None, dict(value, decision=decision, resolution=resolution)

    async def execute(self, client: Any, worker: int, f: str, key: Any, value: Any) -> Completion:
        if f == "send":
            return await self._send(client, value)
        if f == "tx-check":
            try:
                checks = await client.tx.checks()
            except (DriverError, DriverDied) as exc:
                return Completion("fail", None, error=error_text(exc))
            return Completion("ok", checks)
        return await super().execute(client, worker, f, key, value)

    async def _send(self, client: TxClient, value: dict[str, Any]) -> Completion:
        try:
            sent = await client.tx.send(encode_message(value), f"m{value['id']}", value["decision"],
                                        value["resolution"])
        except (DriverError, DriverDied) as exc:
            return Completion(classify_error(exc), value, None, error_text(exc))
        kind = classify_send(sent["status"])
        result = dict(value, status=sent["status"], local_state=sent.get("local_state"), tx_id=sent.get("tx_id"),
                      msg_id=sent.get("msg_id"))
        if kind == "ok":
            return Completion("ok", result)
        # The half message's store was not confirmed: RocketMQ's producer rolls such a transaction back.
        return Completion(kind, result, error=f"{sent['status']}: msgId {sent.get('msg_id')}")

    def observe(self, worker: int, f: str, key: Any, value: Any, done: Completion) -> None:
        super().observe(worker, f, key, value, done)
        if done.type != "ok":
            return
        if f == "send" and value["decision"] == "unknown":
            self.unknown_acked.add(str(value["id"]))
        elif f == "tx-check":
            self.checked.update(str(c.get("key") or "")[1:] for c in done.value)

    async def final_phase(self, run: OpRunner) -> None:
        # Half the runner's bound (drain_timeout) at most: the drain needs the rest.
        deadline = time.monotonic() + self.options.drain_timeout / 2
        while time.monotonic() < deadline:
            await run(0, "tx-check", None, None)
            if self.unknown_acked <= self.checked:
                break
            await asyncio.sleep(CHECK_PAUSE_S)
        await super().final_phase(run)
        await run(0, "tx-check", None, None)
