"""The dledger-3 "stale read", reproduced: a DLedger follower that restarts while it
cannot reach the rest of its group serves pulls from its own, shorter store.

That is how RocketMQ behaves (slaves answer pulls from their own store), so the
SUT says who answered (`master` in the pull reply) and the workloads read as a
RocketMQ consumer does: an empty answer from a replica proves nothing (the log
workload records it as `fail`), a lagging replica does not move a queue
consumer back, and the durability audit reads only from the master.
"""
from __future__ import annotations

import asyncio
import signal

from sut import admin
from sut.local import LocalCluster, wait_until
from sut.protocol import RequestCode
from workloads.base import Completion, WorkloadOptions
from workloads.log import LogWorkload
from workloads.queue import QueueWorkload

from support.sut import DLEDGER_BROKERS, TOPIC, send_through_failover, status_of, wait_dledger_master


def pull(cluster: LocalCluster, name: str, queue: int, offset: int):
    return admin.run_sync(admin.call(cluster.address(name), RequestCode.PULL_MESSAGE,
                                     {"topic": TOPIC, "queue_id": queue, "offset": offset, "max_count": 1}))


def test_a_follower_restarted_apart_from_its_group_answers_an_acknowledged_offset_with_nothing(tmp_path):
    with LocalCluster("dledger-3", tmp_path, timing="fast") as cluster:
        cluster.start_all(timeout=60)
        master = wait_dledger_master(cluster)
        follower, other = [n for n in DLEDGER_BROKERS if n != master]
        assert len(asyncio.run(send_through_failover(cluster, 4, "early"))) == 4
        cluster.kill(follower)
        acked = asyncio.run(send_through_failover(cluster, 8, "late"))   # acknowledged by the other two
        assert len(acked) == 8
        for name in (master, other):
            cluster.send_signal(name, signal.SIGSTOP)
        try:
            cluster.restart(follower, timeout=60)   # rebuilds its store from its own Raft log
            stale = pull(cluster, follower, 0, 1)   # queue 0: offset 0 early, 1-2 late
            assert stale.fields["count"] == 0 and stale.fields["master"] is False
        finally:
            for name in (master, other):
                cluster.send_signal(name, signal.SIGCONT)
        leader = wait_dledger_master(cluster)
        fresh = pull(cluster, leader, 0, 1)
        assert fresh.fields["count"] == 1 and fresh.fields["master"] is True
        wait_until(lambda: (s := status_of(cluster, follower)) and s["ha_role"] == "slave", 30,
                   what="the follower to rejoin as a slave")


class AnsweringClient:
    """A broker client whose pulls get a fixed answer (unit level: the workloads' reading rules)."""

    def __init__(self, batch: list, next_offset: int, from_master: bool) -> None:
        self.answer = Completion("ok", (batch, next_offset, from_master), "n3")

    async def pull(self, queue: int, offset: int, max_count: int) -> Completion:
        return self.answer


def test_the_log_workload_records_nothing_from_a_replica_as_a_failed_read_and_from_the_master_as_a_read():
    log = LogWorkload(WorkloadOptions())
    from_replica = asyncio.run(log.execute(AnsweringClient([], 1, False), 0, "read", 0, {"offset": 5}))
    from_master = asyncio.run(log.execute(AnsweringClient([], 5, True), 0, "read", 0, {"offset": 5}))
    assert from_replica.type == "fail" and "not the master" in from_replica.error
    assert (from_master.type, from_master.value) == ("ok", {"offset": 5, "value": None})
    found = asyncio.run(log.execute(AnsweringClient([(5, b"42")], 6, False), 0, "read", 0, {"offset": 5}))
    assert (found.type, found.value) == ("ok", {"offset": 5, "value": 42})   # committed data is a read


def test_a_lagging_replica_does_not_move_a_queue_consumer_back_but_the_master_does():
    queue = QueueWorkload(WorkloadOptions(concurrency=2, queues=1))
    behind = asyncio.run(queue.execute(AnsweringClient([], 3, False), 1, "poll", 0, {"offset": 10}))
    moved = asyncio.run(queue.execute(AnsweringClient([], 3, True), 1, "poll", 0, {"offset": 10}))
    assert (behind.learned, moved.learned) == (10, 3)


def test_the_audit_only_accepts_the_master_s_answer():
    queue = QueueWorkload(WorkloadOptions(concurrency=2, queues=1))
    replica = asyncio.run(queue.execute(AnsweringClient([], 0, False), 0, "audit", 0, {"offset": 0}))
    master = asyncio.run(queue.execute(AnsweringClient([], 0, True), 0, "audit", 0, {"offset": 0}))
    assert replica.type == "fail" and (master.type, master.value) == ("ok", [])
