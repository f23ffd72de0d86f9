"""The durable Raft log: one append-only file of CRC-checked records.

Record layout (big-endian):

    magic u32 | crc32 u32 | term u64 | index u64 | length u32 | payload

The CRC covers term, index, length and payload. On open the file is scanned
from the start; the first record that is short, has a bad magic, a wrong index
or a bad CRC marks a torn tail, and the file is cut there. Only the terms and
file offsets stay in memory; payloads are read back with pread. Truncating a
divergent suffix is an ftruncate followed by fsync, so it survives a crash as
surely as the appends it removes.

kill -9 does not lose data that reached write(): the page cache belongs to the
kernel. `sync` adds an fsync per append batch for power-loss durability (a
machine crash); without it, entries not yet fsynced are lost with the machine.
"""
from __future__ import annotations

import logging
import os
import struct
import zlib
from array import array
from dataclasses import dataclass

from sut.store.durable import create_file, make_dirs

MAGIC = 0x52414654  # "RAFT"
_HEADER = struct.Struct(">IIQQI")
_CRC_PART = struct.Struct(">QQI")
HEADER_SIZE = _HEADER.size


@dataclass(frozen=True)
class Entry:
    """One log entry. Empty data is the no-op a new leader appends."""

    index: int
    term: int
    data: bytes


class LogCorrupted(Exception):
    """The log cannot be used (e.g. a record claims an impossible size)."""


def encode_record(index: int, term: int, data: bytes) -> bytes:
    crc = zlib.crc32(_CRC_PART.pack(term, index, len(data)) + data)
    return _HEADER.pack(MAGIC, crc, term, index, len(data)) + data


class RaftLog:
    """Append, read, and truncate entries 1..last_index; index 0 is the empty prefix."""

    def __init__(self, path: str, sync: bool = False, log: logging.Logger | None = None) -> None:
        self.path, self.sync = path, sync
        self._log = log or logging.getLogger("raft.log")
        self._terms = array("Q")
        self._offsets = array("Q")
        self._end = 0
        self.torn_bytes = 0  # how much the last open() cut off
        make_dirs(os.path.dirname(path) or ".")
        self._fd, _ = create_file(path)  # its name is durable before any entry
        self._recover()

    # ---- recovery -----------------------------------------------------------------
    def _recover(self) -> None:
        size = os.fstat(self._fd).st_size
        offset = 0
        chunk = 1 << 20
        buffer, buffer_start = b"", 0
        while offset < size:
            rel = offset - buffer_start
            if len(buffer) - rel < HEADER_SIZE:
                buffer, buffer_start = os.pread(self._fd, max(chunk, HEADER_SIZE), offset), offset
                rel = 0
                if len(buffer) < HEADER_SIZE:
                    break
            magic, crc, term, index, length = _HEADER.unpack_from(buffer, rel)
            if magic != MAGIC or index != len(self._terms) + 1 or offset + HEADER_SIZE + length > size:
                break
            if len(buffer) - rel < HEADER_SIZE + length:
                buffer, buffer_start = os.pread(self._fd, max(chunk, HEADER_SIZE + length), offset), offset
                rel = 0
            data = buffer[rel + HEADER_SIZE:rel + HEADER_SIZE + length]
            if zlib.crc32(_CRC_PART.pack(term, index, length) + data) != crc:
                break
            if self._terms and term < self._terms[-1]:
                break  # terms never decrease along a valid log
            self._terms.append(term)
            self._offsets.append(offset)
            offset += HEADER_SIZE + length
        self._end = offset
        if offset < size:
            self.torn_bytes = size - offset
            self._log.warning("raft log %s: cutting a torn tail of %d bytes after index %d",
                              self.path, size - offset, self.last_index)
            os.ftruncate(self._fd, offset)
            os.fsync(self._fd)

    # ---- reading ------------------------------------------------------------------
    @property
    def last_index(self) -> int:
        return len(self._terms)

    @property
    def last_term(self) -> int:
        return self._terms[-1] if self._terms else 0

    def term_at(self, index: int) -> int | None:
        """Term of the entry at `index`; 0 for index 0; None if there is no such entry."""
        if index == 0:
            return 0
        if 0 < index <= len(self._terms):
            return self._terms[index - 1]
        return None

    def first_index_of_term(self, index: int) -> int:
        """The first index whose term equals the term at `index` (for fast conflict skipping)."""
        term = self.term_at(index)
        while index > 1 and self._terms[index - 2] == term:
            index -= 1
        return index

    def last_index_with_term_at_most(self, term: int, upto: int) -> int:
        """The highest index <= upto whose term is <= `term` (0 if none); terms never decrease."""
        low, high = 0, min(upto, self.last_index)
        while low < high:
            mid = (low + high + 1) // 2
            if self._terms[mid - 1] <= term:
                low = mid
            else:
                high = mid - 1
        return low

    def entries(self, start: int, end: int | None = None, max_bytes: int = 1 << 62) -> list[Entry]:
        """Entries start..end (inclusive, clipped to the log), at most about max_bytes of payload."""
        end = self.last_index if end is None else min(end, self.last_index)
        if start < 1 or start > end:
            return []
        first = self._offsets[start - 1]
        stop = end
        # clip by size using the offsets (header included) without reading
        while stop > start and self._offset_after(stop) - first > max_bytes:
            stop = start + (stop - start) // 2
        raw = os.pread(self._fd, self._offset_after(stop) - first, first)
        out, pos = [], 0
        for index in range(start, stop + 1):
            _, _, term, idx, length = _HEADER.unpack_from(raw, pos)
            out.append(Entry(idx, term, bytes(raw[pos + HEADER_SIZE:pos + HEADER_SIZE + length])))
            pos += HEADER_SIZE + length
        return out

    def entry(self, index: int) -> Entry:
        found = self.entries(index, index)
        if not found:
            raise IndexError(f"no raft log entry at index {index} (last is {self.last_index})")
        return found[0]

    def _offset_after(self, index: int) -> int:
        return self._offsets[index] if index < len(self._offsets) else self._end

    # ---- writing ------------------------------------------------------------------
    def append(self, entries: list[tuple[int, bytes]]) -> int:
        """Append (term, data) pairs after the last entry in one write; return the new last index."""
        if not entries:
            return self.last_index
        records, offsets, terms = [], [], []
        offset, index = self._end, self.last_index
        for term, data in entries:
            if term < (terms[-1] if terms else self.last_term):
                raise ValueError(f"term {term} after term {self.last_term}: terms never decrease")
            index += 1
            record = encode_record(index, term, data)
            records.append(record)
            offsets.append(offset)
            terms.append(term)
            offset += len(record)
        blob = b"".join(records)
        written = os.pwrite(self._fd, blob, self._end)
        if written != len(blob):
            os.ftruncate(self._fd, self._end)
            raise OSError(f"short write to {self.path}: {written} of {len(blob)} bytes")
        if self.sync:
            os.fsync(self._fd)
        self._offsets.extend(offsets)
        self._terms.extend(terms)
        self._end = offset
        return self.last_index

    def truncate_after(self, index: int) -> int:
        """Remove every entry after `index`, durably; return how many were removed."""
        if index >= self.last_index:
            return 0
        if index < 0:
            raise ValueError("cannot truncate before index 0")
        removed = self.last_index - index
        new_end = self._offsets[index]
        os.ftruncate(self._fd, new_end)
        os.fsync(self._fd)
        del self._terms[index:]
        del self._offsets[index:]
        self._end = new_end
        return removed

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
