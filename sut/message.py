"""The message record: one format on disk, in pull responses and in HA transfer.

A record is a CRC-checked envelope around a payload:

    size    u32  whole record length in bytes, header included
    magic   u32  RECORD_MAGIC for a record, BLANK_MAGIC for end-of-segment filler
    crc     u32  CRC-32 of the payload (records only)
    payload size - 12 bytes

A message payload is

    queue_id  u32
    born_ts   u64  milliseconds, set by the producer
    store_ts  u64  milliseconds, set by the broker that appended it
    topic     u8 length + UTF-8
    msg_id    u8 length + UTF-8  (client-generated, unique, reused on retries)
    body      the remaining bytes

All integers are big-endian. The same bytes travel from the commitlog to a
slave and to a consumer, so every hop can check the CRC.
"""
from __future__ import annotations

import re
import struct
import zlib
from dataclasses import dataclass
from typing import Iterator

RECORD_MAGIC = 0x5A17C0DE
BLANK_MAGIC = 0xB1A4CFED
HEADER = struct.Struct(">III")
BLANK_MIN = 8  # a blank filler needs only size + magic
_FIXED = struct.Struct(">IQQ")

TOPIC_PATTERN = re.compile(r"[A-Za-z0-9_%|-]{1,127}")  # whole string: fullmatch, never match
MAX_MSG_ID = 255


class CorruptRecord(Exception):
    """A record whose size, magic or CRC does not check out."""


@dataclass(slots=True)
class Message:
    """One message as stored (store_ts is 0 until a broker appends it)."""

    topic: str
    queue_id: int
    msg_id: str
    body: bytes
    born_ts: int = 0
    store_ts: int = 0


def encode_payload(msg: Message) -> bytes:
    topic = msg.topic.encode()
    msg_id = msg.msg_id.encode()
    return b"".join((_FIXED.pack(msg.queue_id, msg.born_ts, msg.store_ts),
                     bytes((len(topic),)), topic, bytes((len(msg_id),)), msg_id, msg.body))


def payload_size(msg: Message) -> int:
    return _FIXED.size + 2 + len(msg.topic.encode()) + len(msg.msg_id.encode()) + len(msg.body)


def decode_payload(payload: bytes | memoryview) -> Message:
    """Decode a message payload; raise CorruptRecord if it is malformed."""
    try:
        queue_id, born_ts, store_ts = _FIXED.unpack_from(payload)
        pos = _FIXED.size
        tlen = payload[pos]
        topic = bytes(payload[pos + 1:pos + 1 + tlen]).decode()
        pos += 1 + tlen
        ilen = payload[pos]
        msg_id = bytes(payload[pos + 1:pos + 1 + ilen]).decode()
        pos += 1 + ilen
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise CorruptRecord(f"malformed message payload: {exc}") from None
    if pos > len(payload):
        raise CorruptRecord("message payload shorter than its fields")
    _check_topic(topic)
    return Message(topic, queue_id, msg_id, bytes(payload[pos:]), born_ts, store_ts)


def decode_route(payload: bytes | memoryview) -> tuple[str, int]:
    """(topic, queue_id) of a message payload, without copying its body."""
    try:
        (queue_id,) = struct.unpack_from(">I", payload)
        tlen = payload[_FIXED.size]
        topic = bytes(payload[_FIXED.size + 1:_FIXED.size + 1 + tlen]).decode()
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise CorruptRecord(f"malformed message payload: {exc}") from None
    _check_topic(topic)
    return topic, queue_id


def _check_topic(topic: str) -> None:
    """A topic names a directory (consume queues): replicated data gets the client path's check."""
    if not valid_topic(topic):
        raise CorruptRecord(f"invalid topic {topic!r} in message payload")


def encode_record(payload: bytes) -> bytes:
    return HEADER.pack(HEADER.size + len(payload), RECORD_MAGIC, zlib.crc32(payload)) + payload


def encode_blank(size: int) -> bytes:
    """Filler from here to the end of a segment (size >= BLANK_MIN)."""
    return struct.pack(">II", size, BLANK_MAGIC) + bytes(size - BLANK_MIN)


def check_record(buf: bytes | memoryview, pos: int, limit: int) -> tuple[int, int]:
    """Validate the record at buf[pos:]; return (magic, size).

    `limit` is the largest size the record may have (what is left of the
    buffer or segment). Raise CorruptRecord for anything else, including a
    zero size (never-written space).
    """
    if limit - pos < BLANK_MIN:
        raise CorruptRecord(f"{limit - pos} bytes left at {pos}, too few for a record")
    size, magic = struct.unpack_from(">II", buf, pos)
    if size == 0:
        raise CorruptRecord(f"no record at {pos} (zero size)")
    if size > limit - pos:
        raise CorruptRecord(f"record at {pos} claims {size} bytes, only {limit - pos} left")
    if magic == BLANK_MAGIC:
        return magic, size
    if magic != RECORD_MAGIC or size < HEADER.size:
        raise CorruptRecord(f"bad magic or size at {pos}")
    (crc,) = struct.unpack_from(">I", buf, pos + 8)
    if zlib.crc32(memoryview(buf)[pos + HEADER.size:pos + size]) != crc:
        raise CorruptRecord(f"CRC mismatch in record at {pos}")
    return magic, size


def iter_records(buf: bytes | memoryview) -> Iterator[tuple[int, bytes]]:
    """Yield (position, payload) for each message record in a buffer of whole records.

    Blank fillers are skipped; anything malformed raises CorruptRecord.
    """
    view = memoryview(buf)
    pos = 0
    while pos < len(view):
        magic, size = check_record(view, pos, len(view))
        if magic == RECORD_MAGIC:
            yield pos, bytes(view[pos + HEADER.size:pos + size])
        pos += size


def valid_topic(topic: object) -> bool:
    return isinstance(topic, str) and TOPIC_PATTERN.fullmatch(topic) is not None
