"""Packing entries into a frame body: term u64 | length u32 | data, repeated.

Indices are not on the wire: a batch always covers consecutive indices from a
`start` (or `prev_index + 1`) named in the header fields.
"""
from __future__ import annotations

import struct

from sut.protocol import ProtocolError

_ITEM = struct.Struct(">QI")


def pack_entries(items: list[tuple[int, bytes]]) -> bytes:
    """(term, data) pairs -> body bytes."""
    return b"".join(_ITEM.pack(term, len(data)) + data for term, data in items)


def unpack_entries(body: bytes) -> list[tuple[int, bytes]]:
    """Body bytes -> (term, data) pairs; ProtocolError if the body is malformed."""
    out, pos, view = [], 0, memoryview(body)
    while pos < len(body):
        if len(body) - pos < _ITEM.size:
            raise ProtocolError("raft entries body: truncated entry header")
        term, length = _ITEM.unpack_from(body, pos)
        pos += _ITEM.size
        if length > len(body) - pos:
            raise ProtocolError("raft entries body: entry longer than the body")
        out.append((term, bytes(view[pos:pos + length])))
        pos += length
    return out
