"""The `ordered` workload: orderly consumption, RocketMQ's ordered messages.

Producers send with a sharding key: each message carries its key (`shard`) and
the key's sequence number (`seq`, in send order), and goes to the queue the
key selects (shard mod queues: RocketMQ's SelectMessageQueueByHash for an
integer key). Each producer owns its keys (key mod producers = worker) and
sends one message at a time, so a key's acknowledged messages have a send
order. The other workers are members of one orderly consumer group (real
RocketMQ's push consumer with a MessageListenerOrderly: its rebalance locks a
queue on the broker (lockBatchMQ) before consuming it, one thread per queue,
offsets committed by its own offset store). The listener records each message
it processed with the JVM's monotonic start and end of the processing.

Operations: `send` (key = queue; value {id, shard, seq, payload}; ok adds
queue and offset), `consume` (takes what the member's listener processed since
the last take; ok value {client, locked, deliveries}), and the client faults
`leave` (the member shuts down: offsets persisted, queues unlocked, the group
rebalances; its value holds what it processed last) and `join` (a new member).
The final phase brings every member back and consumes until every acknowledged
message was processed, or nothing new came for a while though every queue was
processed up to its last acknowledged offset (what is missing then is lost, not
waiting), within 70 % of the drain timeout; then every member leaves.

Checked by checkers/message_types.py (`ordered` section).
"""
from __future__ import annotations

import asyncio
import random
import string
import time
from dataclasses import dataclass, field
from typing import Any

from sut.rocketmq.driver import DriverDied, DriverError, error_text
from workloads.base import Completion, OpRunner, Workload, WorkloadOptions, run_together
from workloads.group import GroupClient
from workloads.queue import decode_message, encode_message
from workloads.registry import Route, register
from workloads.rocketmq_types import OrderlyConsumer

LEAVE_CHANCE = 0.03          # per member step...
MIN_LIFE_S = 5.0             # ...but a member stays this long after joining, whatever the rate
PROCESS_MS = 5               # how long the listener "processes" a message (makes overlap observable)
DRAIN_QUIET_S = 6.0          # the final phase ends when nothing new came for this long
DRAIN_PAUSE_S = 0.5
FINAL_SHARE = 0.7


@dataclass
class Member:
    consumer: OrderlyConsumer | None = None
    client_id: str = ""
    joined_at: float = 0.0


@dataclass
class Shards:
    """Per key: the next sequence number (the producer that owns the key sends one at a time)."""

    next_seq: dict[int, int] = field(default_factory=dict)

    def take(self, shard: int) -> int:
        seq = self.next_seq.get(shard, 0)
        self.next_seq[shard] = seq + 1
        return seq


@register
class OrderedWorkload(Workload):
    name = "ordered"
    route = Route(frozenset({"consume"}))
    description = ("orderly consumption: messages sent with a sharding key to the key's queue; an orderly "
                   "consumer group (queue locks) must process each key in send order, one member per queue")
    default_mix = {"send": 1.0, "consume": 1.0}
    min_concurrency = 3

    def __init__(self, options: WorkloadOptions) -> None:
        super().__init__(options)
        share = self.mix.get("consume", 0) / sum(self.mix.values())
        self.consumers = max(2, min(round(options.concurrency * share), options.concurrency - 1))
        self.producers = options.concurrency - self.consumers
        self.shard_count = max(self.options.keys, self.producers)
        self.shards = Shards()
        self.members = {w: Member() for w in range(self.producers, options.concurrency)}
        self.acked: set[int] = set()
        self.processed: set[int] = set()
        self.acked_tail: dict[int, int] = {}   # per queue: the highest acknowledged offset
        self.read_tail: dict[int, int] = {}    # per queue: the highest offset processed

    # -- planning (pure) ---------------------------------------------------------------
    def owned_shards(self, worker: int) -> list[int]:
        return [s for s in range(self.shard_count) if s % self.producers == worker]

    def shard_queue(self, shard: int) -> int:
        return shard % self.options.queues

    def plan_op(self, rng: random.Random, index: int, worker: int, concurrency: int) -> tuple[str, Any, Any]:
        if worker >= self.producers:
            return ("leave" if rng.random() < LEAVE_CHANCE else "consume"), None, None
        shard = rng.choice(self.owned_shards(worker))
        payload = "".join(rng.choices(string.ascii_lowercase, k=self.options.payload_bytes))
        return "send", self.shard_queue(shard), {"id": index, "shard": shard, "payload": payload}

    def prepare(self, op: Any) -> tuple[str, Any, Any]:
        """A send gets its key's next sequence number; a member that is down joins first."""
        if op.f == "send":
            return "send", op.key, dict(op.value, seq=self.shards.take(op.value["shard"]))
        member = self.members[op.worker]
        if member.consumer is None:
            return "join", None, None
        # A member that just joined has not yet locked and consumed its queues: it stays.
        young = op.f == "leave" and time.monotonic() - member.joined_at < MIN_LIFE_S
        return ("consume" if young else op.f), None, {"client": member.client_id}

    def client(self, endpoints: Any, node_names: dict[str, str] | None = None) -> GroupClient:
        return GroupClient(endpoints, self.options, node_names)

    async def setup(self, client: GroupClient) -> None:
        await client.queue.create_topic(self.options.queues)

    # -- effects -------------------------------------------------------------------------
    async def execute(self, client: Any, worker: int, f: str, key: Any, value: Any) -> Completion:
        if f == "send":
            done = await client.queue.send(key, encode_message(value), f"m{value['id']}")
            result = dict(value, queue=key, offset=done.value) if done.type == "ok" else value
            return Completion(done.type, result, done.node, done.error)
        member = self.members[worker]
        if f == "join":
            return await self._join(client, member)
        if member.consumer is None:
            return Completion("fail", value, error="consumer is down")
        if f == "consume":
            try:
                got = await member.consumer.take()
            except DriverError as exc:   # the driver answered: nothing was taken
                return Completion("fail", value, error=error_text(exc))
            except DriverDied as exc:    # what the member had processed died with the driver
                consumer, member.consumer = member.consumer, None
                await consumer.close()
                return Completion("info", value, error=error_text(exc))
            return Completion("ok", self._taken(member.client_id, got))
        if f == "leave":
            consumer, member.consumer = member.consumer, None
            got = await consumer.close()
            if got is None:
                return Completion("info", value, error="the member's shutdown got no answer")
            return Completion("ok", self._taken(member.client_id, got))
        raise ValueError(f"ordered workload: unknown operation {f!r}")

    async def _join(self, client: GroupClient, member: Member) -> Completion:
        endpoints = client.endpoints
        consumer = OrderlyConsumer(endpoints.namesrv, self.options.group, self.options.topic,
                                   max(0.5, self.options.op_timeout * 0.4), self.options.route_refresh_s,
                                   process_ms=PROCESS_MS)
        try:
            member.client_id = await consumer.start()
        except asyncio.CancelledError:
            await consumer.close()
            raise
        except Exception as exc:  # noqa: BLE001 - RocketMQ could not start it: no member
            await consumer.close()
            return Completion("fail", None, error=f"{type(exc).__name__}: {exc}")
        member.consumer, member.joined_at = consumer, time.monotonic()
        return Completion("ok", {"client": member.client_id})

    @staticmethod
    def _taken(client_id: str, got: dict[str, Any]) -> dict[str, Any]:
        """A take as the history holds it: each delivery as the message sent plus where and when."""
        deliveries = []
        for item in got.get("deliveries") or []:
            message = decode_message(item["body"])
            deliveries.append(dict(message, client=item.get("client", client_id), queue=item.get("queue"),
                                   offset=item.get("offset"), start_ns=item.get("start_ns"),
                                   end_ns=item.get("end_ns"), reconsume=item.get("reconsume", 0)))
        return {"client": client_id, "locked": got.get("locked", []), "now_ns": got.get("now_ns"),
                "deliveries": deliveries}

    def observe(self, worker: int, f: str, key: Any, value: Any, done: Completion) -> None:
        if done.type != "ok":
            return
        if f == "send":
            self.acked.add(value["id"])
            _raise(self.acked_tail, done.value.get("queue"), done.value.get("offset"))
        elif f in ("consume", "leave"):
            for d in done.value["deliveries"]:
                self.processed.add(d.get("id"))
                _raise(self.read_tail, d.get("queue"), d.get("offset"))

    def read_to_the_end(self) -> bool:
        """Every queue processed up to its last acknowledged offset."""
        return all(self.read_tail.get(q, -1) >= tail for q, tail in self.acked_tail.items())

    # -- final phase: everyone back, consume until done ------------------------------------
    async def final_phase(self, run: OpRunner) -> None:
        # Inside the runner's bound (drain_timeout), leaving time for every member's leave.
        deadline = time.monotonic() + self.options.drain_timeout * FINAL_SHARE
        try:
            await run_together(self._drain(run, worker, deadline) for worker in self.members)
        finally:
            try:
                await run_together(self._leave(run, worker) for worker in self.members)
            finally:   # stopped before every member could leave on the record: none stays behind
                for member in self.members.values():
                    if member.consumer is not None:
                        consumer, member.consumer = member.consumer, None
                        await consumer.close()

    async def _drain(self, run: OpRunner, worker: int, deadline: float) -> None:
        member, last_new = self.members[worker], time.monotonic()
        while time.monotonic() < deadline:
            if member.consumer is None:
                await run(worker, "join", None, None)
                await asyncio.sleep(DRAIN_PAUSE_S)
                continue
            done = await run(worker, "consume", None, {"client": member.client_id})
            if done.type == "ok" and done.value["deliveries"]:
                last_new = time.monotonic()
            # Quiet alone is no end while a queue is unread: its members may still be stalled
            # (a lock or a subscription the broker has not taken yet) rather than done.
            if self.acked <= self.processed or (time.monotonic() - last_new > DRAIN_QUIET_S
                                                and self.read_to_the_end()):
                return
            await asyncio.sleep(DRAIN_PAUSE_S)

    async def _leave(self, run: OpRunner, worker: int) -> None:
        member = self.members[worker]
        if member.consumer is not None:
            await run(worker, "leave", None, {"client": member.client_id})


def _raise(tails: dict[int, int], queue: Any, offset: Any) -> None:
    if isinstance(queue, int) and isinstance(offset, int):
        tails[queue] = max(tails.get(queue, -1), offset)
