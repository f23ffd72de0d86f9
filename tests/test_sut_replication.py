"""Classic master-slave replication with real processes: sync acks, async, slave reads."""
from __future__ import annotations

import asyncio
import signal

from support.sut import TOPIC, counts, drain, send_many, status, sut_cluster, wait_slave_connected  # noqa: F401

from sut.client import Consumer, Outcome, Producer
from sut.local import wait_until
from sut.protocol import RequestCode, ResponseCode, RpcClient


def test_sync_master_acks_only_what_the_slave_already_has(sut_cluster):
    cluster = sut_cluster("master-slave-sync")
    wait_slave_connected(cluster)
    sent = asyncio.run(send_many(cluster.namesrv_addrs, 2000, concurrency=32))
    acked = {i for i, r in sent.items() if r.outcome == Outcome.OK}
    assert len(acked) >= 1900, {r.status for r in sent.values()}
    # The master dies right after the acks: whatever was acked must already be on the slave.
    cluster.kill("broker-a-0", signal.SIGKILL)
    on_slave = counts(asyncio.run(drain(cluster.namesrv_addrs, read_from="slave")))
    missing = acked - set(on_slave)
    assert not missing, f"{len(missing)} acknowledged messages are not on the slave"
    assert max(on_slave.values()) == 1


def test_slave_serves_reads_and_rejects_writes_as_a_definite_failure(sut_cluster):
    cluster = sut_cluster("master-slave-sync")
    wait_slave_connected(cluster)
    slave = cluster.address("broker-a-1")

    async def scenario():
        async with Producer(cluster.namesrv_addrs) as producer:
            ok = await producer.send(TOPIC, b"replicated", queue=0)
        assert ok.outcome == Outcome.OK
        async with Consumer(cluster.namesrv_addrs, "g", read_from="slave") as consumer:
            mq = (await consumer.queues(TOPIC))[0]
            pulled = await consumer.pull(mq, 0)
        assert pulled.broker_addr == slave and [m.body for m in pulled.messages] == [b"replicated"]
        client = RpcClient(*slave.split(":"))
        try:
            reply = await client.call(RequestCode.SEND_MESSAGE, {"topic": TOPIC, "queue_id": 0,
                                                                 "msg_id": "direct-1"}, b"x")
        finally:
            await client.close()
        assert reply.code == ResponseCode.NOT_MASTER

    asyncio.run(scenario())
    assert status(slave)["max_offset"] == status(cluster.address("broker-a-0"))["max_offset"]


def test_sync_master_answers_flush_slave_timeout_when_the_slave_stalls(sut_cluster):
    cluster = sut_cluster("master-slave-sync")
    wait_slave_connected(cluster)
    cluster.send_signal("broker-a-1", signal.SIGSTOP)
    try:
        async def send():
            async with Producer(cluster.namesrv_addrs, send_timeout=5) as producer:
                return await producer.send(TOPIC, b"stalled")

        result = asyncio.run(send())
    finally:
        cluster.send_signal("broker-a-1", signal.SIGCONT)
    assert result.status == "FLUSH_SLAVE_TIMEOUT" and result.outcome == Outcome.INDETERMINATE
    assert result.attempts == 1  # indeterminate statuses are not retried
    # written on the master all the same, and the slave catches up after SIGCONT
    wait_until(lambda: status(cluster.address("broker-a-1"))["max_offset"]
               == status(cluster.address("broker-a-0"))["max_offset"], 10, what="slave caught up")


def test_sync_master_without_a_slave_answers_slave_not_available(sut_cluster):
    cluster = sut_cluster("master-slave-sync")
    wait_slave_connected(cluster)
    cluster.kill("broker-a-1")
    wait_until(lambda: not status(cluster.address("broker-a-0"))["ha"]["slaves"], 10,
               what="master noticed the slave is gone")

    async def send():
        async with Producer(cluster.namesrv_addrs) as producer:
            return await producer.send(TOPIC, b"alone")

    result = asyncio.run(send())
    assert result.status == "SLAVE_NOT_AVAILABLE" and result.outcome == Outcome.INDETERMINATE
    # a restarted slave reconnects and copies what it missed
    cluster.restart("broker-a-1")
    wait_until(lambda: status(cluster.address("broker-a-1"))["max_offset"]
               == status(cluster.address("broker-a-0"))["max_offset"] > 0, 10, what="slave caught up")


def test_async_master_acks_without_waiting_for_a_stalled_slave(sut_cluster):
    cluster = sut_cluster("master-slave-async")
    wait_slave_connected(cluster)
    cluster.send_signal("broker-a-1", signal.SIGSTOP)
    try:
        sent = asyncio.run(send_many(cluster.namesrv_addrs, 50, concurrency=4))
    finally:
        cluster.send_signal("broker-a-1", signal.SIGCONT)
    assert all(r.outcome == Outcome.OK for r in sent.values())
    wait_until(lambda: status(cluster.address("broker-a-1"))["max_offset"]
               == status(cluster.address("broker-a-0"))["max_offset"], 10, what="slave caught up")
    assert set(counts(asyncio.run(drain(cluster.namesrv_addrs, read_from="slave")))) == set(sent)


def test_without_a_master_writes_fail_and_reads_go_to_the_slave(sut_cluster):
    cluster = sut_cluster("master-slave-async")
    wait_slave_connected(cluster)
    sent = asyncio.run(send_many(cluster.namesrv_addrs, 20, concurrency=2))
    wait_until(lambda: status(cluster.address("broker-a-1"))["max_offset"]
               == status(cluster.address("broker-a-0"))["max_offset"], 10, what="slave caught up")
    cluster.kill("broker-a-0")

    async def scenario():
        async with Producer(cluster.namesrv_addrs, send_timeout=2) as producer:
            failed = await producer.send(TOPIC, b"no master")
        return failed, await drain(cluster.namesrv_addrs)  # read_from=master falls back to the slave

    failed, read = asyncio.run(scenario())
    assert failed.outcome == Outcome.FAIL, failed
    assert set(counts(read)) == set(sent)
