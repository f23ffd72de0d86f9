"""The SUT's wire protocol: framed request/response commands over TCP.

In the spirit of RocketMQ's remoting command. A frame is

    total_length  u32 big-endian   (bytes after this field)
    header_length u32 big-endian
    header        JSON object: {"code": int, "opaque": int, "flags": int,
                                "fields": {str: scalar}}
    body          the remaining bytes (may be empty)

The header is JSON (as RocketMQ's default serializer) so that frames are easy
to read in a packet capture; the body carries message payloads unchanged.
`opaque` pairs a response with its request, so one connection multiplexes
many requests in flight. Anything malformed raises ProtocolError; servers log
it and close only that connection.

Request and response codes live in one table (RequestCode / ResponseCode)
shared by every server and client in the SUT.
"""
from __future__ import annotations

import asyncio
import enum
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


class RequestCode(enum.IntEnum):
    """Every request the SUT understands. Add new codes here, nowhere else."""

    # broker data plane
    SEND_MESSAGE = 10
    SEND_BATCH = 11
    PULL_MESSAGE = 12
    QUERY_MAX_OFFSET = 13
    QUERY_MIN_OFFSET = 14
    COMMIT_CONSUMER_OFFSET = 15
    QUERY_CONSUMER_OFFSET = 16
    BROKER_STATUS = 17
    # nameserver
    REGISTER_BROKER = 100
    UNREGISTER_BROKER = 101
    BROKER_HEARTBEAT = 102
    GET_ROUTE = 103
    GET_CLUSTER_INFO = 104
    # replication between brokers (classic HA and AutoSwitch)
    HA_HANDSHAKE = 200
    HA_TRANSFER = 201
    HA_ACK = 202
    # raft (DLedger mode and controllers)
    RAFT_VOTE = 300
    RAFT_APPEND = 301
    RAFT_HEARTBEAT = 302
    RAFT_STATUS = 303
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


Scalar = str | int | float | bool | None


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


def encode(cmd: Command) -> bytes:
    """Serialize a command into one frame."""
    header = json.dumps(
        {"code": int(cmd.code), "opaque": cmd.opaque, "flags": cmd.flags, "fields": cmd.fields},
        separators=(",", ":"),
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
        header = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"header is not JSON: {exc}") from None
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


Handler = Callable[[Command, "Connection"], Awaitable[Command | None]]


class Connection:
    """One accepted connection on a server; handlers may push frames back on it."""

    _ids = itertools.count(1)

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.id = next(self._ids)
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.closed = asyncio.Event()

    async def send(self, cmd: Command) -> None:
        if self.writer.is_closing():
            return
        self.writer.write(encode(cmd))
        await self.writer.drain()

    def close(self) -> None:
        self.writer.close()
        self.closed.set()


class RpcServer:
    """An asyncio TCP server that dispatches each request to a handler.

    Requests on one connection are handled concurrently (a slow append waiting
    for replication does not block a heartbeat behind it). A malformed frame
    closes that connection only, with a logged error.
    """

    def __init__(self, host: str, port: int, handler: Handler, log: logging.Logger,
                 max_frame: int = MAX_FRAME_BYTES,
                 on_close: Callable[[Connection], None] | None = None) -> None:
        self.host, self.port, self.handler, self.log = host, port, handler, log
        self.max_frame = max_frame
        self.on_close = on_close
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[Connection] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self._connections):
            conn.close()
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Connection(reader, writer)
        self._connections.add(conn)
        tasks: set[asyncio.Task] = set()
        try:
            while True:
                cmd = await read_command(reader, self.max_frame)
                if cmd is None:
                    break
                task = asyncio.create_task(self._dispatch(cmd, conn))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        except ProtocolError as exc:
            self.log.error("malformed frame from %s: %s; closing that connection", conn.peer, exc)
        except (ConnectionError, OSError):
            pass
        except asyncio.CancelledError:
            pass  # server shutting down; end this connection quietly
        finally:
            for task in tasks:
                task.cancel()
            self._connections.discard(conn)
            conn.close()
            if self.on_close is not None:
                self.on_close(conn)

    async def _dispatch(self, cmd: Command, conn: Connection) -> None:
        try:
            response = await self.handler(cmd, conn)
        except Exception:  # a handler bug must not kill the server
            self.log.exception("handler failed for request code %s", cmd.code)
            response = cmd.reply(ResponseCode.SYSTEM_ERROR, {"error": "internal error"})
        if response is not None and not cmd.flags & FLAG_ONEWAY:
            try:
                await conn.send(response)
            except (ConnectionError, OSError):
                pass


class RpcClient:
    """A persistent client connection with request multiplexing by opaque id.

    Reconnects lazily on the next call after a failure. Raises RpcTimeout when
    no response arrives in time and RpcConnectionError when the connection
    cannot be opened (sent=False) or breaks with the request in flight.
    """

    def __init__(self, host: str, port: int, connect_timeout: float = 3.0,
                 max_frame: int = MAX_FRAME_BYTES,
                 on_push: Callable[[Command], None] | None = None) -> None:
        self.host, self.port = host, port
        self.connect_timeout = connect_timeout
        self.max_frame = max_frame
        self.on_push = on_push
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task | None = None
        self._pending: dict[int, asyncio.Future] = {}
        self._opaque = itertools.count(1)
        self._lock = asyncio.Lock()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def _ensure_connected(self) -> asyncio.StreamWriter:
        async with self._lock:
            if self._writer is not None and not self._writer.is_closing():
                return self._writer
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(self.host, self.port), self.connect_timeout)
            except (OSError, asyncio.TimeoutError) as exc:
                raise RpcConnectionError(f"cannot connect to {self.address}: {exc or 'timeout'}",
                                         sent=False) from None
            self._writer = writer
            self._reader_task = asyncio.create_task(self._read_loop(reader, writer))
            return writer

    async def _read_loop(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        reason = "connection closed"
        try:
            while True:
                cmd = await read_command(reader, self.max_frame)
                if cmd is None:
                    break
                future = self._pending.pop(cmd.opaque, None) if cmd.is_response else None
                if future is not None and not future.done():
                    future.set_result(cmd)
                elif not cmd.is_response and self.on_push is not None:
                    self.on_push(cmd)
        except (ProtocolError, ConnectionError, OSError) as exc:
            reason = str(exc) or type(exc).__name__
        finally:
            writer.close()
            if self._writer is writer:
                self._writer = None
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(RpcConnectionError(f"{self.address}: {reason}"))
            self._pending.clear()

    async def call(self, code: int, fields: dict[str, Any] | None = None, body: bytes = b"",
                   timeout: float = 3.0) -> Command:
        """Send a request and wait for its response."""
        writer = await self._ensure_connected()
        opaque = next(self._opaque)
        future = asyncio.get_running_loop().create_future()
        self._pending[opaque] = future
        try:
            writer.write(encode(Command(int(code), fields or {}, body, opaque, 0)))
            await writer.drain()
            return await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            raise RpcTimeout(f"no response from {self.address} within {timeout:.1f}s") from None
        except (ConnectionError, OSError) as exc:
            raise RpcConnectionError(f"{self.address}: {exc}") from None
        finally:
            self._pending.pop(opaque, None)

    async def oneway(self, code: int, fields: dict[str, Any] | None = None, body: bytes = b"") -> None:
        """Send a request without waiting for (or getting) a response."""
        writer = await self._ensure_connected()
        writer.write(encode(Command(int(code), fields or {}, body, next(self._opaque), FLAG_ONEWAY)))
        await writer.drain()

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._reader_task is not None:
            self._reader_task.cancel()
            try:
                await self._reader_task
            except (asyncio.CancelledError, Exception):
                pass
            self._reader_task = None
