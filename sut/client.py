"""The asyncio client library: Producer and Consumer for workloads and tests.

Every operation returns a result with an `outcome` (sut/outcome.py): ok,
fail (definitely had no effect) or indeterminate (may have), with the final
status and error text, so a workload can write the history event directly.

Routes come from the nameservers (tried in turn) and are cached; a cached
route is refreshed after route_refresh_interval seconds and at once after
any failed or indeterminate attempt, so clients find a new master quickly.
The producer sends to the master (brokerId 0) of the chosen queue's group
and retries retryable failures with the same message id, within one overall
send timeout; a retry after an indeterminate attempt can therefore store the
message twice, which the checkers report as a duplicate.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from sut.config import split_address
from sut.consumer_groups import allocate_averagely
from sut.message import CorruptRecord, decode_payload, iter_records
from sut.outcome import RETRYABLE_STATUSES, Outcome, classify_error, classify_status, combine, status_name
from sut.protocol import MAX_FRAME_BYTES, Command, RequestCode, ResponseCode, RpcClient, RpcError

RC = ResponseCode
PERM_READ, PERM_WRITE = 4, 2
_ID_PREFIX = f"{os.getpid():x}-{uuid.uuid4().hex[:8]}"
_ID_COUNTER = itertools.count()


def new_msg_id() -> str:
    """A unique message id (process, random, counter): cheap and collision-free."""
    return f"{_ID_PREFIX}-{next(_ID_COUNTER):x}"


@dataclass(frozen=True, order=True)
class MessageQueue:
    topic: str
    broker_name: str
    queue_id: int


@dataclass
class TopicRoute:
    topic: str
    queues: list[dict[str, Any]]
    brokers: dict[str, dict[int, str]]   # broker name -> broker id -> address
    fetched_at: float
    _queue_lists: dict[int, list[MessageQueue]] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "TopicRoute":
        brokers = {b["broker_name"]: {int(i): a for i, a in b["addrs"].items()} for b in data["brokers"]}
        return cls(data["topic"], data["queues"], brokers, time.monotonic())

    def message_queues(self, perm: int) -> list[MessageQueue]:
        cached = self._queue_lists.get(perm)
        if cached is None:
            cached = self._queue_lists[perm] = self._message_queues(perm)
        return cached

    def _message_queues(self, perm: int) -> list[MessageQueue]:
        out = []
        for q in self.queues:
            if q.get("perm", 6) & perm:
                count = q["write_queues"] if perm == PERM_WRITE else q["read_queues"]
                out += [MessageQueue(self.topic, q["broker_name"], i) for i in range(count)]
        return out

    def master(self, broker_name: str) -> str | None:
        return self.brokers.get(broker_name, {}).get(0)

    def replicas(self, broker_name: str) -> list[str]:
        """Addresses of the group, master first, then slaves by id."""
        return [a for _, a in sorted(self.brokers.get(broker_name, {}).items())]


@dataclass
class SendResult:
    outcome: Outcome
    msg_ids: list[str]
    topic: str
    status: str                        # final ResponseCode name, or the error's class name
    error: str | None = None
    queue: MessageQueue | None = None
    queue_offset: int | None = None    # of the first message
    phys_offset: int | None = None
    broker_addr: str | None = None
    attempts: int = 0

    @property
    def msg_id(self) -> str:
        return self.msg_ids[0]


@dataclass
class ReceivedMessage:
    msg_id: str
    topic: str
    queue_id: int
    queue_offset: int
    body: bytes
    born_ts: int
    store_ts: int
    broker_name: str
    broker_addr: str


@dataclass
class PullResult:
    outcome: Outcome
    status: str                        # SUCCESS, PULL_NOT_FOUND, PULL_OFFSET_MOVED, ... or error class
    messages: list[ReceivedMessage] = field(default_factory=list)
    next_offset: int | None = None
    min_offset: int | None = None
    max_offset: int | None = None
    broker_addr: str | None = None
    error: str | None = None
    from_master: bool | None = None    # answered by the group's master (None: not said)
    log_confirmed: bool | None = None  # the answering broker's whole log is confirmed (None: not said)


@dataclass
class OffsetResult:
    outcome: Outcome
    status: str
    offset: int | None = None          # None when nothing is committed (status QUERY_NOT_FOUND)
    broker_addr: str | None = None
    error: str | None = None


class RouteUnavailable(Exception):
    """No route for a topic: every nameserver failed or none knows the topic."""

    def __init__(self, message: str, outcome: Outcome = Outcome.FAIL) -> None:
        super().__init__(message)
        self.outcome = outcome


class _ClientBase:
    """Connections by address and the route cache shared by Producer and Consumer.

    `refresh_on_failure` (ours, the default) re-reads a topic's route right after a
    failed call; off, the client behaves like RocketMQ's: routes are re-read only
    every `route_refresh_interval` (pollNameServerInterval), and a failed send is
    retried on the cached route, avoiding the broker group that failed.
    """

    refresh_on_failure = True

    def __init__(self, namesrv_addrs: list[str] | str, timeout: float = 3.0,
                 route_refresh_interval: float = 30.0) -> None:
        addrs = [namesrv_addrs] if isinstance(namesrv_addrs, str) else list(namesrv_addrs)
        if not addrs:
            raise ValueError("at least one nameserver address is needed")
        for addr in addrs:
            split_address(addr, "nameserver address")
        self.namesrv_addrs = addrs
        self.timeout = timeout
        self.route_refresh_interval = route_refresh_interval
        self._clients: dict[str, RpcClient] = {}
        self._routes: dict[str, TopicRoute] = {}
        self._namesrv_index = 0

    def client(self, addr: str) -> RpcClient:
        cli = self._clients.get(addr)
        if cli is None:
            cli = self._clients[addr] = RpcClient(*split_address(addr, "broker address"),
                                                  connect_timeout=min(self.timeout, 3.0))
        return cli

    async def route(self, topic: str, refresh: bool = False, timeout: float | None = None) -> TopicRoute:
        """The topic's route, from the cache unless stale or `refresh`."""
        cached = self._routes.get(topic)
        if cached and not refresh and time.monotonic() - cached.fetched_at < self.route_refresh_interval:
            return cached
        return await self._fetch_route(topic, cached, refresh, timeout)

    async def _fetch_route(self, topic: str, cached: TopicRoute | None, refresh: bool,
                           timeout: float | None) -> TopicRoute:
        timeout = self.timeout if timeout is None else timeout
        errors = []
        for _ in range(len(self.namesrv_addrs)):
            addr = self.namesrv_addrs[self._namesrv_index % len(self.namesrv_addrs)]
            try:
                reply = await self.client(addr).call(RequestCode.GET_ROUTE, {"topic": topic},
                                                     timeout=timeout)
            except RpcError as exc:
                self._namesrv_index += 1  # next time start with another nameserver
                errors.append(str(exc))
                continue
            if reply.code == RC.SUCCESS:
                route = TopicRoute.from_json(json.loads(reply.body))
                self._routes[topic] = route
                return route
            errors.append(f"{addr}: {status_name(reply.code)} {reply.fields.get('error', '')}".strip())
        if cached is not None and not any("TOPIC_NOT_EXIST" in e for e in errors):
            return cached  # nameservers unreachable: a stale route beats none
        raise RouteUnavailable(f"no route for topic {topic}: " + "; ".join(errors))

    def forget_route(self, topic: str) -> None:
        self._routes.pop(topic, None)

    def expire_route(self, topic: str) -> None:
        """Refresh the topic's route on its next use, keeping it as a fallback."""
        cached = self._routes.get(topic)
        if cached is not None:
            cached.fetched_at = float("-inf")

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for cli in clients:
            await cli.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class Producer(_ClientBase):
    """Sends messages to the master of a queue's broker group.

    send_timeout bounds the whole send including retries (RocketMQ's
    sendMsgTimeout); retries is retryTimesWhenSendFailed.
    """

    def __init__(self, namesrv_addrs: list[str] | str, send_timeout: float = 3.0, retries: int = 2,
                 route_refresh_interval: float = 30.0) -> None:
        super().__init__(namesrv_addrs, send_timeout, route_refresh_interval)
        self.send_timeout = send_timeout
        self.retries = retries
        self._rr = itertools.count()

    async def send(self, topic: str, body: bytes, queue: MessageQueue | int | None = None,
                   msg_id: str | None = None, born_ts: int | None = None) -> SendResult:
        """Send one message; the result says ok / fail / indeterminate."""
        return await self._send(topic, [body], queue, [msg_id or new_msg_id()], born_ts)

    async def send_batch(self, topic: str, bodies: list[bytes], queue: MessageQueue | int | None = None,
                         msg_ids: list[str] | None = None, born_ts: int | None = None) -> SendResult:
        """Send several messages to one queue atomically (one append, one status)."""
        if not bodies:
            raise ValueError("send_batch needs at least one message")
        ids = msg_ids or [new_msg_id() for _ in bodies]
        if len(ids) != len(bodies):
            raise ValueError("send_batch: one message id per body")
        return await self._send(topic, bodies, queue, ids, born_ts)

    async def _send(self, topic: str, bodies: list[bytes], queue: MessageQueue | int | None,
                    ids: list[str], born_ts: int | None) -> SendResult:
        born = int(time.time() * 1000) if born_ts is None else born_ts
        deadline = time.monotonic() + self.send_timeout
        outcomes: list[Outcome] = []
        result = SendResult(Outcome.FAIL, ids, topic, "NO_ATTEMPT", "send timeout before any attempt")
        avoid: str | None = None
        for attempt in range(1 + self.retries):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            result, retryable = await self._attempt(topic, bodies, queue, ids, born, left,
                                                    attempt > 0 and self.refresh_on_failure, avoid)
            result.attempts = attempt + 1
            outcomes.append(result.outcome)
            if result.outcome == Outcome.OK or not retryable:
                break
            avoid = result.queue.broker_name if result.queue else None
        result.outcome = combine(outcomes) if outcomes else Outcome.FAIL
        if result.outcome != Outcome.OK and self.refresh_on_failure:
            self.expire_route(topic)  # the next send asks the nameservers (master may have moved)
        return result

    async def _attempt(self, topic: str, bodies: list[bytes], queue: MessageQueue | int | None,
                       ids: list[str], born: int, timeout: float, refresh: bool,
                       avoid: str | None) -> tuple[SendResult, bool]:
        """One try: (result, whether another try may help)."""
        try:
            route = await self.route(topic, refresh=refresh, timeout=timeout)
        except RouteUnavailable as exc:
            return SendResult(exc.outcome, ids, topic, "ROUTE_UNAVAILABLE", str(exc)), True
        mq = self._choose(route, queue, avoid)
        if mq is None:
            wanted = "" if queue is None else f" {queue}"
            return SendResult(Outcome.FAIL, ids, topic, "NO_WRITABLE_QUEUE",
                              f"route of {topic} has no writable queue{wanted}"), True
        addr = route.master(mq.broker_name)
        if addr is None:
            return SendResult(Outcome.FAIL, ids, topic, "NO_MASTER",
                              f"broker group {mq.broker_name} has no master in the route", mq), True
        fields: dict[str, Any] = {"topic": topic, "queue_id": mq.queue_id, "born_ts": born}
        if sum(map(len, bodies)) > MAX_FRAME_BYTES - 64 * 1024:  # the broker would drop the connection
            return SendResult(Outcome.FAIL, ids, topic, "BAD_REQUEST",
                              f"{sum(map(len, bodies))} bytes do not fit in one frame", mq), False
        if len(bodies) == 1 and len(ids) == 1:
            code, body = RequestCode.SEND_MESSAGE, bodies[0]
            fields["msg_id"] = ids[0]
        else:
            code, body = RequestCode.SEND_BATCH, b"".join(bodies)
            fields.update(msg_ids=ids, sizes=[len(b) for b in bodies])
        try:
            reply = await self.client(addr).call(code, fields, body, timeout=timeout)
        except RpcError as exc:
            return SendResult(classify_error(exc), ids, topic, type(exc).__name__, str(exc), mq,
                              broker_addr=addr), True
        status = status_name(reply.code)
        error = None if reply.code == RC.SUCCESS else (reply.fields.get("error") or status)
        result = SendResult(classify_status(reply.code), ids, topic, status, error, mq,
                            reply.fields.get("queue_offset"), reply.fields.get("phys_offset"), addr)
        return result, reply.code in RETRYABLE_STATUSES

    def _choose(self, route: TopicRoute, queue: MessageQueue | int | None,
                avoid: str | None) -> MessageQueue | None:
        writable = route.message_queues(PERM_WRITE)
        if isinstance(queue, MessageQueue):
            return queue if queue in writable else None
        if isinstance(queue, int):
            return next((q for q in writable if q.queue_id == queue), None)
        if not writable:
            return None
        start = next(self._rr)
        for i in range(len(writable)):  # round robin, avoiding the group that just failed
            candidate = writable[(start + i) % len(writable)]
            if candidate.broker_name != avoid:
                return candidate
        return writable[start % len(writable)]


class Consumer(_ClientBase):
    """Pulls from queues by offset and commits consumer-group offsets.

    Low level: pull(mq, offset), commit_offset, fetch_offset, max_offset.
    High level: subscribe(topic) or assign(queues), then poll() in a loop and
    commit() now and then; positions start at the committed offset (or 0).

    read_from="master" reads from the group's master and falls back to its
    slaves when the master is missing or unreachable; "slave" prefers slaves.
    """

    def __init__(self, namesrv_addrs: list[str] | str, group: str, timeout: float = 3.0,
                 route_refresh_interval: float = 30.0,
                 read_from: Literal["master", "slave"] = "master") -> None:
        super().__init__(namesrv_addrs, timeout, route_refresh_interval)
        self.group = group
        self.read_from = read_from
        self.positions: dict[MessageQueue, int] = {}
        self._next_queue = 0

    async def queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of a topic (RouteUnavailable if there is no route)."""
        return (await self.route(topic)).message_queues(PERM_READ)

    offsets_on_master_only = False   # commits and offset queries fall back to slaves too

    async def _candidates(self, mq: MessageQueue, refresh: bool = False, master_only: bool = False) -> list[str]:
        route = await self.route(mq.topic, refresh=refresh)
        if master_only:
            master = route.master(mq.broker_name)
            return [master] if master else []
        addrs = route.replicas(mq.broker_name)
        return list(reversed(addrs)) if self.read_from == "slave" else addrs

    async def _call(self, mq: MessageQueue, code: RequestCode, fields: dict[str, Any],
                    timeout: float | None = None,
                    master_only: bool = False) -> tuple[Command | None, str | None, str, Outcome]:
        """Try the group's brokers in preference order; (reply, addr, error, outcome of failure)."""
        timeout = self.timeout if timeout is None else timeout
        try:
            addrs = await self._candidates(mq, master_only=master_only)
        except RouteUnavailable as exc:
            return None, None, str(exc), exc.outcome
        if not addrs:
            if self.refresh_on_failure:
                self.expire_route(mq.topic)   # the route may predate the group's master coming back
            return None, None, f"no broker of group {mq.broker_name} in the route", Outcome.FAIL
        errors, outcomes = [], []
        for addr in addrs:
            try:
                return await self.client(addr).call(code, fields, timeout=timeout), addr, "", Outcome.OK
            except RpcError as exc:
                errors.append(str(exc))
                outcomes.append(classify_error(exc))
        if self.refresh_on_failure:
            self.forget_route(mq.topic)
        return None, None, "; ".join(errors), combine(outcomes)

    async def pull(self, mq: MessageQueue, offset: int, max_count: int = 32,
                   suspend_ms: int = 0) -> PullResult:
        fields = {"topic": mq.topic, "queue_id": mq.queue_id, "offset": offset,
                  "max_count": max_count, "suspend_ms": suspend_ms}
        reply, addr, error, failed = await self._call(mq, RequestCode.PULL_MESSAGE, fields,
                                                      self.timeout + suspend_ms / 1000)
        if reply is None:
            return PullResult(failed, "UNREACHABLE", error=error)
        status = status_name(reply.code)
        if reply.code not in (RC.SUCCESS, RC.PULL_NOT_FOUND, RC.PULL_OFFSET_MOVED):
            return PullResult(Outcome.FAIL, status, broker_addr=addr, error=reply.fields.get("error", status))
        try:
            messages = _decode_pulled(reply.body, mq, offset, addr or "")
        except CorruptRecord as exc:
            return PullResult(Outcome.FAIL, "CORRUPT_RESPONSE", broker_addr=addr, error=str(exc))
        return PullResult(Outcome.OK, status, messages, reply.fields.get("next_offset"),
                          reply.fields.get("min_offset"), reply.fields.get("max_offset"), addr,
                          from_master=reply.fields.get("master"),
                          log_confirmed=reply.fields.get("log_confirmed"))

    async def commit_offset(self, mq: MessageQueue, offset: int) -> OffsetResult:
        return await self._offset_call(mq, RequestCode.COMMIT_CONSUMER_OFFSET, offset=offset)

    async def fetch_offset(self, mq: MessageQueue) -> OffsetResult:
        return await self._offset_call(mq, RequestCode.QUERY_CONSUMER_OFFSET)

    async def max_offset(self, mq: MessageQueue) -> OffsetResult:
        return await self._offset_call(mq, RequestCode.QUERY_MAX_OFFSET)

    async def min_offset(self, mq: MessageQueue) -> OffsetResult:
        return await self._offset_call(mq, RequestCode.QUERY_MIN_OFFSET)

    async def _offset_call(self, mq: MessageQueue, code: RequestCode, **extra: Any) -> OffsetResult:
        fields = {"topic": mq.topic, "queue_id": mq.queue_id, "group": self.group, **extra}
        reply, addr, error, failed = await self._call(mq, code, fields, master_only=self.offsets_on_master_only)
        if reply is None:
            return OffsetResult(failed, "UNREACHABLE", error=error)
        status = status_name(reply.code)
        if reply.code == RC.SUCCESS:
            return OffsetResult(Outcome.OK, status, reply.fields.get("offset", extra.get("offset")), addr)
        if reply.code == RC.QUERY_NOT_FOUND:
            return OffsetResult(Outcome.OK, status, None, addr)
        return OffsetResult(classify_status(reply.code), status, None, addr,
                            reply.fields.get("error", status))

    # -- high level -------------------------------------------------------------
    async def subscribe(self, topic: str) -> list[MessageQueue]:
        """Assign every readable queue of the topic, starting at the committed offsets."""
        queues = await self.queues(topic)
        await self.assign(queues)
        return queues

    async def assign(self, queues: list[MessageQueue], positions: dict[MessageQueue, int] | None = None) -> None:
        """Consume these queues; positions default to the committed offset, else 0."""
        self.positions = {}
        for mq in queues:
            if positions and mq in positions:
                self.positions[mq] = positions[mq]
            else:
                got = await self.fetch_offset(mq)
                self.positions[mq] = got.offset if got.outcome == Outcome.OK and got.offset else 0

    async def poll(self, max_count: int = 32, suspend_ms: int = 0) -> PullResult:
        """Pull from the next assigned queue with messages (round robin) and advance its position."""
        if not self.positions:
            raise RuntimeError("poll() before subscribe() or assign()")
        queues = list(self.positions)
        last = PullResult(Outcome.OK, "PULL_NOT_FOUND")
        for i in range(len(queues)):
            mq = queues[(self._next_queue + i) % len(queues)]
            last = await self.pull(mq, self.positions[mq], max_count, 0)
            if last.outcome == Outcome.OK and last.next_offset is not None:
                self.positions[mq] = last.next_offset
            if last.messages:
                self._next_queue = (self._next_queue + i + 1) % len(queues)
                return last
        if suspend_ms:
            await asyncio.sleep(suspend_ms / 1000)
        return last

    async def commit(self) -> list[OffsetResult]:
        """Commit the current position of every assigned queue."""
        return [await self.commit_offset(mq, off) for mq, off in self.positions.items()]


class GroupMember(Consumer):
    """A member of a consumer group (clustering mode): heartbeats to every broker of the
    topic, reads the group's member list from a broker and takes its share of the
    queues by AllocateMessageQueueAveragely (sut/consumer_groups.py), as RocketMQ's
    RebalanceImpl does on each consumer, uncoordinated."""

    # RocketMQ's offset store asks findBrokerAddressInSubscribe for the master alone: a
    # commit to a slave would be overwritten by its next copy of the master's offsets.
    offsets_on_master_only = True

    def __init__(self, namesrv_addrs: list[str] | str, group: str, client_id: str | None = None,
                 timeout: float = 3.0) -> None:
        super().__init__(namesrv_addrs, group, timeout)
        self.client_id = client_id or new_msg_id()

    async def _each_broker(self, topic: str, code: RequestCode) -> list[Command]:
        route = await self.route(topic)
        addrs = [a for name in sorted(route.brokers) for a in route.replicas(name)]
        fields = {"group": self.group, "client_id": self.client_id}
        replies = await asyncio.gather(*(self.client(a).call(code, fields, timeout=self.timeout) for a in addrs),
                                       return_exceptions=True)
        return [r for r in replies if isinstance(r, Command) and r.code == RC.SUCCESS]

    async def heartbeat(self, topic: str) -> int:
        """Heartbeat to every broker of the topic (sendHeartbeatToAllBroker); how many answered."""
        return len(await self._each_broker(topic, RequestCode.CONSUMER_HEARTBEAT))

    async def unregister(self, topic: str) -> int:
        return len(await self._each_broker(topic, RequestCode.UNREGISTER_CONSUMER))

    async def members(self, topic: str) -> list[str] | None:
        """The group's client ids as the first broker that answers sees them (masters first,
        like findBrokerAddrByTopic), or None if none answers."""
        route = await self.route(topic)
        for name in sorted(route.brokers):
            for addr in route.replicas(name):
                try:
                    reply = await self.client(addr).call(RequestCode.GET_CONSUMER_LIST, {"group": self.group},
                                                         timeout=self.timeout)
                except RpcError:
                    continue
                if reply.code == RC.SUCCESS:
                    return list(reply.fields.get("clients", []))
        return None

    async def allocation(self, topic: str) -> tuple[list[str], list[MessageQueue]] | None:
        """(the group's members, the queues this member takes), or None without a member list."""
        members = await self.members(topic)
        if members is None:
            return None
        return members, allocate_averagely(self.client_id, members, await self.queues(topic))


def _decode_pulled(body: bytes, mq: MessageQueue, offset: int, addr: str) -> list[ReceivedMessage]:
    out = []
    for i, (_, payload) in enumerate(iter_records(body)):
        msg = decode_payload(payload)
        out.append(ReceivedMessage(msg.msg_id, msg.topic, msg.queue_id, offset + i, msg.body,
                                   msg.born_ts, msg.store_ts, mq.broker_name, addr))
    return out


def group_member(namesrv: list[str], group: str, topic: str, timeout: float,
                 route_refresh_s: float | None = None) -> GroupMember:
    """The model's consumer-group member, made the way sut/systems.py makes every system's."""
    return GroupMember(namesrv, group, timeout=timeout)
