"""The `queue` workload: producers send unique messages, consumers poll and commit.

Roles: the mix's share of `poll` decides how many workers consume (at least
one, at most one per queue, and at least one producer remains); the others
produce. As in a RocketMQ consumer group after rebalancing, each queue belongs
to exactly one consumer, which polls its queues in turn from its own offsets
and commits them (best effort: the commit is not part of the checked history).

Messages: `{"id": <op index>, "shard": "s<n>", "payload": "..."}`, unique ids
so the checker can account for every one. The history `key` of a send or poll
is the queue id. An ok poll's value is the list of messages it got, each with
`key` (= its queue), `queue` and `offset` added: the form the queue checker
reads. In ordered mode each producer owns one shard key and all messages of a
key go to one queue (shard n -> queue n mod queues), so per-key order is
defined by the producer's sequence; the checker checks order per queue,
which implies it.

After the faults are healed and the recovery period passes, the drain phase
polls every queue until two polls in a row find nothing; then the durability
audit (workloads.audit) reads every queue to its end with a fresh consumer.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import random
import string
from typing import Any

from workloads.audit import AUDIT, AuditsQueues, pull_items
from workloads.base import Completion, OpRunner, Workload, WorkloadOptions, run_together
from workloads.clients import OnTopic
from workloads.registry import MESSAGE_ANOMALIES, Route, register

PULL_BATCH = 32
DRAIN_EMPTY_POLLS = 2
DRAIN_PAUSE_S = 0.3
FAIL_PAUSE_S = 0.5
COMMIT_TIMEOUT_S = 1.0


def role_counts(concurrency: int, queues: int, mix: dict[str, float]) -> tuple[int, int]:
    """(producers, consumers) for `concurrency` workers: both >= 1, consumers <= queues."""
    share = mix.get("poll", 0) / sum(mix.values())
    consumers = max(1, min(round(concurrency * share), concurrency - 1, queues))
    return concurrency - consumers, consumers


def encode_message(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":"), sort_keys=True).encode()


def decode_message(body: bytes) -> dict[str, Any]:
    """The message a producer sent; anything else is kept raw so the checker sees it."""
    try:
        message = json.loads(body)
        if isinstance(message, dict) and "id" in message:
            return message
    except (UnicodeDecodeError, json.JSONDecodeError):
        pass
    return {"id": None, "raw": body.decode("utf-8", "replace")}


@register
class QueueWorkload(AuditsQueues, OnTopic, Workload):
    name = "queue"
    route = Route(frozenset({"send", "poll", "enqueue", "dequeue"}), anomalies=MESSAGE_ANOMALIES)
    description = "producers send unique messages to a topic; consumers poll, commit and finally drain"
    default_mix = {"send": 2.0, "poll": 1.0}
    min_concurrency = 2

    def __init__(self, options: WorkloadOptions) -> None:
        super().__init__(options)
        self.producers, self.consumers = role_counts(options.concurrency, options.queues, self.mix)
        self.next_offset = {q: 0 for q in range(options.queues)}

    # -- roles and planning (pure) -------------------------------------------------
    def owned_queues(self, worker: int) -> list[int]:
        """The queues a consumer worker polls (none for a producer)."""
        c = worker - self.producers
        if c < 0:
            return []
        return [q for q in range(self.options.queues) if q % self.consumers == c]

    def shard_queue(self, shard: int) -> int:
        return shard % self.options.queues

    def plan_op(self, rng: random.Random, index: int, worker: int, concurrency: int) -> tuple[str, Any, Any]:
        if worker >= self.producers:
            owned = self.owned_queues(worker)
            return "poll", owned[(index // concurrency) % len(owned)], None
        if self.options.ordered:
            shard, queue = worker, self.shard_queue(worker)
        else:
            shard, queue = rng.randrange(2 * self.producers), rng.randrange(self.options.queues)
        payload = "".join(rng.choices(string.ascii_lowercase, k=self.options.payload_bytes))
        return "send", queue, {"id": index, "shard": f"s{shard}", "payload": payload}

    # -- effects -----------------------------------------------------------------------
    def prepare(self, op: Any) -> tuple[str, Any, Any]:
        if op.f == "poll":
            return "poll", op.key, {"offset": self.next_offset[op.key]}
        return op.f, op.key, op.value

    async def execute(self, client: Any, worker: int, f: str, key: Any, value: Any) -> Completion:
        if f == "send":
            done = await client.send(key, encode_message(value), f"m{value['id']}")
            # The completion's value is the message (plus where it landed when ok).
            result = dict(value, queue=key, offset=done.value) if done.type == "ok" else value
            return Completion(done.type, result, done.node, done.error)
        if f == "poll":
            return await self._poll(client, key, value["offset"])
        if f == AUDIT:
            return await self.audit_read(client, key, value["offset"])
        raise ValueError(f"queue workload: unknown operation {f!r}")

    async def _poll(self, client: Any, queue: int, offset: int) -> Completion:
        done = await pull_items(client, queue, offset, PULL_BATCH, self.audit_item)
        if done.type != "ok":
            return done
        next_offset, from_master = done.learned
        if not from_master:
            # A lagging replica does not move a consumer back (RocketMQ's slaves
            # answer PULL_RETRY_IMMEDIATELY rather than correct the offset).
            next_offset = max(next_offset, offset)
        if next_offset > offset:
            # Best effort and bounded: a slow commit must not turn a poll whose
            # messages we hold into an `info` (they would go unrecorded).
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.commit(queue, next_offset), COMMIT_TIMEOUT_S)
        return Completion("ok", done.value, done.node, learned=next_offset)

    def audit_item(self, queue: int, offset: int, body: bytes) -> dict[str, Any]:
        return dict(decode_message(body), key=queue, queue=queue, offset=offset)

    def observe(self, worker: int, f: str, key: Any, value: Any, done: Completion) -> None:
        # The consumer's own position (one consumer per queue) moves only when the
        # poll's messages are recorded as consumed.
        if f == "poll" and done.type == "ok":
            self.next_offset[key] = done.learned

    # -- final phase -----------------------------------------------------------------------
    async def final_phase(self, run: OpRunner) -> None:
        consumers = range(self.producers, self.producers + self.consumers)
        await run_together(self._drain(run, worker) for worker in consumers)

    async def _drain(self, run: OpRunner, worker: int) -> None:
        for queue in self.owned_queues(worker):
            empty = 0
            while empty < DRAIN_EMPTY_POLLS:
                done = await run(worker, "poll", queue, {"offset": self.next_offset[queue]})
                if done.type != "ok":
                    empty = 0
                    await asyncio.sleep(FAIL_PAUSE_S)
                elif done.value:
                    empty = 0
                else:
                    empty += 1
                    await asyncio.sleep(DRAIN_PAUSE_S)
