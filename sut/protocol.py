"""The SUT's wire protocol: framed request/response commands over TCP.

In the spirit of RocketMQ's remoting command. A frame is

    total_length  u32 big-endian   (bytes after this field)
    header_length u32 big-endian
    header        JSON object: {"code": int, "opaque": int, "flags": int,
                                "fields": {str: JSON value}}
    body          the remaining bytes (may be empty)

`flags` bit 0 marks a response, bit 1 a one-way request (no response). A
frame larger than the receiver's maximum (MAX_FRAME_BYTES by default) is
refused before its payload is read.

The header is JSON (as RocketMQ's default serializer) so that frames are easy
to read in a packet capture; the body carries message payloads unchanged.
`opaque` pairs a response with its request, so one connection multiplexes
many requests in flight. Anything malformed raises ProtocolError; servers log
it and close only that connection.

Request and response codes live in one table (RequestCode / ResponseCode)
shared by every server and client in the SUT.

Connections are asyncio Protocols: frames are cut from the bytes as they
arrive (FrameDecoder), cheap requests are answered inline, and the frames
written during one event-loop turn leave in one send() (_WriteBatch), which
halves the CPU per request when many are in flight on one connection.
"""
from __future__ import annotations

import asyncio
import enum
import inspect
import itertools
import json
import logging
import struct
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

MAX_FRAME_BYTES = 16 * 1024 * 1024
_LEN = struct.Struct(">I")

FLAG_RESPONSE = 0x1
FLAG_ONEWAY = 0x2


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


class RequestCode(enum.IntEnum):
    """Every request the SUT understands. Add new codes here, nowhere else."""

    # every process: {role, name, ready, ...role-specific fields}
    PROCESS_STATUS = 1
    # broker data plane
    SEND_MESSAGE = 10
    SEND_BATCH = 11
    PULL_MESSAGE = 12
    QUERY_MAX_OFFSET = 13
    QUERY_MIN_OFFSET = 14
    COMMIT_CONSUMER_OFFSET = 15
    QUERY_CONSUMER_OFFSET = 16
    BROKER_STATUS = 17
    CREATE_TOPIC = 18
    GET_ALL_METADATA = 19   # topics + consumer offsets (RocketMQ GET_ALL_TOPIC_CONFIG/CONSUMER_OFFSET)
    # nameserver
    REGISTER_BROKER = 100
    UNREGISTER_BROKER = 101
    BROKER_HEARTBEAT = 102
    GET_ROUTE = 103
    GET_CLUSTER_INFO = 104
    GET_BROKER_MEMBER_GROUP = 105     # RIP-32: the live members of a broker group
    NOTIFY_MIN_BROKER_ID_CHANGE = 106  # RIP-32: nameserver -> brokers, the acting master changed
    # replication between brokers (classic HA and AutoSwitch)
    HA_HANDSHAKE = 200
    HA_TRANSFER = 201
    HA_ACK = 202
    # raft (DLedger mode and controllers)
    RAFT_VOTE = 300
    RAFT_APPEND = 301
    RAFT_HEARTBEAT = 302
    RAFT_STATUS = 303
    RAFT_PROPOSE = 304      # client append of one entry to the Raft log
    RAFT_READ_LOG = 305     # read committed entries (tests, log-matching checks)
    # linearizable key-value state machine on Raft
    KV_READ = 320
    KV_WRITE = 321
    KV_CAS = 322
    # controller (RIP-44)
    CONTROLLER_REGISTER_BROKER = 400
    CONTROLLER_GET_NEXT_BROKER_ID = 401
    CONTROLLER_APPLY_BROKER_ID = 402
    CONTROLLER_ALTER_SYNC_STATE_SET = 403
    CONTROLLER_ELECT_MASTER = 404
    CONTROLLER_GET_REPLICA_INFO = 405
    CONTROLLER_GET_SYNC_STATE_DATA = 406
    CONTROLLER_BROKER_HEARTBEAT = 407
    CONTROLLER_CLEAN_BROKER_DATA = 408
    CONTROLLER_GET_METADATA = 409
    CONTROLLER_NOTIFY_ROLE_CHANGE = 410
    CONTROLLER_UPDATE_BROKER_ADDRESS = 411


class ResponseCode(enum.IntEnum):
    """Every response status. Clients classify these into ok / fail / indeterminate."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    BAD_REQUEST = 4
    # send statuses (ROCKETMQ_HA.md "Send statuses")
    FLUSH_DISK_TIMEOUT = 10
    FLUSH_SLAVE_TIMEOUT = 11
    SLAVE_NOT_AVAILABLE = 12
    SERVICE_NOT_AVAILABLE = 13
    NOT_MASTER = 14
    TOPIC_NOT_EXIST = 17
    PULL_NOT_FOUND = 19
    PULL_OFFSET_MOVED = 20
    QUERY_NOT_FOUND = 22
    # raft
    NOT_LEADER = 30
    APPEND_TIMEOUT = 31
    PENDING_FULL = 32
    TERM_STALE = 33
    INCONSISTENT_LOG = 34
    CAS_MISMATCH = 35
    # controller
    CONTROLLER_NOT_LEADER = 40
    CONTROLLER_FENCED_MASTER_ID = 41
    CONTROLLER_FENCED_MASTER_EPOCH = 42
    CONTROLLER_FENCED_SSS_EPOCH = 43
    CONTROLLER_INVALID_REQUEST = 44
    CONTROLLER_MASTER_STILL_EXISTS = 45
    CONTROLLER_MASTER_NOT_AVAILABLE = 46
    CONTROLLER_BROKER_NOT_ALIVE = 47
    CONTROLLER_BROKER_ID_INVALID = 48
    CONTROLLER_BROKER_NEED_TO_BE_REGISTERED = 49
    CONTROLLER_ELECT_MASTER_FAILED = 50
    CONTROLLER_INVALID_CLEAN_BROKER_METADATA = 51
    CONTROLLER_ALTER_SYNC_STATE_SET_FAILED = 52
    CONTROLLER_BROKER_METADATA_NOT_EXIST = 53


class ProtocolError(Exception):
    """A frame that cannot be decoded: the connection it came on is closed."""


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


class BadRequest(ValueError):
    """A well-framed request with missing or wrong fields: answered with BAD_REQUEST."""


Scalar = str | int | float | bool | None

_MISSING: Any = object()


def get_field(cmd: "Command", name: str, kind: type, default: Any = _MISSING) -> Any:
    """A header field of the given type (bool is not an int); BadRequest if wrong or missing."""
    value = cmd.fields.get(name, _MISSING)
    if value is _MISSING or value is None:
        if default is _MISSING:
            raise BadRequest(f"missing field '{name}'")
        return default
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise BadRequest(f"field '{name}' must be {kind.__name__}, got {type(value).__name__}")
    return value


@dataclass
class Command:
    """One request or response."""

    code: int
    fields: dict[str, Any] = field(default_factory=dict)
    body: bytes = b""
    opaque: int = 0
    flags: int = 0

    @property
    def is_response(self) -> bool:
        return bool(self.flags & FLAG_RESPONSE)

    def reply(self, code: int = ResponseCode.SUCCESS, fields: dict[str, Any] | None = None,
              body: bytes = b"") -> "Command":
        """The response to this request (same opaque, response flag set)."""
        return Command(int(code), fields or {}, body, self.opaque, FLAG_RESPONSE)


# Built once: json.dumps with non-default arguments builds a new encoder per call.
_JSON_ENCODER = json.JSONEncoder(separators=(",", ":"))
_JSON_DECODER = json.JSONDecoder()


def encode(cmd: Command) -> bytes:
    """Serialize a command into one frame."""
    header = _JSON_ENCODER.encode(
        {"code": int(cmd.code), "opaque": cmd.opaque, "flags": cmd.flags, "fields": cmd.fields},
    ).encode()
    total = _LEN.size + len(header) + len(cmd.body)
    return b"".join((_LEN.pack(total), _LEN.pack(len(header)), header, cmd.body))


def decode_payload(payload: bytes) -> Command:
    """Decode the bytes after the total-length field; raise ProtocolError if malformed."""
    if len(payload) < _LEN.size:
        raise ProtocolError("frame shorter than its header-length field")
    (header_len,) = _LEN.unpack_from(payload)
    if header_len > len(payload) - _LEN.size:
        raise ProtocolError(f"header length {header_len} exceeds frame size {len(payload)}")
    raw = payload[_LEN.size:_LEN.size + header_len]
    try:
        header = _JSON_DECODER.decode(raw.decode())
    except (ValueError, RecursionError) as exc:  # bad UTF-8, bad JSON, absurd nesting
        raise ProtocolError(f"header is not JSON: {str(exc)[:200]}") from None
    if not isinstance(header, dict):
        raise ProtocolError("header is not a JSON object")
    code, opaque, flags = header.get("code"), header.get("opaque"), header.get("flags", 0)
    fields = header.get("fields", {})
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (code, opaque, flags)):
        raise ProtocolError("header code/opaque/flags must be integers")
    if not isinstance(fields, dict):
        raise ProtocolError("header fields must be an object")
    return Command(code, fields, bytes(payload[_LEN.size + header_len:]), opaque, flags)


async def read_command(reader: asyncio.StreamReader, max_frame: int = MAX_FRAME_BYTES) -> Command | None:
    """Read one frame; None on a clean end of stream between frames."""
    try:
        prefix = await reader.readexactly(_LEN.size)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise ProtocolError("connection closed inside a length prefix") from None
        return None
    (total,) = _LEN.unpack(prefix)
    if total > max_frame:
        raise ProtocolError(f"frame of {total} bytes exceeds the maximum of {max_frame}")
    try:
        payload = await reader.readexactly(total)
    except asyncio.IncompleteReadError:
        raise ProtocolError(f"truncated frame: expected {total} bytes") from None
    return decode_payload(payload)


class FrameDecoder:
    """Cuts frames out of bytes that arrive in arbitrary pieces."""

    def __init__(self, max_frame: int = MAX_FRAME_BYTES) -> None:
        self.max_frame = max_frame
        self._buf = bytearray()

    @property
    def pending(self) -> int:
        """Bytes of an incomplete frame held back (non-zero at EOF means truncated)."""
        return len(self._buf)

    def feed(self, data: bytes) -> tuple[list[Command], ProtocolError | None]:
        """Every complete frame so far, and the error that stopped decoding, if any."""
        buf = self._buf
        buf += data
        commands: list[Command] = []
        pos, end = 0, len(buf)
        try:
            while end - pos >= _LEN.size:
                (total,) = _LEN.unpack_from(buf, pos)
                if total > self.max_frame:
                    raise ProtocolError(f"frame of {total} bytes exceeds the maximum of {self.max_frame}")
                if end - pos - _LEN.size < total:
                    break
                start = pos + _LEN.size
                commands.append(decode_payload(bytes(buf[start:start + total])))
                pos = start + total
        except ProtocolError as exc:
            buf.clear()
            return commands, exc
        if pos:
            del buf[:pos]
        return commands, None


# A handler answers a request with a Command (or None: no answer). It may be a
# coroutine function, or a plain function for cheap requests: a plain result is
# written at once, without a task per request.
Handler = Callable[[Command, "Connection"], "Awaitable[Command | None] | Command | None"]


class _WriteBatch:
    """Frames written during one event-loop turn leave in one send() call.

    Many calls or responses in flight on one connection then cost one system
    call per turn instead of one per frame; above FLUSH_BYTES it writes at once.
    """

    FLUSH_BYTES = 64 * 1024

    def __init__(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self._frames: list[bytes] = []
        self._size = 0
        self._scheduled = False

    def write(self, frame: bytes) -> None:
        self._frames.append(frame)
        self._size += len(frame)
        if self._size >= self.FLUSH_BYTES:
            self.flush()
        elif not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        self._scheduled = False
        frames, self._frames, self._size = self._frames, [], 0
        if frames and not self.transport.is_closing():
            self.transport.write(frames[0] if len(frames) == 1 else b"".join(frames))  # type: ignore[attr-defined]


class Connection:
    """One accepted connection on a server; handlers may push frames back on it."""

    _ids = itertools.count(1)

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.id = next(self._ids)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.closed = asyncio.Event()
        self.batch = _WriteBatch(transport)
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
        self.batch = _WriteBatch(transport)

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
    """

    def __init__(self, host: str, port: int, connect_timeout: float = 3.0,
                 max_frame: int = MAX_FRAME_BYTES,
                 on_push: Callable[[Command], None] | None = None,
                 on_lost: Callable[[str], None] | None = None) -> None:
        self.host, self.port = host, port
        self.connect_timeout = connect_timeout
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
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if conn.transport is not None:
            conn.batch.flush()
            conn.transport.close()
        conn._fail(f"{self.address}: client closed")


class _Expired(Exception):
    """Internal: the timer of a call fired before its response arrived."""


def _expire(future: asyncio.Future) -> None:
    if not future.done():
        future.set_exception(_Expired())
