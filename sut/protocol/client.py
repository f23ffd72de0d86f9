"""The client side: a persistent connection that multiplexes calls by opaque id."""
from __future__ import annotations

import asyncio
import itertools
from typing import Any, Callable

from sut.protocol.frames import FLAG_ONEWAY, MAX_FRAME_BYTES, Command, FrameDecoder, WriteBatch, encode


class RpcError(Exception):
    """A call failed before a response arrived (connection lost, timeout)."""


class RpcTimeout(RpcError):
    """No response in time: the request may or may not have taken effect."""


class RpcConnectionError(RpcError):
    """The connection could not be opened or broke while the call was pending."""

    def __init__(self, message: str, sent: bool = True) -> None:
        super().__init__(message)
        # False only when we know the request never left this process.
        self.sent = sent


class _ClientProtocol(asyncio.Protocol):
    """One client connection: responses resolve pending calls straight from data_received."""

    def __init__(self, client: "RpcClient") -> None:
        self.client = client
        self.decoder = FrameDecoder(client.max_frame)
        self.transport: asyncio.Transport | None = None
        self.pending: dict[int, asyncio.Future] = {}
        self.lost = False
        self._paused = False
        self._drain_waiters: list[asyncio.Future] = []

    @property
    def usable(self) -> bool:
        return not self.lost and self.transport is not None and not self.transport.is_closing()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.batch = WriteBatch(transport)

    def data_received(self, data: bytes) -> None:
        commands, error = self.decoder.feed(data)
        for cmd in commands:
            if cmd.is_response:
                future = self.pending.pop(cmd.opaque, None)
                if future is not None and not future.done():
                    future.set_result(cmd)
            elif self.client.on_push is not None:
                self.client.on_push(cmd)
        if error is not None and self.transport is not None:
            self._fail(f"{self.client.address}: {error}")
            self.transport.close()

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def drain(self) -> None:
        if self._paused and not self.lost:
            waiter = asyncio.get_running_loop().create_future()
            self._drain_waiters.append(waiter)
            await waiter

    def connection_lost(self, exc: Exception | None) -> None:
        reason = str(exc) if exc else "connection closed"
        if self.decoder.pending and exc is None:
            reason = "connection closed inside a frame"
        self._fail(f"{self.client.address}: {reason}")

    def _fail(self, reason: str) -> None:
        first, self.lost = not self.lost, True
        if first and self.client.on_lost is not None:
            self.client.on_lost(reason)
        pending, self.pending = self.pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(RpcConnectionError(reason))
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(RpcConnectionError(reason))


class RpcClient:
    """A persistent client connection with request multiplexing by opaque id.

    Reconnects lazily on the next call after a failure. Raises RpcTimeout when
    no response arrives in time and RpcConnectionError when the connection
    cannot be opened (sent=False) or breaks with the request in flight.
    Pending calls belong to the connection they were sent on, so a late
    close of an old connection never fails calls made on its successor.
    Frames that are not responses go to `on_push` (server-initiated requests);
    `on_lost(reason)` hears when a connection ends, so a client that only
    listens for pushes learns at once that none will come.
    `close_on_timeout` (RocketMQ's clientCloseSocketIfTimeout) closes the
    connection when a call times out, so the next call opens a fresh one
    instead of queueing behind segments that TCP retransmits with backoff.
    """

    def __init__(self, host: str, port: int, connect_timeout: float = 3.0,
                 max_frame: int = MAX_FRAME_BYTES,
                 on_push: Callable[[Command], None] | None = None,
                 on_lost: Callable[[str], None] | None = None,
                 close_on_timeout: bool = False) -> None:
        self.host, self.port = host, port
        self.connect_timeout = connect_timeout
        self.close_on_timeout = close_on_timeout
        self.max_frame = max_frame
        self.on_push = on_push
        self.on_lost = on_lost
        self._conn: _ClientProtocol | None = None
        self._opaque = itertools.count(1)
        self._lock = asyncio.Lock()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def connected(self) -> bool:
        return self._conn is not None and self._conn.usable

    async def _ensure_connected(self) -> _ClientProtocol:
        conn = self._conn
        if conn is not None and conn.usable:
            return conn
        async with self._lock:
            if self._conn is not None and self._conn.usable:
                return self._conn
            loop = asyncio.get_running_loop()
            # asyncio.timeout, not wait_for: in 3.11 wait_for can swallow a
            # cancellation that arrives just as the connect fails.
            try:
                async with asyncio.timeout(self.connect_timeout):
                    _, conn = await loop.create_connection(
                        lambda: _ClientProtocol(self), self.host, self.port)
            except (OSError, asyncio.TimeoutError) as exc:
                raise RpcConnectionError(f"cannot connect to {self.address}: {exc or 'timeout'}",
                                         sent=False) from None
            self._conn = conn
            return conn

    async def call(self, code: int, fields: dict[str, Any] | None = None, body: bytes = b"",
                   timeout: float = 3.0) -> Command:
        """Send a request and wait for its response."""
        conn = await self._ensure_connected()
        opaque = next(self._opaque)
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        conn.pending[opaque] = future
        # A timer handle is much cheaper than asyncio.wait_for on the hot path.
        timer = loop.call_later(timeout, _expire, future)
        try:
            conn.batch.write(encode(Command(int(code), fields or {}, body, opaque, 0)))
            if conn._paused:
                await conn.drain()
            return await future
        except _Expired:
            if self.close_on_timeout:
                self._drop(conn, f"{self.address}: closed after a call timed out")
            raise RpcTimeout(f"no response from {self.address} within {timeout:.1f}s") from None
        except (ConnectionError, OSError) as exc:
            raise RpcConnectionError(f"{self.address}: {exc}") from None
        finally:
            timer.cancel()
            conn.pending.pop(opaque, None)

    async def oneway(self, code: int, fields: dict[str, Any] | None = None, body: bytes = b"") -> None:
        """Send a request without waiting for (or getting) a response."""
        conn = await self._ensure_connected()
        conn.batch.write(encode(Command(int(code), fields or {}, body, next(self._opaque), FLAG_ONEWAY)))
        await conn.drain()

    async def close(self) -> None:
        conn = self._conn
        if conn is not None:
            self._drop(conn, f"{self.address}: client closed")

    def _drop(self, conn: _ClientProtocol, reason: str) -> None:
        """Close `conn`, failing its pending calls; the next call reconnects."""
        if self._conn is conn:
            self._conn = None
        if conn.transport is not None:
            conn.batch.flush()
            conn.transport.close()
        conn._fail(reason)


class _Expired(Exception):
    """Internal: the timer of a call fired before its response arrived."""


def _expire(future: asyncio.Future) -> None:
    if not future.done():
        future.set_exception(_Expired())
