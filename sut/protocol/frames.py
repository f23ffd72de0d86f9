"""The frame codec: commands to bytes and back, and the batching of frames on send.

A frame is

    total_length  u32 big-endian   (bytes after this field)
    header_length u32 big-endian
    header        JSON object: {"code": int, "opaque": int, "flags": int,
                                "fields": {str: JSON value}}
    body          the remaining bytes (may be empty)

`flags` bit 0 marks a response, bit 1 a one-way request (no response). A
frame larger than the receiver's maximum (MAX_FRAME_BYTES by default) is
refused before its payload is read. The header is JSON (as RocketMQ's default
serializer) so that frames are easy to read in a packet capture; the body
carries message payloads unchanged. Anything malformed raises ProtocolError.
"""
from __future__ import annotations

import asyncio
import json
import struct
from dataclasses import dataclass, field
from typing import Any

from sut.protocol.codes import ResponseCode

MAX_FRAME_BYTES = 16 * 1024 * 1024
_LEN = struct.Struct(">I")

FLAG_RESPONSE = 0x1
FLAG_ONEWAY = 0x2


class ProtocolError(Exception):
    """A frame that cannot be decoded: the connection it came on is closed."""


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


class WriteBatch:
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
