"""The `delayed` workload: RocketMQ 5's timer messages (the broker's timer wheel).

As the queue workload, except that every message is sent with a delivery time
(Message.setDeliverTimeMs: the control node's wall clock at the invoke plus a
delay the seed chose, `delay_ms`): the broker keeps it in its timer store and
puts it into its queue when the time comes. A send's ok value has no queue
offset (the broker's answer is the timer topic's); each polled message carries
`seen_ms`, the wall clock when its poll completed: the latest instant it was
already delivered. The final phase first waits until the last delivery time
(plus the tolerance) has passed, then drains as the queue workload does.

Checked by the queue section (lost, duplicated: at least once, unexpected, the
audit's anomalies) and checkers/message_types.py (`delayed` section: early).
"""
from __future__ import annotations

import asyncio
import random
import time
from typing import Any

from workloads.base import Completion, OpRunner, WorkloadOptions
from workloads.queue import QueueWorkload, encode_message
from workloads.registry import MESSAGE_ANOMALIES, Route, register

DELAY_MS = (2000, 8000)
# RocketMQ's timer wheel fires a slot of timerPrecisionMs (1 s by default) at once, and
# the control node's clock and the broker's may differ a little: a message may show up
# this much before its delivery time without being early (checkers/message_types.py).
DELAY_TOLERANCE_MS = 1500


def wall_ms() -> int:
    return int(time.time() * 1000)


@register
class DelayedWorkload(QueueWorkload):
    name = "delayed"
    # Its operations are the queue workload's: only run.json names it.
    route = Route(frozenset(), anomalies=MESSAGE_ANOMALIES)
    description = ("timer messages: each sent with a delivery time some seconds ahead; delivered not before it "
                   "(a stated tolerance), not lost, duplicated only as at-least-once allows")

    def __init__(self, options: WorkloadOptions) -> None:
        super().__init__(options)
        self.last_deliver_ms = 0

    def plan_op(self, rng: random.Random, index: int, worker: int, concurrency: int) -> tuple[str, Any, Any]:
        f, key, value = super().plan_op(rng, index, worker, concurrency)
        if f == "send":
            value = dict(value, delay_ms=rng.randint(*DELAY_MS))
        return f, key, value

    def prepare(self, op: Any) -> tuple[str, Any, Any]:
        f, key, value = super().prepare(op)
        if f == "send":
            value = dict(value, deliver_ms=wall_ms() + value["delay_ms"])
            self.last_deliver_ms = max(self.last_deliver_ms, value["deliver_ms"])
        return f, key, value

    async def execute(self, client: Any, worker: int, f: str, key: Any, value: Any) -> Completion:
        if f == "send":
            done = await client.send(key, encode_message(value), f"m{value['id']}", deliver_ms=value["deliver_ms"])
            # The broker answers with the timer topic's offset, not the queue's: no offset.
            result = dict(value, queue=key, offset=None, timer_offset=done.value) if done.type == "ok" else value
            return Completion(done.type, result, done.node, done.error)
        return await super().execute(client, worker, f, key, value)

    async def _poll(self, client: Any, queue: int, offset: int) -> Completion:
        done = await super()._poll(client, queue, offset)
        if done.type != "ok":
            return done
        seen = wall_ms()
        return Completion("ok", [dict(item, seen_ms=seen) for item in done.value], done.node, done.error,
                          learned=done.learned)

    async def final_phase(self, run: OpRunner) -> None:
        wait_s = (self.last_deliver_ms + DELAY_TOLERANCE_MS - wall_ms()) / 1000
        if wait_s > 0:
            await asyncio.sleep(wait_s)
        await super().final_phase(run)
