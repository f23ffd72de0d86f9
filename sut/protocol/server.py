"""The server side: one asyncio Protocol per connection, requests dispatched to a handler.

Frames are cut from the bytes as they arrive (FrameDecoder), cheap requests
are answered inline, and the frames written during one event-loop turn leave
in one send() (WriteBatch), which halves the CPU per request when many are in
flight on one connection. Servers log a malformed frame and close only that
connection.
"""
from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from sut.protocol.codes import ResponseCode
from sut.protocol.frames import (FLAG_ONEWAY, MAX_FRAME_BYTES, BadRequest, Command, FrameDecoder, ProtocolError,
                                 WriteBatch, encode)


@dataclass(frozen=True)
class ServerLimits:
    """What one peer may make a server hold (a peer that pipelines and never reads, opens
    connections without end, or trickles a frame). Reading from a connection pauses while
    its handlers or unsent responses are at their bound; a peer is cut off (logged) only
    when it stops reading for stall_timeout_s, exceeds max_unsent_bytes, stays idle, or its
    partial frame would take the server over max_buffered_bytes."""

    max_connections: int = 1024                   # open at once; more are refused
    max_inflight: int = 256                       # handler tasks per connection: reading pauses
    max_unsent_bytes: int = 32 * 1024 * 1024      # responses a peer has not read: cut off above
    stall_timeout_s: float = 120.0                # a peer not reading its responses this long
    idle_timeout_s: float = 300.0                 # no complete frame and nothing in flight
    max_buffered_bytes: int = 256 * 1024 * 1024   # incomplete frames of all connections together




# A handler answers a request with a Command (or None: no answer). It may be a
# coroutine function, or a plain function for cheap requests: a plain result is
# written at once, without a task per request.
Handler = Callable[[Command, "Connection"], "Awaitable[Command | None] | Command | None"]


class Connection:
    """One accepted connection on a server; handlers may push frames back on it."""

    _ids = itertools.count(1)

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.id = next(self._ids)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.closed = asyncio.Event()
        self.batch = WriteBatch(transport)
        self._paused = False
        self._drain_waiters: list[asyncio.Future] = []
        self.last_frame = asyncio.get_running_loop().time()  # last complete frame received
        self.stalled_since: float | None = None  # when the peer stopped reading our responses

    async def send(self, cmd: Command) -> None:
        """Write a frame; waits while the peer is not reading (flow control)."""
        if self.transport.is_closing():
            return
        self.batch.write(encode(cmd))
        if self._paused:
            waiter = asyncio.get_running_loop().create_future()
            self._drain_waiters.append(waiter)
            await waiter

    def close(self) -> None:
        """Close after writing what is buffered."""
        self.batch.flush()
        self.transport.close()
        self.closed.set()

    def abort(self) -> None:
        """Close now, dropping what is buffered (a peer that stopped reading)."""
        self.transport.abort()
        self.closed.set()

    def _set_paused(self, paused: bool, error: Exception | None = None) -> None:
        self._paused = paused
        if not paused:
            waiters, self._drain_waiters = self._drain_waiters, []
            for waiter in waiters:
                if not waiter.done():
                    if error is None:
                        waiter.set_result(None)
                    else:
                        waiter.set_exception(error)


class _ServerProtocol(asyncio.Protocol):
    """Per-connection frame handling for RpcServer (a Protocol: no reader task per connection)."""

    def __init__(self, server: "RpcServer") -> None:
        self.server = server
        self.decoder = FrameDecoder(server.max_frame)
        self.conn: Connection | None = None
        self.tasks: set[asyncio.Task] = set()
        self._held: set[str] = set()  # why reading is paused: "inflight", "unread"
        self._buffered = 0           # this connection's share of the server's partial-frame bytes

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        limits = self.server.limits
        if len(self.server._connections) >= limits.max_connections:
            peer = transport.get_extra_info("peername")
            self.server.log.warning("refused a connection from %s: %d connections open (max_connections)",
                                    f"{peer[0]}:{peer[1]}" if peer else "?", len(self.server._connections))
            transport.abort()
            return
        self.conn = Connection(transport)  # type: ignore[arg-type]
        self.server._connections[self.conn] = self

    def data_received(self, data: bytes) -> None:
        conn = self.conn
        if conn is None or conn.closed.is_set():
            return
        commands, error = self.decoder.feed(data)
        if commands:
            conn.last_frame = asyncio.get_running_loop().time()
        for cmd in commands:
            if cmd.is_response:
                error = ProtocolError(f"response frame (opaque {cmd.opaque}) sent to a server")
                break
            answer = self.server._call_handler(cmd, conn)
            if inspect.isawaitable(answer):
                task = asyncio.create_task(self.server._finish(cmd, conn, answer))
                self.tasks.add(task)
                task.add_done_callback(self._task_done)
            else:
                self.server._respond(cmd, conn, answer)
        if error is not None:
            self.server.log.error("malformed frame from %s: %s; closing that connection", conn.peer, error)
            conn.close()
            return
        self._account_buffered()
        if len(self.tasks) >= self.server.limits.max_inflight:
            self._hold("inflight")
        self.check_unsent()

    def _task_done(self, task: asyncio.Task) -> None:
        self.tasks.discard(task)
        if len(self.tasks) <= self.server.limits.max_inflight // 2:
            self._release("inflight")

    def _account_buffered(self) -> None:
        """Partial frames of all connections stay under max_buffered_bytes."""
        pending = self.decoder.pending
        self.server._buffered += pending - self._buffered
        self._buffered = pending
        if self.server._buffered > self.server.limits.max_buffered_bytes:
            self.cut_off(f"its incomplete frame ({pending} bytes) takes the server's partial frames "
                         f"over max_buffered_bytes ({self.server.limits.max_buffered_bytes})")

    def check_unsent(self) -> None:
        conn = self.conn
        if conn is not None and not conn.closed.is_set():
            unsent = conn.transport.get_write_buffer_size()
            if unsent > self.server.limits.max_unsent_bytes:
                self.cut_off(f"{unsent} bytes of responses unread (max_unsent_bytes)")

    def _hold(self, reason: str) -> None:
        if not self._held and self.conn is not None and not self.conn.transport.is_closing():
            self.conn.transport.pause_reading()
        self._held.add(reason)

    def _release(self, reason: str) -> None:
        if reason in self._held:
            self._held.discard(reason)
            if not self._held and self.conn is not None and not self.conn.transport.is_closing():
                self.conn.transport.resume_reading()

    def cut_off(self, why: str) -> None:
        """Drop a peer that holds the server's memory (one log line says why)."""
        conn = self.conn
        if conn is None or conn.closed.is_set():
            return
        self.server.log.warning("cut off peer %s: %s", conn.peer, why)
        conn.abort()

    def eof_received(self) -> bool:
        self._report_truncated()
        return False

    def _report_truncated(self) -> None:
        if self.conn is not None and self.decoder.pending and not self.conn.closed.is_set():
            self.server.log.error("truncated frame from %s: connection closed with %d bytes of an "
                                  "incomplete frame", self.conn.peer, self.decoder.pending)
            self.decoder = FrameDecoder(self.server.max_frame)  # report once

    def pause_writing(self) -> None:
        if self.conn is not None:
            self.conn._set_paused(True)
            self.conn.stalled_since = asyncio.get_running_loop().time()
            self._hold("unread")  # no new requests while the peer does not read the answers
            self.check_unsent()

    def resume_writing(self) -> None:
        if self.conn is not None:
            self.conn.stalled_since = None
            self.conn._set_paused(False)
            self._release("unread")

    def connection_lost(self, exc: Exception | None) -> None:
        conn = self.conn
        if conn is None:
            return
        self._report_truncated()  # also when the peer reset the connection (no EOF)
        self.server._buffered -= self._buffered
        self._buffered = 0
        for task in self.tasks:
            task.cancel()
        conn.closed.set()
        conn._set_paused(False, ConnectionResetError(f"connection to {conn.peer} lost"))
        self.server._connections.pop(conn, None)
        if self.server.on_close is not None:
            self.server.on_close(conn)


class RpcServer:
    """An asyncio TCP server that dispatches each request to a handler.

    Requests on one connection are handled concurrently (a slow append waiting
    for replication does not block a heartbeat behind it). A malformed,
    oversized or truncated frame closes that connection only, with a logged
    error; BadRequest from a handler becomes a BAD_REQUEST response and any
    other handler exception a SYSTEM_ERROR response (logged).
    """

    def __init__(self, host: str, port: int, handler: Handler, log: logging.Logger,
                 max_frame: int = MAX_FRAME_BYTES,
                 on_close: Callable[[Connection], None] | None = None,
                 limits: ServerLimits | None = None) -> None:
        self.host, self.port, self.handler, self.log = host, port, handler, log
        self.max_frame = max_frame
        self.on_close = on_close
        self.limits = limits or ServerLimits()
        self._server: asyncio.base_events.Server | None = None
        self._connections: dict[Connection, _ServerProtocol] = {}
        self._buffered = 0  # bytes of incomplete frames, all connections
        self._watcher: asyncio.Task | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _ServerProtocol(self), self.host, self.port)
        self._watcher = asyncio.create_task(self._watch(), name=f"rpc-limits-{self.port}")

    async def close(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
        if self._server is not None:
            self._server.close()
        for conn in list(self._connections):
            conn.close()
        if self._server is not None:
            await self._server.wait_closed()

    async def _watch(self) -> None:
        """Cut off peers that stopped reading and close idle connections."""
        limits = self.limits
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(min(1.0, limits.stall_timeout_s / 4, limits.idle_timeout_s / 4))
            now = loop.time()
            for conn, proto in list(self._connections.items()):
                proto.check_unsent()
                if conn.closed.is_set():
                    continue
                if conn.stalled_since is not None and now - conn.stalled_since > limits.stall_timeout_s:
                    proto.cut_off(f"not reading its responses for {now - conn.stalled_since:.1f} s "
                                  f"(stall_timeout_s), {conn.transport.get_write_buffer_size()} bytes unsent")
                elif not proto.tasks and now - conn.last_frame > limits.idle_timeout_s:
                    self.log.info("closing idle connection from %s: no request for %.0f s (idle_timeout_s)",
                                  conn.peer, now - conn.last_frame)
                    conn.close()

    def _call_handler(self, cmd: Command, conn: Connection) -> Any:
        try:
            return self.handler(cmd, conn)
        except Exception as exc:
            return self._error_reply(cmd, exc)

    async def _finish(self, cmd: Command, conn: Connection, answer: Awaitable[Command | None]) -> None:
        try:
            response = await answer
        except Exception as exc:
            response = self._error_reply(cmd, exc)
        self._respond(cmd, conn, response)

    def _error_reply(self, cmd: Command, exc: Exception) -> Command:
        if isinstance(exc, BadRequest):
            return cmd.reply(ResponseCode.BAD_REQUEST, {"error": str(exc)})
        # a handler bug must not kill the server
        self.log.error("handler failed for request code %s", cmd.code, exc_info=exc)
        return cmd.reply(ResponseCode.SYSTEM_ERROR, {"error": "internal error"})

    @staticmethod
    def _respond(cmd: Command, conn: Connection, response: Command | None) -> None:
        if response is not None and not cmd.flags & FLAG_ONEWAY and not conn.transport.is_closing():
            conn.batch.write(encode(response))
