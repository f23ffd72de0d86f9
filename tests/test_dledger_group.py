"""DLedger mode end to end: profile dledger-3 as real processes on loopback.

A nameserver and three brokers whose commitlog is a Raft log. Clients use the
real client library (routes from the nameserver); faults are real SIGKILLs.
"""
from __future__ import annotations

import asyncio

import pytest

from sut import admin
from sut.client import Consumer, MessageQueue, Producer
from sut.kv import KvClient
from sut.local import LocalCluster, wait_until
from sut.message import decode_payload, iter_records
from sut.outcome import Outcome
from sut.protocol import RequestCode
from support.sut import DLEDGER_BROKERS, TOPIC, send_through_failover, status_of, wait_dledger_master

# Fast timing: heartbeat 200 ms, election after > 600 ms; acks wait 2.5 s (the default).


@pytest.fixture
def cluster(tmp_path):
    with LocalCluster("dledger-3", tmp_path, timing="fast") as c:
        c.start_all(timeout=60)
        yield c


async def _read_all(addr: str) -> list[str]:
    """Every message of the topic on one broker (all queues), straight from its port."""
    bodies = []
    for queue_id in range(4):
        offset = 0
        while True:
            reply = await admin.call(addr, RequestCode.PULL_MESSAGE,
                                     {"topic": TOPIC, "queue_id": queue_id, "offset": offset, "max_count": 32})
            if reply.fields.get("count", 0) == 0:
                break
            bodies += [decode_payload(p).body.decode() for _, p in iter_records(reply.body)]
            offset = reply.fields["next_offset"]
    return bodies


def test_dledger_group_elects_a_master_registered_with_the_nameserver(cluster):
    master = wait_dledger_master(cluster)
    acked = asyncio.run(send_through_failover(cluster, 20, "hello"))
    assert len(acked) == 20

    async def check():
        async with Consumer(cluster.namesrv_addrs, "g") as consumer:
            route = await consumer.route(TOPIC, refresh=True)
            assert route.master("broker-a") == cluster.address(master)
            got = []
            for q in range(4):
                result = await consumer.pull(MessageQueue(TOPIC, "broker-a", q), 0, 32)
                got += [m.body.decode() for m in result.messages]
            assert sorted(got) == sorted(acked)

    asyncio.run(check())
    # every slave applies the same committed entries, in the same queue order
    for name in DLEDGER_BROKERS:
        wait_until(lambda: sorted(asyncio.run(_read_all(cluster.address(name)))) == sorted(acked), 20,
                   what=f"{name} to apply every committed message")


def test_kill_9_of_the_master_moves_it_and_loses_no_acknowledged_message(cluster):
    old = wait_dledger_master(cluster)
    acked = asyncio.run(send_through_failover(cluster, 10, "before"))
    cluster.kill(old)
    rest = [n for n in DLEDGER_BROKERS if n != old]
    new = wait_dledger_master(cluster, rest)
    acked += asyncio.run(send_through_failover(cluster, 10, "after"))
    assert len(acked) >= 19  # the send in flight at the kill may be indeterminate
    wait_until(lambda: set(acked) <= set(asyncio.run(_read_all(cluster.address(new)))), 20,
               what="the new master to serve every acknowledged message")
    cluster.restart(old, timeout=60)  # comes back as a slave and rebuilds its store from the Raft log
    wait_until(lambda: (s := status_of(cluster, old)) and s["ha_role"] == "slave", 30, what="old master as slave")
    wait_until(lambda: asyncio.run(_read_all(cluster.address(old))) == asyncio.run(_read_all(cluster.address(new))),
               30, what="the old master to hold exactly the new master's messages")


def test_without_quorum_sends_are_indeterminate_and_never_visible(cluster):
    master = wait_dledger_master(cluster)
    acked = asyncio.run(send_through_failover(cluster, 5, "ok"))
    for name in DLEDGER_BROKERS:
        if name != master:
            cluster.kill(name)

    async def lonely_send():
        async with Producer(cluster.namesrv_addrs, send_timeout=4.0, retries=0) as producer:
            return await producer.send(TOPIC, b"lonely", queue=0)

    result = asyncio.run(lonely_send())
    assert result.outcome == Outcome.INDETERMINATE, result
    assert "lonely" not in asyncio.run(_read_all(cluster.address(master)))
    assert set(acked) <= set(asyncio.run(_read_all(cluster.address(master))))


def test_kv_store_is_served_on_the_broker_ports(cluster):
    wait_dledger_master(cluster)

    async def scenario():
        kv = KvClient([cluster.address(n) for n in DLEDGER_BROKERS])
        await kv.write("k", 1)
        await kv.cas("k", 1, 2)
        assert await kv.read("k") == 2
        await kv.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("name, size", [("dledger-3", 3), ("dledger-5", 5)])
def test_dledger_profiles_give_every_broker_the_whole_raft_membership(name, size, tmp_path):
    from sut.broker import create
    from sut.profiles import get, render
    nodes = get(name).nodes_needed  # dledger-3's nameserver has a node of its own
    procs = render(get(name), [f"10.0.0.{i}" for i in range(nodes)], [str(tmp_path / f"w{i}") for i in range(nodes)])
    brokers = [p for p in procs if p.role == "broker"]
    assert len(brokers) == size
    peers = brokers[0].config["ha"]["peers"]
    assert peers == [f"10.0.0.{i}:10912" for i in range(size)]
    for proc in brokers:
        assert proc.config["ha"]["peers"] == peers
        broker = create(proc.config, proc.name)  # the broker accepts it (ha config checked)
        assert broker.ha.node.config.quorum == size // 2 + 1
        broker.ha.node.raft_log.close()


def test_dledger_config_without_this_broker_in_peers_is_a_clear_error(tmp_path):
    from sut.broker import create
    from sut.config import ConfigError
    raw = {"data_dir": str(tmp_path), "ha_mode": "dledger", "ha": {"peers": ["10.9.9.9:1"]}}
    with pytest.raises(ConfigError, match="must contain this broker's Raft address 127.0.0.1:10912"):
        create(raw, "b.json")
