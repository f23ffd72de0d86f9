"""RocketMQ's own clients for its message types, in the run's driver JVM: an orderly push
consumer (sut/rocketmq/java/chaos/rmq/OrderedMember.java) and a transactional producer
(TxProducer.java). Both are RocketMQ's: its rebalance takes the queue locks of an orderly
consumer, its broker's check service asks a transactional producer back. These wrappers
only open, call and close them, and report what the driver recorded.
"""
from __future__ import annotations

import asyncio
import base64
from typing import Any

from sut.rocketmq.driver import Driver, DriverDied, DriverError, SharedDriver, shared_driver
from workloads.rocketmq_client import DEFAULT_ROUTE_REFRESH_S, _finish_or_undo, close_in_driver

CLOSE_TIMEOUT_S = 20.0   # a push consumer's shutdown persists offsets and unlocks its queues


class _InDriver:
    """One object (consumer or producer) that lives in the shared driver JVM."""

    close_op = ""

    def __init__(self, namesrv: list[str], timeout: float, route_refresh_s: float | None,
                 shared: SharedDriver | None) -> None:
        self.namesrv = ";".join(namesrv)
        self.timeout_ms = int(timeout * 1000)
        self.route_refresh_ms = int((route_refresh_s or DEFAULT_ROUTE_REFRESH_S) * 1000)
        self.shared = shared or shared_driver()
        self._driver: Driver | None = None
        self._handle: dict[str, Any] = {}

    async def _open(self, op: str, handle: str, **args: Any) -> dict[str, Any]:
        """Open it in the driver (once); raises DriverError / DriverDied if RocketMQ cannot start it."""
        if self._driver is not None:
            return self._handle
        driver = await _finish_or_undo(asyncio.to_thread(self.shared.acquire), lambda _: self.shared.release())
        try:
            opened = await _finish_or_undo(
                driver.acall(op, namesrv=self.namesrv, timeout_ms=self.timeout_ms,
                             route_refresh_ms=self.route_refresh_ms, **args),
                lambda done: driver.submit(self.close_op, **{handle: done[handle]}))
        except BaseException:
            self.shared.release()
            raise
        self._driver, self._handle = driver, dict(opened)
        return opened

    async def _call(self, op: str, **args: Any) -> Any:
        if self._driver is None:
            raise DriverDied("not open")
        return await self._driver.acall(op, **{k: self._handle[k] for k in ("member", "client") if k in self._handle},
                                        **args)

    @property
    def open(self) -> bool:
        return self._driver is not None


class OrderlyConsumer(_InDriver):
    """A member of an orderly consumer group (clustering mode, MessageListenerOrderly)."""

    close_op = "ordered_close"

    def __init__(self, namesrv: list[str], group: str, topic: str, timeout: float,
                 route_refresh_s: float | None = None, process_ms: int = 5,
                 shared: SharedDriver | None = None) -> None:
        super().__init__(namesrv, timeout, route_refresh_s, shared)
        self.group, self.topic, self.process_ms = group, topic, process_ms

    @property
    def client_id(self) -> str:
        return str(self._handle.get("client_id", ""))

    async def start(self) -> str:
        """Start the consumer (RocketMQ rebalances, locks its queues and consumes on its own)."""
        await self._open("ordered_open", "member", group=self.group, topic=self.topic, process_ms=self.process_ms)
        return self.client_id

    async def take(self) -> dict[str, Any]:
        """What the listener processed since the last take: {deliveries, locked, now_ns}."""
        return _decoded(await self._call("ordered_take"))

    async def close(self) -> dict[str, Any] | None:
        """Shut down (offsets persisted, queues unlocked); what was processed since the last
        take, or None if the shutdown got no answer (what it had is not known)."""
        driver, handle = self._driver, dict(self._handle)
        self._driver, self._handle = None, {}
        if driver is None:
            return None
        try:
            got = await asyncio.wait_for(driver.acall("ordered_close", member=handle["member"]), CLOSE_TIMEOUT_S)
        except (DriverError, DriverDied, asyncio.TimeoutError):
            return None
        finally:
            self.shared.release()
        return _decoded(got) if got else {"deliveries": [], "locked": []}


def _decoded(got: dict[str, Any]) -> dict[str, Any]:
    """The driver's answer with each delivery's body decoded to bytes."""
    for item in got.get("deliveries") or []:
        item["body"] = base64.b64decode(item.get("body") or "")
    return got


class TransactionalProducer(_InDriver):
    """A producer of one transactional producer group (RocketMQ's TransactionMQProducer)."""

    close_op = "tx_close"

    def __init__(self, namesrv: list[str], group: str, topic: str, timeout: float,
                 route_refresh_s: float | None = None, shared: SharedDriver | None = None) -> None:
        super().__init__(namesrv, timeout, route_refresh_s, shared)
        self.group, self.topic = group, topic

    async def send(self, body: bytes, key: str, decision: str, resolution: str) -> dict[str, Any]:
        """Half message, local transaction answering `decision`, end of transaction; the
        answer of sendMessageInTransaction (raises DriverError / DriverDied)."""
        await self._open("tx_open", "client", group=self.group)
        return await self._call("tx_send", topic=self.topic, body=base64.b64encode(body).decode(), key=key,
                                decision=decision, resolution=resolution)

    async def checks(self) -> list[dict[str, Any]]:
        """The check-backs any transactional producer of this driver answered since the last call."""
        await self._open("tx_open", "client", group=self.group)
        return list(await self._call("tx_checks"))

    async def close(self) -> None:
        driver, handle = self._driver, dict(self._handle)
        self._driver, self._handle = None, {}
        await close_in_driver(self.shared, driver, "tx_close", 10, client=handle.get("client"))
