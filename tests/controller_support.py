"""Helpers shared by the controller test modules (tests/test_controller_*.py)."""
from __future__ import annotations

import asyncio
import os
import random
import socket
import time
from dataclasses import dataclass
from typing import Awaitable, Callable


def free_ports(count: int) -> list[int]:
    """Distinct free TCP ports on 127.0.0.1 (bound then released)."""
    socks, ports = [], []
    for _ in range(count):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        socks.append(sock)
        ports.append(sock.getsockname()[1])
    for sock in socks:
        sock.close()
    return ports


async def eventually(predicate: Callable[[], Awaitable[bool] | bool], timeout: float,
                     what: str, interval: float = 0.05):
    """Poll until predicate() is truthy; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if asyncio.iscoroutine(value):
                value = await value
            if value:
                return value
        except Exception as exc:  # keep polling; report the last error
            last = exc
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}"
                         + (f" (last error: {last!r})" if last else ""))


def wait_until(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.1):
    """Synchronous eventually()."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:
            last = exc
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}"
                         + (f" (last error: {last!r})" if last else ""))


def read_all_message_ids(namesrv_addrs: list[str], topic: str = "chaos") -> list[str]:
    """Every message id a consumer can read from the topic, in queue order (duplicates kept)."""
    from sut.client import Consumer

    async def go() -> list[str]:
        seen: list[str] = []
        async with Consumer(namesrv_addrs, "checker") as consumer:
            for mq in await consumer.queues(topic):
                offset = 0
                while True:
                    got = await consumer.pull(mq, offset)
                    if got.status != "SUCCESS" or not got.messages:
                        break
                    seen += [m.msg_id for m in got.messages]
                    offset = got.next_offset
        return seen
    return asyncio.run(go())


@dataclass(frozen=True)
class Step:
    """One step of a seeded fault schedule in the randomized controller tests."""

    fault: str
    pick: float          # which process among the candidates (fraction, seeded)
    hold: float          # seconds the fault lasts
    rest: float          # seconds of quiet after healing


def seeded_schedule(seed: int, steps: int, faults: list[str], hold: tuple[float, float],
                    rest: tuple[float, float]) -> list[Step]:
    """The fault schedule of a seed: pure, so a failing seed replays exactly."""
    rng = random.Random(seed)
    return [Step(rng.choice(faults), rng.random(), rng.uniform(*hold), rng.uniform(*rest))
            for _ in range(steps)]


def steps_for_this_run(full: int) -> int:
    """4 steps in CI's short form (CHAOS_LONG=short), else `full`."""
    return 4 if os.environ.get("CHAOS_LONG") == "short" else full
