"""The SUT's processes as tests use them: a cluster fixture, a process's status, sends and
reads through the real client, and a scripted stand-in for a nameserver and a broker."""
from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import pytest

from sut import admin
from sut.client import Consumer, Producer, ReceivedMessage, SendResult
from sut.local import LocalCluster, wait_until
from sut.outcome import Outcome
from sut.protocol import RequestCode, ResponseCode, RpcServer

TOPIC = "chaos"


@pytest.fixture
def sut_cluster(tmp_path: Path) -> Iterator:
    """Factory: sut_cluster(profile, overrides=None) -> a started LocalCluster (fast timings).

    Every process is killed at the end of the test, also when it fails.
    """
    made: list[LocalCluster] = []

    def factory(profile: str, overrides: dict[str, Any] | None = None, start: bool = True) -> LocalCluster:
        cluster = LocalCluster(profile, tmp_path / f"c{len(made)}", timing="fast", overrides=overrides)
        made.append(cluster)
        if start:
            cluster.start_all()
        return cluster

    try:
        yield factory
    finally:
        for cluster in made:
            cluster.close()


def status(addr: str, tries: int = 1) -> dict[str, Any]:
    """PROCESS_STATUS of the process at `addr`, {} if it does not answer (a loaded machine
    may delay one answer, hence `tries`)."""
    for _ in range(tries):
        got = admin.run_sync(admin.process_status(addr, timeout=2.0))
        if got is not None:
            return got
    return {}


def status_of(cluster: LocalCluster, name: str, tries: int = 3) -> dict[str, Any] | None:
    """PROCESS_STATUS of one of the cluster's processes; None if it is not running or
    never answers."""
    popen = cluster.popen.get(name)
    if popen is None or popen.poll() is not None:
        return None
    return status(cluster.address(name), tries) or None


async def send_numbered(namesrv: list[str], count: int, prefix: str, send_timeout: float = 5.0,
                        queues: int = 4, **producer: Any) -> dict[str, str]:
    """Send bodies `prefix-0` .. `prefix-{count-1}` one after another, round robin over
    the queues; body -> msg id of each message acknowledged OK, in sending order."""
    acked: dict[str, str] = {}
    async with Producer(namesrv, send_timeout=send_timeout, **producer) as sender:
        for i in range(count):
            body = f"{prefix}-{i}"
            result = await sender.send(TOPIC, body.encode(), queue=i % queues)
            if result.outcome == Outcome.OK:
                acked[body] = result.msg_id
    return acked


def wait_slave_connected(cluster: LocalCluster, master: str = "broker-a-0", timeout: float = 20) -> None:
    wait_until(lambda: status(cluster.address(master)).get("ha", {}).get("slaves"), timeout,
               what="slave connected to master")


async def send_many(namesrv: list[str], count: int, concurrency: int = 32, size: int = 100,
                    topic: str = TOPIC, send_timeout: float = 5.0) -> dict[str, SendResult]:
    """Send `count` distinct messages from `concurrency` producers; msg id -> result."""
    results: dict[str, SendResult] = {}
    producers = [Producer(namesrv, send_timeout=send_timeout) for _ in range(concurrency)]
    todo = iter(range(count))

    async def worker(p: Producer) -> None:
        for i in todo:
            body = f"m{i:06d}-".encode() + b"x" * max(0, size - 8)
            r = await p.send(topic, body)
            results[r.msg_id] = r

    try:
        await asyncio.gather(*(worker(p) for p in producers))
    finally:
        for p in producers:
            await p.close()
    return results


async def drain(namesrv: list[str], topic: str = TOPIC, read_from: str = "master",
                group: str = "drain") -> list[ReceivedMessage]:
    """Every message of every queue of the topic, from offset 0."""
    async with Consumer(namesrv, group, read_from=read_from) as consumer:  # type: ignore[arg-type]
        out: list[ReceivedMessage] = []
        for mq in await consumer.queues(topic):
            offset = 0
            while True:
                res = await consumer.pull(mq, offset, max_count=32)
                assert res.outcome.value == "ok", res
                if not res.messages:
                    break
                out += res.messages
                offset = res.next_offset
        return out


def counts(messages: list[ReceivedMessage]) -> Counter:
    return Counter(m.msg_id for m in messages)


DLEDGER_BROKERS = ["broker-a-0", "broker-a-1", "broker-a-2"]   # profile dledger-3


def dledger_master(cluster: LocalCluster, candidates: list[str] = DLEDGER_BROKERS) -> str | None:
    """The one broker among `candidates` that says it is master, else None."""
    masters = [n for n in candidates if (s := status_of(cluster, n, tries=1)) and s["ha_role"] == "master"]
    return masters[0] if len(masters) == 1 else None


def wait_dledger_master(cluster: LocalCluster, candidates: list[str] = DLEDGER_BROKERS,
                        timeout: float = 30) -> str:
    return wait_until(lambda: dledger_master(cluster, candidates), timeout, what="one DLedger master")


async def send_through_failover(cluster: LocalCluster, count: int, prefix: str,
                                timeout: float = 8.0) -> list[str]:
    """send_numbered with retries and quick route refreshes, so that sends ride through an
    election; the bodies acknowledged OK."""
    return list(await send_numbered(cluster.namesrv_addrs, count, prefix, timeout,
                                    retries=10, route_refresh_interval=0.5))


class StubCluster:
    """A nameserver and a broker as in-process RpcServers answering from a script.

    `script` is a list of actions for successive sends: a ResponseCode to answer
    with, or "drop" to close the connection without answering.
    """

    def __init__(self, script: list) -> None:
        self.script = list(script)
        self.sends: list[str] = []
        self.route_calls = 0

    async def start(self) -> None:
        log = logging.getLogger("stub")
        self.broker = RpcServer("127.0.0.1", 0, self._broker, log)
        self.namesrv = RpcServer("127.0.0.1", 0, self._namesrv, log)
        await self.broker.start()
        await self.namesrv.start()
        self.broker_addr = f"127.0.0.1:{self.broker._server.sockets[0].getsockname()[1]}"
        self.namesrv_addr = f"127.0.0.1:{self.namesrv._server.sockets[0].getsockname()[1]}"

    async def stop(self) -> None:
        await self.broker.close()
        await self.namesrv.close()

    async def _namesrv(self, cmd, conn):
        self.route_calls += 1
        route = {"topic": TOPIC, "queues": [{"broker_name": "b", "read_queues": 1, "write_queues": 1,
                                             "perm": 6}],
                 "brokers": [{"broker_name": "b", "cluster": "c", "addrs": {"0": self.broker_addr}}]}
        return cmd.reply(ResponseCode.SUCCESS, {}, json.dumps(route).encode())

    async def _broker(self, cmd, conn):
        assert cmd.code == RequestCode.SEND_MESSAGE
        self.sends.append(cmd.fields["msg_id"])
        action = self.script.pop(0) if self.script else ResponseCode.SUCCESS
        if action == "drop":
            conn.close()
            return None
        return cmd.reply(action, {"queue_offset": len(self.sends)})
