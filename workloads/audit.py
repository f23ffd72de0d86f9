"""The durability audit: what the log holds at the end, read by a fresh consumer.

After the faults are healed, the recovery period has passed and the drain is
done, a fresh consumer (new clients, no cached routes or positions) reads
every queue of the topic from its first offset to its end, from the group's
current master (the consumer's normal preference). Each read is recorded as
an `audit` operation: invoke value `{"offset": n}`, ok value the list of
messages found from n on, in the same item form as a poll. The last `audit`
of a queue is an ok read that found nothing: the end marker that tells the
checkers the queue was read to its end.

The checkers compare this final log with what was acknowledged and consumed
(lost, lost after consume, inconsistent offsets: Jepsen's Kafka/queue
anomalies). Queue and log workloads share this module.
"""
from __future__ import annotations

import asyncio
from typing import Any, Callable

from workloads.base import Completion, OpRunner, spread

AUDIT = "audit"
AUDIT_BATCH = 32
AUDIT_ATTEMPTS = 20      # failed reads of one offset before the queue's audit gives up
AUDIT_PAUSE_S = 0.5


class AuditsQueues:
    """For workloads on the broker (queue, log): the audit read and its loop.

    A workload mixes this in, dispatches `f == AUDIT` to `audit_read` in its
    `execute`, and says in `audit_item` how a message looks in the history.
    """

    options: Any

    def audit_item(self, queue: int, offset: int, body: bytes) -> dict[str, Any]:
        raise NotImplementedError

    async def audit_read(self, client: Any, queue: int, offset: int) -> Completion:
        done = await pull_items(client, queue, offset, AUDIT_BATCH, self.audit_item)
        if done.type != "ok":
            return done
        next_offset, from_master = done.learned
        if not from_master:
            # The audit reads the final log on the master; a replica may lag, and a master
            # whose replicas have not confirmed its log yet shows only the confirmed part.
            return Completion("fail", {"offset": offset}, done.node,
                              "answered by a replica, or a master whose log is not confirmed yet")
        return Completion("ok", done.value, done.node, learned=next_offset)

    async def audit(self, run: OpRunner) -> None:
        """Read every queue to its end, queues spread over the workers."""
        await spread(self.options.concurrency, range(self.options.queues),
                     lambda worker, queue: audit_queue(run, worker, queue))


async def pull_items(client: Any, queue: int, offset: int, count: int,
                     item: Callable[[int, int, bytes], dict[str, Any]]) -> Completion:
    """One pull as a Completion: ok value the items (`item(queue, offset, body)`), `learned`
    (next offset, answered by the master?); otherwise the value is `{"offset": offset}`."""
    done = await client.pull(queue, offset, count)
    if done.type != "ok":
        return Completion(done.type, {"offset": offset}, done.node, done.error)
    batch, next_offset, from_master = done.value
    return Completion("ok", [item(queue, at, body) for at, body in batch], done.node,
                      learned=(next_offset, from_master))


async def audit_queue(run: OpRunner, worker: int, queue: int) -> bool:
    """Read one queue from offset 0 to its end; False if it could not be read to the end."""
    offset, failures = 0, 0
    while failures < AUDIT_ATTEMPTS:
        done = await run(worker, AUDIT, queue, {"offset": offset})
        if done.type != "ok":
            failures += 1
            await asyncio.sleep(AUDIT_PAUSE_S)
            continue
        failures = 0
        next_offset = done.learned if isinstance(done.learned, int) else offset
        if done.value:
            offset = max(next_offset, max(item["offset"] for item in done.value) + 1)
        elif next_offset > offset:
            offset = next_offset  # the queue starts later (offset too small)
        else:
            return True
    return False
