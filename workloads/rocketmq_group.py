"""The group workload's consumer on real RocketMQ: sut.client.GroupMember's interface over
RocketMQ's own pull consumer in the driver JVM (sut/rocketmq/java/chaos/rmq/GroupMember.java).

RocketMQ decides: its rebalance (averaging allocation over the member list a broker
reports) says which queues a member holds, its RemoteBrokerOffsetStore reads and commits
the group's offsets, its pull path picks the broker. The workload (workloads/group.py)
records each step as it does on the model, so checkers/group.py reads both alike.
Queues are named by the workloads' index (broker name, then queue id), as
workloads/rocketmq_client.py does.
"""
from __future__ import annotations

import asyncio
import base64
from typing import Any

from sut.client import MessageQueue, OffsetResult, PullResult, ReceivedMessage
from sut.outcome import Outcome
from sut.rocketmq.driver import Driver, DriverDied, DriverError, SharedDriver, classify_error, error_text, shared_driver
from workloads.rocketmq_client import DEFAULT_ROUTE_REFRESH_S, _finish_or_undo, close_in_driver

# A request that got no answer may have had its effect.
UNANSWERED = ("RemotingTimeoutException", "RemotingSendRequestException")


def _status(exc: BaseException) -> str:
    """The status a failed request reports: RocketMQ's exception class, or the driver's."""
    return exc.cls if isinstance(exc, DriverError) and exc.cls else type(exc).__name__


def _read_outcome(exc: BaseException) -> Outcome:
    """A read that failed: fail if the system answered, indeterminate if nobody did."""
    if isinstance(exc, DriverError) and exc.cls not in UNANSWERED:
        return Outcome.FAIL
    return Outcome.INDETERMINATE


class RocketMQGroupMember:
    """One consumer of the group: opened by its first heartbeat, ended by close()."""

    def __init__(self, namesrv: list[str], group: str, topic: str, timeout: float,
                 route_refresh_s: float | None = None, shared: SharedDriver | None = None) -> None:
        self.namesrv, self.group, self.topic = ";".join(namesrv), group, topic
        self.timeout_ms = int(timeout * 1000)
        self.route_refresh_ms = int((route_refresh_s or DEFAULT_ROUTE_REFRESH_S) * 1000)
        self.shared = shared or shared_driver()
        self.client_id = ""
        self._driver: Driver | None = None
        self._member: int | None = None
        self._queue_count = 0

    async def _call(self, op: str, **args: Any) -> Any:
        if self._driver is None or self._member is None:
            raise DriverDied("the group member is not open")
        return await self._driver.acall(op, member=self._member, **args)

    async def heartbeat(self, topic: str) -> int:
        """Start the consumer (its start heartbeats every broker); 1 once it runs, 0 if it cannot start."""
        if self._member is not None:
            return 1
        driver = await _finish_or_undo(asyncio.to_thread(self.shared.acquire), lambda _: self.shared.release())
        try:
            opened = await _finish_or_undo(
                driver.acall("group_open", namesrv=self.namesrv, group=self.group, topic=self.topic,
                             timeout_ms=self.timeout_ms, route_refresh_ms=self.route_refresh_ms),
                lambda done: driver.submit("group_close", member=done["member"]))
        except (DriverError, DriverDied):
            self.shared.release()
            return 0
        except BaseException:
            self.shared.release()
            raise
        self._driver, self._member, self.client_id = driver, opened["member"], opened["client_id"]
        return 1

    async def allocation(self, topic: str) -> tuple[list[str], list[MessageQueue]] | None:
        """Rebalance now and return what RocketMQ's rebalance decided: (members it saw, queues it gave us)."""
        try:
            done = await self._call("group_rebalance")
        except (DriverError, DriverDied):
            return None
        self._queue_count = int(done["queues"])
        return list(done["members"]), [self._queue(q) for q in done["held"]]

    def _queue(self, index: int) -> MessageQueue:
        return MessageQueue(self.topic, "", int(index))

    async def queues(self, topic: str) -> list[MessageQueue]:
        """The topic's queues by the workloads' index, as of the last rebalance; the driver
        maps each to its broker's queue."""
        return [self._queue(q) for q in range(self._queue_count)]

    async def fetch_offset(self, mq: MessageQueue) -> OffsetResult:
        try:
            offset = await self._call("group_committed", queue=mq.queue_id)
        except (DriverError, DriverDied) as exc:
            return OffsetResult(_read_outcome(exc), _status(exc), error=error_text(exc))
        return OffsetResult(Outcome.OK, "SUCCESS", None if offset < 0 else int(offset))

    async def pull(self, mq: MessageQueue, offset: int, max_count: int = 32) -> PullResult:
        try:
            got = await self._call("group_pull", queue=mq.queue_id, offset=offset, max=max_count,
                                   timeout_ms=self.timeout_ms)
        except (DriverError, DriverDied) as exc:
            addr = exc.error.get("broker") if isinstance(exc, DriverError) else None
            return PullResult(_read_outcome(exc), _status(exc), broker_addr=addr, error=error_text(exc))
        messages = [ReceivedMessage(m["msg_id"], self.topic, mq.queue_id, int(m["offset"]),
                                    base64.b64decode(m["body"]), 0, 0, "", got["broker_addr"] or "")
                    for m in got["messages"]]
        # RocketMQ's pull may be answered by a replica; which one answered it does not say.
        return PullResult(Outcome.OK, got["status"], messages, got["next_offset"], got["min_offset"],
                          got["max_offset"], got["broker_addr"], from_master=None)

    async def commit_offset(self, mq: MessageQueue, offset: int) -> OffsetResult:
        try:
            await self._call("group_commit", queue=mq.queue_id, offset=offset)
        except (DriverError, DriverDied) as exc:
            outcome = Outcome.FAIL if classify_error(exc) == "fail" else Outcome.INDETERMINATE
            return OffsetResult(outcome, _status(exc), error=error_text(exc))
        return OffsetResult(Outcome.OK, "SUCCESS", offset)

    async def unregister(self, topic: str) -> int:
        """Nothing apart: RocketMQ's consumer unregisters from every broker when it shuts down (close)."""
        return 0

    async def close(self) -> None:
        driver, member = self._driver, self._member
        self._driver, self._member = None, None
        await close_in_driver(self.shared, driver, "group_close", 10, member=member)
