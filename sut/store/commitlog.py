"""The commitlog: CRC-checked records in fixed-size segment files.

Records (sut/message.py) are addressed by physical offset, the byte position
in the whole log. Segment k holds offsets [k * S, (k + 1) * S) in a file named
by its base offset (20 digits, as RocketMQ names its mapped files), created
sparse at full size. A record never spans two segments: when the next one
does not fit, a blank filler closes the segment and the record starts the
next one. The space after the last record is zeros, so recovery finds the
end as the first position that is not a valid record (zero, torn or bad CRC).

Truncation is crash-safe because it works front to back: first the tail of
the segment holding the cut is zeroed and synced, then later segments are
deleted lowest first. Whatever a crash leaves behind, the first invalid
position is still the cut, and recovery removes the rest.

This class is synchronous and not thread-safe; MessageStore serialises
file-structure changes (truncate) against fsyncs running in a worker thread.
"""
from __future__ import annotations

import logging
import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from sut.message import BLANK_MAGIC, BLANK_MIN, HEADER, RECORD_MAGIC, CorruptRecord, check_record, encode_record
from sut.store.durable import create_file, fsync_dir, make_dirs

_BLANK_HEADER = struct.Struct(">II")


class StoreError(Exception):
    """The store's files are unusable as they are (wrong sizes, foreign files)."""


@dataclass
class Recovery:
    """What recovery found: the end of the valid log and why it ends there."""

    start: int
    end: int
    records: int
    problem: str | None  # None when the log simply ends in zeros
    removed_segments: int


class CommitLog:
    def __init__(self, directory: Path, segment_bytes: int,
                 log: logging.Logger | None = None) -> None:
        if segment_bytes < 4096:
            raise StoreError(f"segment size {segment_bytes} is too small (minimum 4096 bytes)")
        self.dir = directory
        self.segment_bytes = segment_bytes
        self.log = log or logging.getLogger("sut.commitlog")
        make_dirs(self.dir)
        self._fds: dict[int, int] = {}
        self._dirty: set[int] = set()
        self._segments = self._list_segments()
        self._end = self.min_offset

    # -- layout -------------------------------------------------------------
    def _list_segments(self) -> list[int]:
        """Indexes of the segment files present, checked for name and size."""
        sizes: dict[int, int] = {}
        for path in self.dir.iterdir():
            if path.name.endswith(".tmp"):
                continue
            if not (path.name.isdigit() and len(path.name) == 20):
                raise StoreError(f"unexpected file in commitlog directory: {path}")
            base = int(path.name)
            if base % self.segment_bytes:
                raise StoreError(f"segment {path} does not start at a multiple of the segment "
                                 f"size {self.segment_bytes}: was the store made with another size?")
            sizes[base // self.segment_bytes] = path.stat().st_size
        found = sorted(sizes)
        for index in found:
            size = sizes[index]
            if size == self.segment_bytes:
                continue
            if index == found[-1] and size == 0:
                self._finish_creation(index)
                continue
            raise StoreError(f"segment {self._path(index)} has {size} bytes, expected {self.segment_bytes}")
        return found

    def _finish_creation(self, index: int) -> None:
        """An empty last segment is a creation cut short by a crash (kill -9 between
        create and sizing, or a lost unsynced resize): records are only written into
        a full-size segment, so sizing it now loses nothing. A segment of another
        non-zero size stays an error (a store made with another segment size)."""
        self.log.warning("segment %s is empty: its creation was cut short, sizing it",
                         self._path(index))
        fd = os.open(self._path(index), os.O_RDWR)
        try:
            os.ftruncate(fd, self.segment_bytes)
            os.fdatasync(fd)
        finally:
            os.close(fd)

    def _path(self, index: int) -> Path:
        return self.dir / f"{index * self.segment_bytes:020d}"

    def _fd(self, index: int) -> int:
        fd = self._fds.get(index)
        if fd is None:
            path = self._path(index)
            fd, created = create_file(path)
            if created:
                # Full size and name durable before any record: recovery refuses
                # a segment of the wrong size, and a crash may come at any time.
                os.ftruncate(fd, self.segment_bytes)
                os.fdatasync(fd)
                self._segments.append(index)
                self._segments.sort()
            self._fds[index] = fd
        return fd

    def has_segment(self, index: int) -> bool:
        return index in self._segments

    @property
    def min_offset(self) -> int:
        return self._segments[0] * self.segment_bytes if self._segments else 0

    @property
    def max_offset(self) -> int:
        """The end of the log: the offset the next record will get (modulo segment rolls)."""
        return self._end

    # -- recovery -------------------------------------------------------------
    def recover(self, start: int, visit: Callable[[int, bytes], None]) -> Recovery:
        """Find the end of the valid log scanning from `start`, then cut everything after it.

        `start` must be a record boundary that is known good (a checkpoint or
        a segment base). `visit(offset, payload)` sees every message record
        from there on, in log order.
        """
        start = max(start, self.min_offset)
        pos, records, problem = start, 0, None
        present = set(self._segments)
        while True:
            index, seg_pos = divmod(pos, self.segment_bytes)
            if index not in present:
                break
            fd = self._fd(index)
            with mmap.mmap(fd, self.segment_bytes, access=mmap.ACCESS_READ) as view:
                while seg_pos < self.segment_bytes:
                    try:
                        magic, size = check_record(view, seg_pos, self.segment_bytes)
                    except CorruptRecord as exc:
                        if _is_zero(view, seg_pos):
                            break
                        problem = f"invalid record at offset {pos}: {exc}"
                        break
                    if magic == BLANK_MAGIC and seg_pos + size != self.segment_bytes:
                        problem = f"blank filler at offset {pos} does not reach the segment end"
                        break
                    if magic == RECORD_MAGIC:
                        visit(pos, view[seg_pos + HEADER.size:seg_pos + size])
                        records += 1
                    seg_pos += size
                    pos += size
            if seg_pos < self.segment_bytes or problem:
                break
        self._end = pos
        removed = self._cut(pos)
        return Recovery(start, pos, records, problem, removed)

    # -- writes ---------------------------------------------------------------
    def fits(self, payload_size: int) -> bool:
        return HEADER.size + payload_size <= self.segment_bytes - BLANK_MIN

    def append(self, payloads: list[bytes]) -> list[tuple[int, int]]:
        """Append one record per payload; return (offset, size) of each.

        Records are written with one pwrite per segment touched. The end only
        moves once every write succeeded, so a failed write is overwritten by
        the next append.
        """
        end = self._end
        placed: list[tuple[int, int]] = []
        chunk: list[bytes] = []
        chunk_start = end
        for payload in payloads:
            record = encode_record(payload)
            size = len(record)
            if size > self.segment_bytes - BLANK_MIN:
                raise ValueError(f"record of {size} bytes does not fit a segment")
            left = self.segment_bytes - end % self.segment_bytes
            if not (size == left or size + BLANK_MIN <= left):
                chunk.append(_BLANK_HEADER.pack(left, BLANK_MAGIC))
                self._write(chunk_start, b"".join(chunk))
                end += left
                chunk, chunk_start = [], end
            chunk.append(record)
            placed.append((end, size))
            end += size
        if chunk:
            self._write(chunk_start, b"".join(chunk))
        self._end = end
        return placed

    def append_raw(self, offset: int, data: bytes) -> list[tuple[int, bytes]]:
        """Append whole records copied from another log at the same offsets (replication).

        Returns (offset, payload) of each message record. Raises CorruptRecord
        if the data does not start at our end, spans segments, or does not
        check out record by record; nothing is written then.
        """
        if offset != self._end:
            raise CorruptRecord(f"data for offset {offset} but the log ends at {self._end}")
        seg_left = self.segment_bytes - offset % self.segment_bytes
        if len(data) > seg_left:
            raise CorruptRecord(f"{len(data)} bytes at {offset} cross a segment end")
        view = memoryview(data)
        pos, messages = 0, []
        while pos < len(view):
            magic, size = check_record(view, pos, len(view))
            if magic == BLANK_MAGIC and pos + size != seg_left:
                raise CorruptRecord(f"blank filler at {offset + pos} does not reach the segment end")
            if magic == RECORD_MAGIC:
                messages.append((offset + pos, bytes(view[pos + HEADER.size:pos + size])))
            pos += size
        if data:
            self._write(offset, data)
            self._end = offset + len(data)
        return messages

    def _write(self, offset: int, data: bytes) -> None:
        index, pos = divmod(offset, self.segment_bytes)
        fd = self._fd(index)
        view = memoryview(data)
        while view:
            written = os.pwrite(fd, view, pos)
            view, pos = view[written:], pos + written
        self._dirty.add(index)

    # -- reads ----------------------------------------------------------------
    def read(self, offset: int, size: int) -> bytes:
        index, pos = divmod(offset, self.segment_bytes)
        return os.pread(self._fd(index), size, pos)

    def read_raw(self, offset: int, max_bytes: int) -> bytes:
        """Whole records from `offset` (at most max_bytes, but at least one record).

        Never crosses a segment end, so the reader can append the bytes as they
        are at the same offset (HA transfer).
        """
        if offset >= self._end:
            return b""
        index, pos = divmod(offset, self.segment_bytes)
        avail = min(self._end, (index + 1) * self.segment_bytes) - offset
        buf = self.read(offset, min(avail, max_bytes))
        cut = 0
        while cut + BLANK_MIN <= len(buf):
            (size,) = struct.unpack_from(">I", buf, cut)
            if size == 0 or cut + size > len(buf):
                break
            cut += size
        if cut == 0:  # the first record alone is bigger than max_bytes
            (size,) = struct.unpack_from(">I", self.read(offset, BLANK_MIN))
            return self.read(offset, min(size, avail))
        return buf[:cut]

    # -- durability -------------------------------------------------------------
    def take_dirty(self) -> list[int]:
        """File descriptors written since the last call (to fdatasync outside the loop)."""
        fds = [self._fds[i] for i in self._dirty if i in self._fds]
        self._dirty.clear()
        return fds

    def sync_all(self) -> None:
        """fdatasync every open segment (after recovery)."""
        self.sync(list(self._fds.values()))
        self._dirty.clear()

    @staticmethod
    def sync(fds: list[int]) -> None:
        for fd in fds:
            os.fdatasync(fd)

    def truncate(self, offset: int) -> int:
        """Cut the log at `offset` (a record boundary): later records are gone, also after a crash.

        Returns the number of segment files removed.
        """
        if not self.min_offset <= offset <= self._end:
            raise ValueError(f"cannot truncate to {offset}: log spans {self.min_offset}..{self._end}")
        self._end = offset
        return self._cut(offset)

    def _cut(self, offset: int) -> int:
        index, pos = divmod(offset, self.segment_bytes)
        if pos and index in self._segments:
            fd = self._fd(index)
            os.ftruncate(fd, pos)
            os.ftruncate(fd, self.segment_bytes)
            os.fdatasync(fd)
        doomed = [i for i in self._segments if i > index or (i == index and pos == 0)]
        for i in doomed:  # lowest first: the first gap is the cut (see module docstring)
            fd = self._fds.pop(i, None)
            if fd is not None:
                os.close(fd)
            self._dirty.discard(i)
            self._path(i).unlink(missing_ok=True)
            self._segments.remove(i)
        if doomed:
            fsync_dir(self.dir)
        return len(doomed)

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


def _is_zero(view: mmap.mmap, pos: int) -> bool:
    """True if the segment holds only zeros from pos on (never written, not torn)."""
    chunk = 1 << 20
    while pos < len(view):
        if view[pos:pos + chunk].count(0) != len(view[pos:pos + chunk]):
            return False
        pos += chunk
    return True
