"""Replicated records name directories: a peer's bad topic is refused, never written outside.

A Raft peer (any client of a broker's Raft port may propose) and an HA master
(whatever a slave follows) hand the broker records; their topic becomes a
consume-queue directory. Real broker processes on loopback, a real fake master.
"""
from __future__ import annotations

import asyncio
from pathlib import Path

from sut import admin
from sut.client import Producer
from sut.local import wait_until
import pytest

from sut.message import CorruptRecord, Message, encode_payload, encode_record, valid_topic
from sut.protocol import Command, RequestCode, RpcClient, encode, read_command
from sut.store.consumequeue import ConsumeQueues
from support.sut import TOPIC, sut_cluster, status  # noqa: F401  (fixture)

BAD_TOPICS = ("../x", "../../x", "abc\n")


def _escapes(root: Path, absolute: Path) -> list[Path]:
    """Anything a bad topic made: a path named x, or the absolute target."""
    return list(root.rglob("x")) + ([absolute] if absolute.exists() else [])


def _record(topic: str, msg_id: str) -> bytes:
    return encode_payload(Message(topic, 0, msg_id, b"evil"))


def test_valid_topic_matches_the_whole_string():
    assert valid_topic("chaos") and not valid_topic("abc\n") and not valid_topic("..")


def test_consume_queue_registry_refuses_a_path_for_a_topic(tmp_path):
    queues = ConsumeQueues(tmp_path / "consumequeue")
    for topic in (*BAD_TOPICS, str(tmp_path / "abs")):
        with pytest.raises(CorruptRecord):
            queues.dispatch(topic, 0, 0, 10)
    assert not queues.queues


def test_a_raft_peer_proposing_a_bad_topic_writes_nothing_outside_and_the_group_serves(sut_cluster, tmp_path):
    cluster = sut_cluster("dledger-3")
    brokers = [n for n in cluster.processes if n.startswith("broker")]
    wait_until(lambda: any(status(cluster.address(n)).get("ha_role") == "master" for n in brokers), 30,
               what="a DLedger master")
    leader = next(n for n in brokers if status(cluster.address(n)).get("ha_role") == "master")
    absolute = tmp_path / "abs"

    async def attack() -> list[int]:
        host, port = "127.0.0.1", cluster.processes[leader].config["ha_port"]
        client = RpcClient(host, port)
        codes = []
        try:
            for topic in (*BAD_TOPICS, str(absolute)):
                reply = await client.call(RequestCode.RAFT_PROPOSE, {}, b"M" + len(
                    payload := _record(topic, "evil")).to_bytes(4, "big") + payload, timeout=5)
                codes.append(reply.code)
        finally:
            await client.close()
        async with Producer(cluster.namesrv_addrs, send_timeout=5.0) as producer:
            result = await producer.send(TOPIC, b"after the attack")
        codes.append(result.outcome.value)
        return codes

    codes = asyncio.run(attack())
    assert all(code != 0 for code in codes[:-1]), codes  # every bad proposal is answered with an error
    assert codes[-1] == "ok", codes
    wait_until(lambda: all("corrupt record" in cluster.log_text(n) for n in brokers), 10,
               what="every broker to refuse the entry")
    # consume queues reach their files at the next checkpoint: give it time to (not) happen
    wait_until(lambda: all((cluster.data_dir(n) / "consumequeue" / TOPIC).is_dir() for n in brokers), 10,
               what="the good send's consume queue on disk")
    assert _escapes(tmp_path, absolute) == []
    assert all(admin.run_sync(admin.process_status(cluster.address(n))) for n in brokers)


def test_an_ha_master_sending_a_bad_topic_writes_nothing_outside_and_the_slave_serves(sut_cluster, tmp_path):
    absolute = tmp_path / "abs"
    records = b"".join(encode_record(_record(t, f"m{i}")) for i, t in enumerate((*BAD_TOPICS, str(absolute))))
    records += encode_record(_record(TOPIC, "good"))
    acks: list[int] = []

    async def fake_master(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        first = await read_command(reader)
        acks.append(first.fields["offset"])
        writer.write(encode(Command(int(RequestCode.HA_TRANSFER), {"offset": first.fields["offset"]}, records)))
        await writer.drain()
        while (cmd := await read_command(reader)) is not None:
            acks.append(cmd.fields["offset"])

    async def scenario() -> None:
        server = await asyncio.start_server(fake_master, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        cluster = sut_cluster("master-slave-async", {"broker-a-1": {"ha": {"master_ha_addr": f"127.0.0.1:{port}"}}},
                              start=False)
        await asyncio.to_thread(cluster.start, "broker-a-1")
        for _ in range(300):
            if acks and acks[-1] == len(records):
                break
            await asyncio.sleep(0.1)
        server.close()
        assert acks and acks[-1] == len(records), acks  # the slave took every record and goes on
        slave = cluster.address("broker-a-1")
        assert await admin.process_status(slave)
        await asyncio.sleep(2.5)  # a checkpoint writes the consume queues
        assert _escapes(tmp_path, absolute) == []
        assert (cluster.data_dir("broker-a-1") / "consumequeue" / TOPIC / "0").exists()
        assert "invalid topic" in cluster.log_text("broker-a-1")

    asyncio.run(scenario())
