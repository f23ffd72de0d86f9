"""Operator queries: process status, cluster info, readiness, topic creation.

Used by the deployer, the loopback cluster for tests and bench, and anyone
who wants to look inside a running SUT. Each call opens its own connection,
so these work from any thread or event loop.
"""
from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from sut.config import split_address
from sut.protocol import RequestCode, ResponseCode, RpcClient, RpcError


async def call(addr: str, code: int, fields: dict[str, Any] | None = None, body: bytes = b"",
               timeout: float = 2.0):
    """One request to `addr` on a fresh connection; returns the reply Command."""
    client = RpcClient(*split_address(addr, "address"), connect_timeout=timeout)
    try:
        return await client.call(code, fields or {}, body, timeout=timeout)
    finally:
        await client.close()


async def process_status(addr: str, timeout: float = 2.0) -> dict[str, Any] | None:
    """PROCESS_STATUS fields of the process at addr, or None if it does not answer."""
    try:
        reply = await call(addr, RequestCode.PROCESS_STATUS, timeout=timeout)
    except RpcError:
        return None
    return reply.fields if reply.code == ResponseCode.SUCCESS else None


async def cluster_info(namesrv_addr: str, timeout: float = 2.0) -> dict[str, Any] | None:
    """The nameserver's registry (brokers, live table, topics), or None if unreachable."""
    try:
        reply = await call(namesrv_addr, RequestCode.GET_CLUSTER_INFO, timeout=timeout)
    except RpcError:
        return None
    return json.loads(reply.body) if reply.code == ResponseCode.SUCCESS else None


async def create_topic(broker_addr: str, topic: str, queues: int, timeout: float = 2.0) -> None:
    reply = await call(broker_addr, RequestCode.CREATE_TOPIC, {"topic": topic, "queues": queues},
                       timeout=timeout)
    if reply.code != ResponseCode.SUCCESS:
        raise RuntimeError(f"create topic {topic} on {broker_addr}: {reply.fields.get('error')}")


async def wait_ready(addrs: list[str], timeout: float, interval: float = 0.1) -> dict[str, str]:
    """Poll PROCESS_STATUS until every address reports ready (and replicating, if it says).

    Returns {} when all are ready, else address -> what was last seen
    ("no answer", "not ready" or "not replicating"), after `timeout` seconds.
    """
    deadline = time.monotonic() + timeout
    pending = {a: "no answer" for a in addrs}
    while True:
        for addr in list(pending):
            status = await process_status(addr, timeout=min(2.0, max(0.2, deadline - time.monotonic())))
            if status is None:
                pending[addr] = "no answer"
            elif not status.get("ready"):
                pending[addr] = "not ready"
            elif not status.get("replicating", True):
                pending[addr] = "not replicating"
            else:
                del pending[addr]
        if not pending or time.monotonic() >= deadline:
            return pending
        await asyncio.sleep(interval)


def run_sync(coro):
    """Run a coroutine from synchronous code, also when an event loop is already running."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    import concurrent.futures
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as executor:
        return executor.submit(asyncio.run, coro).result()
