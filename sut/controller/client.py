"""Talking to the controller group from a broker or an admin tool.

Requests go to the active controller: the client remembers who answered last,
follows CONTROLLER_NOT_LEADER hints, and tries the others on connection
errors. Heartbeats go to every controller, each over its own connection, which
is also where the active controller pushes role-change notifications.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

from sut.config import split_address
from sut.protocol import BadRequest, Command, RequestCode, ResponseCode, RpcClient, RpcError


def encode_ids(ids: Any) -> str:
    """A set of broker ids as a header scalar: '1,2,3'."""
    return ",".join(str(i) for i in sorted(ids))


def decode_ids(text: Any) -> set[int]:
    if text in (None, ""):
        return set()
    try:
        if isinstance(text, list):
            return {int(i) for i in text}
        return {int(part) for part in str(text).split(",") if part.strip()}
    except (TypeError, ValueError):
        raise BadRequest(f"not a list of broker ids: {text!r}") from None


class ControllerUnavailable(Exception):
    """No active controller answered in time (none elected, or none reachable)."""


class ControllerClient:
    def __init__(self, addresses: list[str], timeout: float = 3.0,
                 on_push: Callable[[Command], None] | None = None) -> None:
        if not addresses:
            raise ValueError("no controller addresses configured")
        self.addresses = list(addresses)
        self.timeout = timeout
        self._clients: dict[str, RpcClient] = {}
        self._on_push = on_push
        self._leader: str | None = None

    def _client(self, address: str) -> RpcClient:
        client = self._clients.get(address)
        if client is None:
            host, port = split_address(address, "controller address")
            client = RpcClient(host, port, connect_timeout=min(1.0, self.timeout),
                               on_push=self._on_push)
            self._clients[address] = client
        return client

    async def call(self, code: int, fields: dict[str, Any] | None = None,
                   timeout: float | None = None) -> Command:
        """Call the active controller; any answer but NOT_LEADER is returned as is.

        A try gets at most half the time, so one unreachable (partitioned)
        controller cannot eat the whole budget; a controller that failed moves
        to the back of the order for later calls.
        """
        budget = timeout or self.timeout
        deadline = time.monotonic() + budget
        per_try = max(0.5, budget / 2)
        order = ([self._leader] if self._leader else []) + \
            [a for a in self.addresses if a != self._leader]
        last_error = "no controller answered"
        pos = 0
        while (left := deadline - time.monotonic()) > 0:
            address = order[pos % len(order)]
            pos += 1
            try:
                reply = await self._client(address).call(code, fields, timeout=min(per_try, left))
            except RpcError as exc:
                last_error = str(exc)
                self._demote(address)
                if pos % len(order) == 0:
                    await asyncio.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
                continue
            if reply.code != ResponseCode.CONTROLLER_NOT_LEADER:
                self._leader = address
                return reply
            hint = reply.fields.get("leader_address") or ""
            last_error = f"{address} is not the active controller"
            if hint and hint in self.addresses and hint != address:
                order.insert(pos, hint)
            elif pos % len(order) == 0:
                await asyncio.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
        raise ControllerUnavailable(f"no active controller within {budget:.1f}s: {last_error}")

    def _demote(self, address: str) -> None:
        if self._leader == address:
            self._leader = None
        self.addresses.remove(address)
        self.addresses.append(address)

    async def heartbeat_all(self, fields: dict[str, Any]) -> int:
        """Send a oneway heartbeat to every controller; return how many were sent."""
        async def one(address: str) -> bool:
            try:
                await asyncio.wait_for(
                    self._client(address).oneway(RequestCode.CONTROLLER_BROKER_HEARTBEAT, fields),
                    self.timeout)
                return True
            except (RpcError, OSError, asyncio.TimeoutError):
                return False
        results = await asyncio.gather(*(one(a) for a in self.addresses))
        return sum(results)

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()
