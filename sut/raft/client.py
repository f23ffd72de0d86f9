"""Client side of a Raft group: find the leader, follow its hints, classify failures.

`LeaderClient.call` retries only what is safe to retry: a NOT_LEADER answer or
a connection that could not be opened (the request never left). A timeout, a
connection that broke with the request in flight, or an APPEND_TIMEOUT answer
is indeterminate and raised at once (`definite` False): the caller must record
it as `info`, since the operation may still take effect.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any

from sut.protocol import Command, RequestCode, ResponseCode, RpcClient, RpcConnectionError, RpcTimeout
from sut.raft.config import parse_address
from sut.raft.errors import NotLeader, RaftError, error_from_reply
from sut.raft.wire import unpack_entries


class Indeterminate(RaftError):
    """No answer (timeout, connection lost with the request in flight): may have happened."""

    definite = False


class Unavailable(RaftError):
    """No member accepted the request before the deadline; nothing was appended."""

    definite = True


class LeaderClient:
    """Calls the group's leader; one persistent connection per member."""

    def __init__(self, addresses: list[str], timeout: float = 5.0) -> None:
        if not addresses:
            raise ValueError("a raft client needs at least one member address")
        self.addresses = list(addresses)
        self.timeout = timeout
        self._clients: dict[str, RpcClient] = {}
        self._leader: str | None = None
        self.last_node: str | None = None  # address that served the last call

    def _client(self, address: str) -> RpcClient:
        if address not in self._clients:
            host, port = parse_address(address, "raft member address")
            self._clients[address] = RpcClient(host, port, connect_timeout=min(self.timeout, 2.0))
        return self._clients[address]

    async def call(self, code: int, fields: dict[str, Any] | None = None, body: bytes = b"",
                   timeout: float | None = None) -> Command:
        """Send to the leader; returns a SUCCESS reply or raises a RaftError subclass."""
        deadline = time.monotonic() + (timeout or self.timeout)
        order = ([self._leader] if self._leader else []) + [a for a in self.addresses if a != self._leader]
        attempt, last_error = 0, "no member tried"
        while time.monotonic() < deadline:
            address = order[attempt % len(order)]
            attempt += 1
            left = max(0.05, deadline - time.monotonic())
            try:
                reply = await self._client(address).call(code, fields, body, timeout=left)
            except RpcTimeout as exc:
                raise Indeterminate(str(exc)) from None
            except RpcConnectionError as exc:
                if exc.sent:
                    raise Indeterminate(str(exc)) from None
                last_error = str(exc)
                await self._pause(attempt, len(order))
                continue
            self.last_node = address
            if reply.code == ResponseCode.SUCCESS:
                self._leader = address
                return reply
            error = error_from_reply(reply)
            if not isinstance(error, NotLeader):
                raise error
            last_error = str(error)
            hint = error.leader_address
            if hint and hint in self.addresses and hint != address:
                order = [hint] + [a for a in order if a != hint]
                attempt = 0
            else:
                await self._pause(attempt, len(order))
        raise Unavailable(f"no leader accepted the request in time: {last_error}")

    def prefer(self, address: str) -> None:
        """Try `address` first next time (e.g. a leader learned from status)."""
        self._leader = address

    @staticmethod
    async def _pause(attempt: int, members: int) -> None:
        if attempt % members == 0:  # went round every member: give an election time
            await asyncio.sleep(0.05)

    async def status(self, address: str, timeout: float = 2.0) -> dict[str, Any]:
        """One member's RAFT_STATUS (raises RpcError if it does not answer)."""
        reply = await self._client(address).call(RequestCode.RAFT_STATUS, timeout=timeout)
        return dict(reply.fields)

    async def propose(self, data: bytes, timeout: float | None = None) -> tuple[int, int]:
        """Append one entry through the leader; (index, term) once committed and applied."""
        reply = await self.call(RequestCode.RAFT_PROPOSE, body=data, timeout=timeout)
        return int(reply.fields["index"]), int(reply.fields["term"])

    async def read_log(self, address: str, start: int = 1, max_count: int = 1000,
                       timeout: float = 5.0) -> tuple[int, list[tuple[int, bytes]]]:
        """(commit index, committed (term, data) entries from `start`) of one member."""
        reply = await self._client(address).call(RequestCode.RAFT_READ_LOG,
                                                 {"start": start, "max": max_count}, timeout=timeout)
        return int(reply.fields["commit_index"]), unpack_entries(reply.body)

    async def read_committed_log(self, address: str, timeout: float = 10.0) -> list[tuple[int, bytes]]:
        """Every committed entry of one member, in order."""
        out: list[tuple[int, bytes]] = []
        while True:
            commit, entries = await self.read_log(address, len(out) + 1, 5000, timeout)
            out.extend(entries)
            if not entries or len(out) >= commit:
                return out

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()
