"""Helpers shared by the SUT test modules (tests/test_sut_*.py)."""
from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import pytest

from sut import admin
from sut.client import Consumer, Producer, ReceivedMessage, SendResult
from sut.local import LocalCluster, wait_until

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


def status(addr: str) -> dict[str, Any]:
    return admin.run_sync(admin.process_status(addr)) or {}


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
