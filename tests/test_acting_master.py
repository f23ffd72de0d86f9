"""RIP-32 slave acting master (profile `acting-master`) with real processes on loopback:
the route presents the smallest-id slave as a read-only id 0 while the master is
gone, consumption and offset commits continue there, and a returning master stays
out of the routes until its pre-online pulled those offsets."""
from __future__ import annotations

import asyncio
import json
import signal
import time

from support.controller import eventually, send_many, wait_until
from support.ports import free_ports
from sut import admin
from sut.broker import PERM_READ, PERM_WRITE
from sut.client import Consumer, TopicRoute
from sut.local import LocalCluster
from sut.namesrv import LiveBroker, NameServer, NameServerConfig, RouteTable
from sut.outcome import Outcome
from sut.protocol import RequestCode, ResponseCode, RpcClient

TOPIC = "chaos"
GROUP = "acting-test"
BROKER_TIMEOUT_MS = 8000  # the nameserver's: the acting slave is paused for a few seconds


def cluster(tmp_path) -> LocalCluster:
    return LocalCluster("acting-master", tmp_path / "cluster", timing="fast",
                        overrides={"namesrv": {"broker_timeout_ms": BROKER_TIMEOUT_MS}})


def route(c: LocalCluster) -> dict:
    reply = asyncio.run(admin.call(c.namesrv_addrs[0], RequestCode.GET_ROUTE, {"topic": TOPIC},
                                   timeout=3.0))
    assert reply.code == ResponseCode.SUCCESS, reply.fields
    return json.loads(reply.body)


def route_ids(c: LocalCluster) -> dict[str, str]:
    return route(c)["brokers"][0]["addrs"]


async def consume(consumer: Consumer, want: int, timeout: float = 20.0) -> list[str]:
    """Poll until `want` messages arrived (or the time is up); commit after each batch."""
    got: list[str] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        result = await consumer.poll(max_count=8, suspend_ms=100)
        got += [m.msg_id for m in result.messages]
        if result.messages:
            assert all(r.outcome == Outcome.OK for r in await consumer.commit())
    return got


def committed(c: LocalCluster, addr: str) -> dict[str, int]:
    """The consumer group's committed offsets held by one broker (its metadata document)."""
    reply = asyncio.run(admin.call(addr, RequestCode.GET_ALL_METADATA, {}, timeout=3.0))
    return json.loads(reply.body)["offsets"].get(GROUP, {})


def test_without_its_master_the_smallest_slave_serves_read_only_and_keeps_the_offsets(tmp_path):
    with cluster(tmp_path) as c:
        c.start_all(timeout=60)
        master, acting, other = (c.address(f"broker-a-{i}") for i in range(3))
        sent = send_many(c, 40, "before", timeout=3.0)
        assert len(sent) == 40

        async def first_half():
            async with Consumer(c.namesrv_addrs, GROUP) as consumer:
                await consumer.subscribe(TOPIC)
                return await consume(consumer, 20)
        first = asyncio.run(first_half())
        assert len(first) >= 20
        wait_until(lambda: committed(c, acting) == committed(c, master) != {}, 20,
                   "the slaves to copy the master's consumer offsets")

        killed_at = time.monotonic()
        c.kill("broker-a-0")
        wait_until(lambda: route_ids(c) == {"0": acting, "2": other}, 30,
                   "the route to show the smallest slave as id 0")
        took = time.monotonic() - killed_at
        assert took < BROKER_TIMEOUT_MS / 1000 + 5, f"acting master after {took:.1f}s"
        assert route(c)["queues"][0]["perm"] & 2 == 0, "an acting master must be read-only"
        wait_until(lambda: admin.run_sync(admin.process_status(acting))["acting_master"], 10,
                   "the slave to learn it acts as master")
        assert send_many(c, 2, "no-master", timeout=3.0) == []  # no writable queue: producers fail over or fail

        async def rest():
            async with Consumer(c.namesrv_addrs, GROUP) as consumer:
                await consumer.subscribe(TOPIC)  # positions from the acting master
                return await consume(consumer, 40 - len(first))
        second = asyncio.run(rest())
        assert sorted(first + second) == sorted(sent), "consumption continued without a gap"
        on_acting = committed(c, acting)
        assert sum(on_acting.values()) == 40

        # pre-online: with the acting slave paused the returning master cannot pull the
        # newer offsets, so it must stay out of the route
        c.send_signal("broker-a-1", signal.SIGSTOP)
        try:
            c.start("broker-a-0")
            wait_until(lambda: (s := admin.run_sync(admin.process_status(master))) and s["ha_role"]
                       == "master", 30, "the master process to be up")
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline:
                assert master not in route_ids(c).values(), "routable before pre-online"
                time.sleep(0.2)
        finally:
            c.send_signal("broker-a-1", signal.SIGCONT)
        wait_until(lambda: route_ids(c).get("0") == master, 30, "the master to be routable again")
        assert committed(c, master) == on_acting, "offsets committed to the acting slave rolled back"
        wait_until(lambda: not admin.run_sync(admin.process_status(acting))["acting_master"], 10,
                   "the slave to stop acting")

        later = send_many(c, 4, "after", timeout=3.0)
        assert len(later) == 4

        async def resume():
            async with Consumer(c.namesrv_addrs, GROUP) as consumer:
                await consumer.subscribe(TOPIC)
                return await consume(consumer, 4, timeout=10.0)
        assert sorted(asyncio.run(resume())) == sorted(later), "no redelivery after the return"


def test_a_slave_that_does_not_act_as_master_refuses_consumer_offset_requests(tmp_path):
    with cluster(tmp_path) as c:
        c.start_all(timeout=60)
        reply = asyncio.run(admin.call(c.address("broker-a-2"), RequestCode.COMMIT_CONSUMER_OFFSET,
                                       {"topic": TOPIC, "queue_id": 0, "group": GROUP,
                                        "offset": 1}))
        assert reply.code == ResponseCode.NOT_MASTER and "act as master" in reply.fields["error"]


def test_a_route_with_an_acting_master_offers_only_the_other_groups_queues_for_writing():
    table = RouteTable()
    for name, broker_id, addr in (("broker-a", 1, "a1"), ("broker-a", 2, "a2"),
                                  ("broker-b", 0, "b0")):
        table.register(LiveBroker("c", name, broker_id, addr, None, "", "master-slave",
                                  acting_master=True), {TOPIC: {"queues": 4, "perm": 6}})
    table.topic_queues[TOPIC]["broker-a"] = {"queues": 4, "perm": 6}  # from its dead master
    got = TopicRoute.from_json(table.route(TOPIC))
    assert got.brokers["broker-a"] == {0: "a1", 2: "a2"}  # smallest slave shown as id 0
    assert {q.broker_name for q in got.message_queues(PERM_WRITE)} == {"broker-b"}
    assert {q.broker_name for q in got.message_queues(PERM_READ)} == {"broker-a", "broker-b"}


def test_a_lightweight_heartbeat_puts_the_broker_back_in_a_nameserver_it_had_lost(tmp_path):
    # full registrations a minute apart: only a heartbeat can bring it back quickly
    with LocalCluster("acting-master", tmp_path / "cluster", timing="fast", overrides={
            "namesrv": {"broker_timeout_ms": 60000},
            **{f"broker-a-{i}": {"register_interval_ms": 60000} for i in range(3)}}) as c:
        c.start_all(timeout=60)
        slave = c.address("broker-a-1")
        c.send_signal("namesrv", signal.SIGSTOP)
        try:
            wait_until(lambda: admin.run_sync(admin.process_status(slave))["registered"] == [],
                       20, "the broker to notice the nameserver is gone")
        finally:
            c.send_signal("namesrv", signal.SIGCONT)
        wait_until(lambda: admin.run_sync(admin.process_status(slave))["registered"]
                   == c.namesrv_addrs, 10, "a heartbeat to register the broker again")


def test_the_nameserver_pushes_the_new_acting_master_to_the_group_when_the_master_leaves(tmp_path):
    async def scenario():
        port = free_ports(1)[0]
        namesrv = NameServer(NameServerConfig(data_dir=str(tmp_path), port=port))
        await namesrv.start()
        pushed: list[dict] = []
        slave = RpcClient("127.0.0.1", port, on_push=lambda cmd: pushed.append(cmd.fields))
        master = RpcClient("127.0.0.1", port)
        try:
            for client, broker_id, addr in ((master, 0, "m:1"), (slave, 1, "s:1")):
                reply = await client.call(RequestCode.REGISTER_BROKER, {
                    "cluster": "c", "broker_name": "broker-a", "broker_id": broker_id,
                    "addr": addr, "enable_acting_master": True})
                assert reply.code == ResponseCode.SUCCESS
            await master.call(RequestCode.UNREGISTER_BROKER, {
                "broker_name": "broker-a", "broker_id": 0, "addr": "m:1"})
            await eventually(lambda: pushed, 5, "a push to the remaining slave")
            assert pushed[-1]["acting_master_addr"] == "s:1"
            assert pushed[-1]["broker_name"] == "broker-a"
        finally:
            await slave.close()
            await master.close()
            await namesrv.stop()
    asyncio.run(scenario())
