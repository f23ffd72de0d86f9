"""Consumer groups on the broker, and the queue allocation every consumer computes.

RocketMQ's brokers keep, per consumer group, the clients that sent a heartbeat
(ConsumerManager). A client leaves the group when it unregisters
(UNREGISTER_CLIENT), when its connection closes (ClientHousekeepingService:
channel close) or when it has sent no heartbeat for channelExpiredTimeout
(120 s; `consumer_expiry_ms` here). Each consumer asks a broker for the group's
member list (GET_CONSUMER_LIST_BY_GROUP) and allocates the topic's queues to
itself on its own (RebalanceImpl), with AllocateMessageQueueAveragely by
default: the sorted queues cut into contiguous ranges over the sorted client
ids. Nothing coordinates the consumers: while their views of the list differ,
two may hold one queue, or none may.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence, TypeVar

T = TypeVar("T")

CONSUMER_EXPIRY_MS = 120_000   # RocketMQ channelExpiredTimeout


@dataclass
class _Member:
    last_heartbeat: float
    conn: Any = None   # the connection it heartbeats on: closed, it has left


class ConsumerGroups:
    """group -> client id -> last heartbeat; members drop out as RocketMQ's do."""

    def __init__(self, expiry_ms: int = CONSUMER_EXPIRY_MS) -> None:
        self.expiry_s = expiry_ms / 1000
        self._groups: dict[str, dict[str, _Member]] = {}

    def heartbeat(self, group: str, client_id: str, conn: Any = None) -> bool:
        """Record a heartbeat; True when the client is new to the group (the list changed)."""
        members = self._groups.setdefault(group, {})
        new = client_id not in members
        members[client_id] = _Member(time.monotonic(), conn)
        return new

    def unregister(self, group: str, client_id: str) -> bool:
        return self._groups.get(group, {}).pop(client_id, None) is not None

    def members(self, group: str) -> list[str]:
        """The live client ids of the group, sorted (expired and disconnected ones dropped)."""
        now = time.monotonic()
        members = self._groups.get(group, {})
        for client_id, member in list(members.items()):
            closed = member.conn is not None and getattr(member.conn, "closed", None) is not None \
                and member.conn.closed.is_set()
            if closed or now - member.last_heartbeat > self.expiry_s:
                del members[client_id]
        return sorted(members)


def allocate_averagely(client_id: str, clients: Sequence[str], queues: Sequence[T]) -> list[T]:
    """AllocateMessageQueueAveragely: the queues `client_id` takes, given every client's
    id and every queue (both sorted here, as RocketMQ sorts them before allocating).
    A client not in the list takes nothing."""
    clients, queues = sorted(clients), sorted(queues)
    if client_id not in clients or not queues:
        return []
    index, n, q = clients.index(client_id), len(clients), len(queues)
    mod = q % n
    if q <= n:
        size = 1
    elif mod > 0 and index < mod:
        size = q // n + 1
    else:
        size = q // n
    start = index * size if mod > 0 and index < mod else index * size + mod
    return list(queues[start:start + min(size, q - start)]) if start < q else []
