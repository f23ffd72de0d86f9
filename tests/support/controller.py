"""Controller mode as tests drive it: an in-process controller group, loopback clusters with
test timings, the master and its replicas' state, seeded fault schedules, polling."""
from __future__ import annotations

import asyncio
import os
import random
import time
from dataclasses import dataclass
from typing import Awaitable, Callable

from sut import admin
from sut.controller.client import ControllerClient
from sut.controller.server import Controller, ControllerSettings
from sut.local import LocalCluster
from sut.profiles import Profile, get
from sut.protocol import RequestCode, ResponseCode
from support.ports import free_ports
from support.sut import TOPIC, send_numbered, status_of


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


QUEUES = 4


def broker_ha(**extra) -> dict:
    """Broker `ha` overrides for tests: generous waits, fast reactions."""
    return {"ha": {"slave_timeout_ms": 3000, "heartbeat_timeout_ms": 3000,
                   "ha_max_time_slave_not_catchup_ms": 3000, "ha_heartbeat_interval_ms": 500,
                   "ha_housekeeping_ms": 5000, "controller_timeout_ms": 3000, **extra}}


def controller_cluster(profile, tmp_path, brokers: dict[str, dict] | None = None,
                       **ha) -> LocalCluster:
    """A loopback cluster of `profile` with the test overrides on every broker."""
    names = [p.name for p in (profile if isinstance(profile, Profile) else get(profile)).processes]
    overrides = {n: broker_ha(**ha) for n in names if n.startswith("broker")}
    for name, extra in (brokers or {}).items():
        overrides[name]["ha"].update(extra)
    return LocalCluster(profile, tmp_path / "cluster", timing="fast", overrides=overrides)


def brokers(c: LocalCluster) -> list[str]:
    return [n for n, p in c.processes.items() if p.role == "broker"]


def current_master(c: LocalCluster, exclude: str | None = None) -> str | None:
    for name in brokers(c):
        st = status_of(c, name) if name != exclude else None
        if st and st.get("ready") and st.get("ha_role") == "master":
            return name
    return None


def send_many(c: LocalCluster, count: int, prefix: str, timeout: float = 5.0) -> list[str]:
    """Send `count` messages one after another; the ids acknowledged OK."""
    return list(asyncio.run(send_numbered(c.namesrv_addrs, count, prefix, timeout, QUEUES)).values())


def raw_send(addr: str, msg_id: str, timeout: float = 8.0) -> int:
    """One SEND_MESSAGE straight to a broker; the response code."""
    reply = asyncio.run(admin.call(addr, RequestCode.SEND_MESSAGE,
                                   {"topic": TOPIC, "queue_id": 0, "msg_id": msg_id}, b"x", timeout=timeout))
    return reply.code


def ha(st: dict) -> dict:
    """The HA part of a broker's status."""
    return st["ha"]


GROUP = "broker-a"


class Group:
    """A controller group in the test's own event loop, on free loopback ports."""

    def __init__(self, tmp_path, n: int = 3, **overrides) -> None:
        ports = free_ports(2 * n)
        self.ports = {f"c{i}": (ports[i], ports[n + i]) for i in range(n)}
        self.settings = ControllerSettings(
            controller_addrs=[f"127.0.0.1:{ports[i]}" for i in range(n)],
            raft_addrs=[f"127.0.0.1:{ports[n + i]}" for i in range(n)],
            **{"raft_timing": "test", **overrides})
        self.tmp_path = tmp_path
        self.controllers: dict[str, Controller] = {}

    async def start(self, cid: str) -> Controller:
        port, raft_port = self.ports[cid]
        controller = Controller(self.settings, "127.0.0.1", port, raft_port,
                                str(self.tmp_path / cid))
        await controller.start()
        self.controllers[cid] = controller
        return controller

    async def start_all(self) -> None:
        for cid in self.ports:
            await self.start(cid)

    async def stop(self, cid: str) -> None:
        await self.controllers.pop(cid).stop()

    async def stop_all(self) -> None:
        for cid in list(self.controllers):
            await self.stop(cid)

    def leader(self) -> Controller | None:
        ready = [c for c in self.controllers.values() if c.raft.is_ready]
        return ready[0] if len(ready) == 1 else None

    def client(self, **kwargs) -> ControllerClient:
        return ControllerClient(self.settings.controller_addrs, timeout=5.0, **kwargs)


async def register(client: ControllerClient, broker_id: int) -> None:
    address = f"127.0.0.1:{20000 + broker_id}"
    reply = await client.call(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, {"cluster": "c", "broker_name": GROUP})
    assert reply.fields["next_broker_id"] == broker_id
    reply = await client.call(RequestCode.CONTROLLER_APPLY_BROKER_ID, {
        "cluster": "c", "broker_name": GROUP, "broker_id": broker_id, "address": address,
        "check_code": f"{address};1"})
    assert reply.code == ResponseCode.SUCCESS, reply.fields
    reply = await client.call(RequestCode.CONTROLLER_REGISTER_BROKER, {
        "cluster": "c", "broker_name": GROUP, "broker_id": broker_id, "address": address})
    assert reply.code == ResponseCode.SUCCESS, reply.fields


def heartbeat_fields(broker_id: int, **extra) -> dict:
    return {"cluster": "c", "broker_name": GROUP, "broker_id": broker_id,
            "address": f"127.0.0.1:{20000 + broker_id}", **extra}
