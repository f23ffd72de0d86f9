"""Which brokers are alive, as seen by one controller (not replicated).

Brokers heartbeat to every controller, so a newly elected controller leader
already knows who is alive. A broker is dead when its heartbeat is older than
its timeout (scanned periodically) or at once when the connection it
heartbeats on closes (a killed process closes its sockets).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from sut.controller.election import CandidateInfo


@dataclass
class BrokerLiveInfo:
    cluster: str
    broker_name: str
    broker_id: int
    address: str
    last_seen: float
    timeout_s: float
    epoch: int = 0
    max_offset: int = 0
    confirm_offset: int = 0
    priority: int = 0
    connection_id: int | None = None

    @property
    def key(self) -> tuple[str, int]:
        return (self.broker_name, self.broker_id)

    def expired(self, now: float) -> bool:
        return now - self.last_seen > self.timeout_s


class BrokerLiveness:
    """The heartbeat table: (broker name, broker id) -> last heartbeat."""

    def __init__(self, default_timeout_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.default_timeout_s = default_timeout_s
        self.clock = clock
        self._table: dict[tuple[str, int], BrokerLiveInfo] = {}

    def heartbeat(self, cluster: str, broker_name: str, broker_id: int, address: str, *,
                  timeout_s: float | None = None, epoch: int = 0, max_offset: int = 0,
                  confirm_offset: int = 0, priority: int = 0,
                  connection_id: int | None = None) -> None:
        self._table[(broker_name, broker_id)] = BrokerLiveInfo(
            cluster, broker_name, broker_id, address, self.clock(),
            timeout_s if timeout_s and timeout_s > 0 else self.default_timeout_s,
            epoch, max_offset, confirm_offset, priority, connection_id)

    def is_alive(self, broker_name: str, broker_id: int) -> bool:
        entry = self._table.get((broker_name, broker_id))
        return entry is not None and not entry.expired(self.clock())

    def info(self, broker_name: str, broker_id: int) -> CandidateInfo:
        entry = self._table.get((broker_name, broker_id))
        if entry is None:
            return CandidateInfo()
        return CandidateInfo(entry.epoch, entry.max_offset, entry.priority)

    def get(self, broker_name: str, broker_id: int) -> BrokerLiveInfo | None:
        return self._table.get((broker_name, broker_id))

    def expire(self) -> list[BrokerLiveInfo]:
        """Remove and return brokers whose heartbeat timed out."""
        now = self.clock()
        dead = [e for e in self._table.values() if e.expired(now)]
        for entry in dead:
            del self._table[entry.key]
        return dead

    def connection_closed(self, connection_id: int) -> list[BrokerLiveInfo]:
        """Remove and return brokers that heartbeated on this (now closed) connection."""
        dead = [e for e in self._table.values() if e.connection_id == connection_id]
        for entry in dead:
            del self._table[entry.key]
        return dead

    def remove(self, broker_name: str, broker_id: int) -> None:
        self._table.pop((broker_name, broker_id), None)

    def alive(self) -> list[BrokerLiveInfo]:
        now = self.clock()
        return [e for e in self._table.values() if not e.expired(now)]
