"""The queue and log workloads' client on real RocketMQ: BrokerClient's interface over
RocketMQ's own Java client (sut/rocketmq/driver.py).

Same calls, same Completion values as workloads.clients.BrokerClient, so the histories
carry the same fields and every checker reads them unchanged. Each instance is one
RocketMQ producer (its own client instance and connections) inside the run's one
shared driver JVM; a worker's client that is closed after an `info` and reopened
starts from fresh connections and routes, as on the model.
"""
from __future__ import annotations

import asyncio
import base64
import time
from typing import Any, Awaitable, Callable, TypeVar

from sut.rocketmq.driver import (Driver, DriverDied, DriverError, SharedDriver, classify_error,
                                 classify_send, error_text, shared_driver)
from workloads.base import Completion
from workloads.clients import ROUTE_WAIT_S, Endpoints, node_of

T = TypeVar("T")
ROUTE_POLL_S = 0.3
# RocketMQ's client default is 30 s; a fault's recovery window must cover it.
DEFAULT_ROUTE_REFRESH_S = 3.0

async def _finish_or_undo(step: Awaitable[T], undo: Callable[[T], object]) -> T:
    """Await `step`; if the caller is cancelled first (the runner's op timeout), let the step
    finish and undo it, so a driver hold or an opened producer is never left behind."""
    task = asyncio.ensure_future(step)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        task.add_done_callback(lambda t: undo(t.result()) if not t.cancelled() and t.exception() is None else None)
        raise


async def close_in_driver(shared: SharedDriver, driver: Driver | None, op: str, timeout: float, **args: Any) -> None:
    """Ask the driver to close what `op` names (best effort), then let go of the driver."""
    if driver is None:
        return
    try:
        if driver.alive:
            await asyncio.wait_for(driver.acall(op, **args), timeout)
    except (DriverError, DriverDied, asyncio.TimeoutError):
        pass
    finally:
        shared.release()


def _broker_of(exc: BaseException) -> str | None:
    """The broker that answered with an error, when RocketMQ names it."""
    return exc.error.get("broker") if isinstance(exc, DriverError) else None


class RocketMQClient:
    """send / pull / commit by queue id on one topic, on real RocketMQ."""

    def __init__(self, endpoints: Endpoints, topic: str, group: str, op_timeout: float,
                 node_names: dict[str, str] | None = None, route_refresh_s: float | None = None,
                 shared: SharedDriver | None = None) -> None:
        self.endpoints, self.topic, self.group = endpoints, topic, group
        self.namesrv = ";".join(endpoints.namesrv)
        # Leave the runner's op timeout the last word, as BrokerClient does.
        self.send_timeout_ms = int(max(0.5, op_timeout * 0.8) * 1000)
        self.pull_timeout_ms = int(max(0.5, op_timeout * 0.4) * 1000)
        self.route_refresh_ms = int((route_refresh_s or DEFAULT_ROUTE_REFRESH_S) * 1000)
        self.node_names = node_names or {}
        self.shared = shared or shared_driver()
        self._driver: Driver | None = None
        self._client: int | None = None

    # -- the producer in the driver ---------------------------------------------------------
    async def _open(self) -> tuple[Driver, int]:
        """This client's producer; (re)opened when none is open or its driver died."""
        if self._driver is not None and self._client is not None and self._driver.alive:
            return self._driver, self._client
        if self._driver is not None:
            self._driver, self._client = None, None
            self.shared.release()
        driver = await _finish_or_undo(asyncio.to_thread(self.shared.acquire), lambda _: self.shared.release())
        try:
            opened = await _finish_or_undo(
                driver.acall("open", namesrv=self.namesrv, route_refresh_ms=self.route_refresh_ms,
                             timeout_ms=self.send_timeout_ms),
                lambda done: driver.submit("close", client=done["client"]))
        except BaseException:
            self.shared.release()
            raise
        self._driver, self._client = driver, opened["client"]
        return driver, opened["client"]

    async def _call(self, op: str, **args: Any) -> Any:
        driver, client = await self._open()
        return await driver.acall(op, client=client, topic=self.topic, **args)

    def _node(self, addr: str | None) -> str | None:
        return node_of(addr, self.node_names)

    # -- admin --------------------------------------------------------------------------------
    async def create_topic(self, queues: int) -> None:
        """Create the topic on every broker (masters and replicas, so a replica that becomes
        master has it), then wait until the nameservers route all its queues. Brokers that
        just started may not be registered yet: until the deadline, try again."""
        driver, _ = await self._open()
        deadline = time.monotonic() + ROUTE_WAIT_S
        created = False
        while True:
            try:
                if not created:
                    done = await driver.acall("create_topic", namesrv=self.namesrv, topic=self.topic, queues=queues)
                    created = bool(done["created"])
                if created and len(await self._call("queues", refresh=True)) >= queues:
                    return
            except DriverError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {self.topic} has no route with {queues} queues after "
                                   f"{ROUTE_WAIT_S:g}s" + ("" if created else " (no broker took it)"))
            await asyncio.sleep(ROUTE_POLL_S)

    # -- operations ---------------------------------------------------------------------------
    async def send(self, queue: int, body: bytes, msg_id: str, deliver_ms: int | None = None) -> Completion:
        """ok value: the queue offset the message got (with `deliver_ms`, a timer message
        delivered then: the offset is the timer topic's)."""
        timer = {"deliver_ms": deliver_ms} if deliver_ms else {}
        try:
            sent = await self._call("send", queue=queue, body=base64.b64encode(body).decode(),
                                    key=msg_id, timeout_ms=self.send_timeout_ms, **timer)
        except (DriverError, DriverDied) as exc:
            return Completion(classify_error(exc), None, self._node(_broker_of(exc)), error_text(exc))
        node = self._node(sent.get("broker_addr"))
        kind = classify_send(sent["status"])
        if kind == "ok":
            return Completion("ok", sent["queue_offset"], node)
        return Completion(kind, None, node, f"{sent['status']}: msgId {sent['msg_id']}")

    async def pull(self, queue: int, offset: int, max_count: int) -> Completion:
        """ok value: ([(queue offset, body), ...], next offset, answered by the master?)."""
        try:
            got = await self._call("pull", queue=queue, offset=offset, max=max_count, group=self.group,
                                   timeout_ms=self.pull_timeout_ms)
        except DriverError as exc:
            # A read has no effect: an answer that is an error is a fail; no answer is info.
            kind = "info" if exc.cls in ("RemotingTimeoutException", "RemotingSendRequestException") else "fail"
            return Completion(kind, None, self._node(_broker_of(exc)), error_text(exc))
        except DriverDied as exc:
            return Completion("info", None, None, error_text(exc))
        batch = [(m["offset"], base64.b64decode(m["body"])) for m in got["messages"]]
        next_offset = got["next_offset"] if got["next_offset"] is not None else offset + len(batch)
        return Completion("ok", (batch, next_offset, bool(got["from_master"])), self._node(got["broker_addr"]))

    async def commit(self, queue: int, offset: int) -> None:
        """Best effort: a lost commit only means redelivery after a consumer restart."""
        await self._call("commit", queue=queue, offset=offset, group=self.group,
                         timeout_ms=self.pull_timeout_ms)

    async def close(self) -> None:
        driver, client = self._driver, self._client
        self._driver, self._client = None, None
        await close_in_driver(self.shared, driver, "close", 5, client=client)
