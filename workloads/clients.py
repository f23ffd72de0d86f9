"""Client adapters: the SUT client library, seen the way the workloads need it.

The workloads speak in queue ids, offsets and Completions; the SUT's
Producer/Consumer (sut/client.py) and KvClient (sut/kv.py) speak in routes,
message queues and Outcomes. This module is the only place that translates,
so a change in the client library touches one file. The classification of
statuses into ok / fail / indeterminate is the client library's
(sut/outcome.py); here it only becomes a history type. Every system has a
client with this interface (QueueClient; real RocketMQ's is
workloads.rocketmq_client.RocketMQClient); `broker_client` asks the systems
table for the one of `Endpoints.system`.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from sut import admin, systems
from sut.client import Consumer, MessageQueue, Producer, RouteUnavailable
from sut.kv import KvClient
from sut.outcome import Outcome
from sut.raft.errors import CasMismatch, RaftError
from workloads.base import Completion

ROUTE_WAIT_S = 30.0
# The exact error text the checkers (checkers/ops.py) read as "the system
# answered; the expected value did not match".
CAS_MISMATCH = "cas-mismatch"


@dataclass(frozen=True)
class Endpoints:
    """Where clients connect: from the deployer (or a loopback cluster in tests)."""

    namesrv: list[str] = field(default_factory=list)
    brokers: list[str] = field(default_factory=list)
    kv: list[str] = field(default_factory=list)
    system: str = "model"   # what speaks there: a system of sut/systems.py


def node_of(addr: str | None, names: dict[str, str]) -> str | None:
    """The node name behind an address, if the endpoints say; else the address."""
    if addr is None:
        return None
    return names.get(addr.rsplit(":", 1)[0], addr)


class BrokerClient:
    """send / pull / commit by queue id on one topic, for the queue and log workloads."""

    def __init__(self, endpoints: Endpoints, topic: str, group: str, op_timeout: float,
                 node_names: dict[str, str] | None = None, route_refresh_s: float | None = None) -> None:
        self.endpoints, self.topic = endpoints, topic
        # Leave the runner's op timeout the last word: a send (with its retries)
        # or a pull (master, then a slave) ends inside it with its own status.
        self.producer = Producer(endpoints.namesrv, send_timeout=max(0.5, op_timeout * 0.8))
        self.consumer = Consumer(endpoints.namesrv, group, timeout=max(0.5, op_timeout * 0.4))
        if route_refresh_s is not None:  # RocketMQ's routing: periodic refresh only
            for client in (self.producer, self.consumer):
                client.route_refresh_interval, client.refresh_on_failure = route_refresh_s, False
        self.node_names = node_names or {}

    async def create_topic(self, queues: int) -> None:
        """Create the topic on every broker (so a slave that becomes master has it too),
        then wait until the nameservers route all its queues."""
        await asyncio.gather(*(admin.create_topic(addr, self.topic, queues) for addr in self.endpoints.brokers))
        deadline = time.monotonic() + ROUTE_WAIT_S
        while True:
            try:
                if len(await self.consumer.queues(self.topic)) >= queues:
                    return
            except RouteUnavailable:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {self.topic} has no route with {queues} queues "
                                   f"after {ROUTE_WAIT_S:g}s")
            self.consumer.forget_route(self.topic)
            await asyncio.sleep(0.2)

    async def send(self, queue: int, body: bytes, msg_id: str) -> Completion:
        """ok value: the queue offset the message got."""
        result = await self.producer.send(self.topic, body, queue=queue, msg_id=msg_id)
        node = node_of(result.broker_addr, self.node_names)
        if result.outcome == Outcome.OK:
            return Completion("ok", result.queue_offset, node)
        return Completion(result.outcome.history_type, None, node, f"{result.status}: {result.error}")

    async def _queue(self, queue: int) -> MessageQueue | None:
        try:
            queues = await self.consumer.queues(self.topic)
        except RouteUnavailable:
            return None
        return next((mq for mq in queues if mq.queue_id == queue), None)

    async def pull(self, queue: int, offset: int, max_count: int) -> Completion:
        """ok value: ([(queue offset, body), ...], next offset, does the answer speak for the log?):
        only the master whose whole log is confirmed does; a lagging replica, or a master still
        waiting for its replicas' acks, may know less than the log holds."""
        mq = await self._queue(queue)
        if mq is None:
            return Completion("fail", None, None, f"no route to queue {queue} of {self.topic}")
        result = await self.consumer.pull(mq, offset, max_count)
        node = node_of(result.broker_addr, self.node_names)
        if result.outcome != Outcome.OK:
            return Completion(result.outcome.history_type, None, node, f"{result.status}: {result.error}")
        batch = [(m.queue_offset, m.body) for m in result.messages]
        next_offset = result.next_offset if result.next_offset is not None else offset + len(batch)
        authoritative = result.from_master is not False and result.log_confirmed is not False
        return Completion("ok", (batch, next_offset, authoritative), node)

    async def commit(self, queue: int, offset: int) -> None:
        """Best effort: a lost commit only means redelivery after a consumer restart."""
        mq = await self._queue(queue)
        if mq is not None:
            await self.consumer.commit_offset(mq, offset)

    async def close(self) -> None:
        await self.producer.close()
        await self.consumer.close()


@runtime_checkable
class QueueClient(Protocol):
    """send / pull / commit by queue id on one topic: what the queue and log workloads
    call (workloads/queue.py, workloads/log.py), on any system (sut/systems.py names
    each system's factory).

    Made by `factory(endpoints, topic, group, op_timeout, node_names, route_refresh_s)`."""

    async def create_topic(self, queues: int) -> None: ...

    async def send(self, queue: int, body: bytes, msg_id: str) -> Completion: ...

    async def pull(self, queue: int, offset: int, max_count: int) -> Completion: ...

    async def commit(self, queue: int, offset: int) -> None: ...

    async def close(self) -> None: ...


def broker_client(endpoints: Endpoints, topic: str, group: str, op_timeout: float,
                  node_names: dict[str, str] | None = None,
                  route_refresh_s: float | None = None) -> QueueClient:
    """The queue client of the endpoints' system: BrokerClient on the model, RocketMQClient
    (its JVM driver imported only then) on real RocketMQ."""
    factory = systems.queue_client(endpoints.system)
    return factory(endpoints, topic, group, op_timeout, node_names, route_refresh_s)


class OnTopic:
    """For workloads on the broker (queue, log): a BrokerClient per worker, and the
    topic with `--queues` queues created before the faults start."""

    options: Any

    def client(self, endpoints: Endpoints, node_names: dict[str, str] | None = None) -> Any:
        return broker_client(endpoints, self.options.topic, self.options.group, self.options.op_timeout,
                             node_names, self.options.route_refresh_s)

    async def setup(self, client: BrokerClient) -> None:
        await client.create_topic(self.options.queues)


class RegisterClient:
    """read / write / cas on the Raft KV store, classified into Completions."""

    def __init__(self, endpoints: Endpoints, op_timeout: float, node_names: dict[str, str] | None = None) -> None:
        self.kv = KvClient(endpoints.kv, timeout=max(0.5, op_timeout * 0.8))
        self.node_names = node_names or {}

    async def _do(self, call: Any, value_of_ok: Any = None, *, read: bool = False) -> Completion:
        try:
            got = await call
        except CasMismatch:
            return Completion("fail", None, self._node(), CAS_MISMATCH)
        except RaftError as exc:
            return Completion("fail" if exc.definite else "info", None, self._node(),
                              f"{type(exc).__name__}: {exc}")
        return Completion("ok", got if read else value_of_ok, self._node())

    def _node(self) -> str | None:
        return node_of(self.kv.last_node, self.node_names)

    async def read(self, key: str) -> Completion:
        return await self._do(self.kv.read(key), read=True)

    async def write(self, key: str, value: Any) -> Completion:
        return await self._do(self.kv.write(key, value), value)

    async def cas(self, key: str, expect: Any, new: Any) -> Completion:
        return await self._do(self.kv.cas(key, expect, new), [expect, new])

    async def close(self) -> None:
        await self.kv.close()
