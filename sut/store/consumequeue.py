"""Consume queues: per (topic, queue id) index from queue offset to log position.

Entry i of a queue is the i-th message of that queue in log order, stored as
(physical offset u64, size u32), 12 bytes little-endian, in one file per
queue: consumequeue/<topic>/<queue id>. Entries are kept in memory (two
arrays) and written to the files in batches by the store's checkpoint; the
files are only an accelerator, since a queue can always be rebuilt from any
ordered stream of (position, message) entries — the commitlog here, the Raft
log in DLedger mode.
"""
from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_left
from pathlib import Path

from sut.message import CorruptRecord, valid_topic
from sut.store.durable import create_file

ENTRY = struct.Struct("<QI")


class ConsumeQueue:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.phys = array("q")
        self.sizes = array("l")
        self._persisted = 0  # entries already in the file

    def load(self) -> None:
        """Read the entries present in the file (a torn last entry is dropped)."""
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        usable = len(data) - len(data) % ENTRY.size
        for phys, size in ENTRY.iter_unpack(data[:usable]):
            self.phys.append(phys)
            self.sizes.append(size)
        self._persisted = len(self.phys)
        if usable != len(data):
            self._file_truncate(usable)

    def __len__(self) -> int:
        return len(self.phys)

    def append(self, phys: int, size: int) -> int:
        """Add the next entry; return its queue offset."""
        self.phys.append(phys)
        self.sizes.append(size)
        return len(self.phys) - 1

    def count_below(self, limit: int) -> int:
        """How many entries start below log position `limit` (the readable max offset)."""
        if not self.phys or self.phys[-1] < limit:
            return len(self.phys)
        return bisect_left(self.phys, limit)

    def truncate_from_phys(self, phys: int) -> int:
        """Drop every entry at log position >= phys; return how many were dropped."""
        keep = self.count_below(phys)
        dropped = len(self.phys) - keep
        if dropped:
            del self.phys[keep:]
            del self.sizes[keep:]
            if self._persisted > keep:
                self._persisted = keep
                self._file_truncate(keep * ENTRY.size)
        return dropped

    def take_pending(self) -> tuple[Path, int, bytes] | None:
        """(file, position, bytes) of the entries not yet in the file, now counted as written.

        The write itself (CQWrite.run) happens in a worker thread; no file stays
        open between checkpoints, so thousands of queues need no descriptors.
        """
        start = self._persisted
        if start == len(self.phys):
            return None
        data = b"".join(ENTRY.pack(p, s) for p, s in zip(self.phys[start:], self.sizes[start:]))
        self._persisted = len(self.phys)
        return self.path, start * ENTRY.size, data

    def _file_truncate(self, size: int) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "ab") as f:
            f.truncate(size)


def write_entries(jobs: list[tuple[Path, int, bytes]]) -> None:
    """Write and fdatasync consume-queue entries (ConsumeQueues.take_pending's jobs)."""
    for path, position, data in jobs:
        fd, _ = create_file(path)  # a new queue file's name is durable before its entries
        try:
            os.pwrite(fd, data, position)
            os.fdatasync(fd)
        finally:
            os.close(fd)


class ConsumeQueues:
    """All consume queues of a store, created on first use."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}

    def load(self) -> None:
        if not self.dir.exists():
            return
        for topic_dir in sorted(self.dir.iterdir()):
            if not topic_dir.is_dir() or topic_dir.is_symlink() or not valid_topic(topic_dir.name):
                continue
            for qfile in topic_dir.iterdir():
                if qfile.name.isdigit():
                    cq = self.get_or_create(topic_dir.name, int(qfile.name))
                    cq.load()

    def get(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self.queues.get((topic, queue_id))

    def get_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The queue's file lies under this directory: a topic that is not a plain name is refused."""
        cq = self.queues.get((topic, queue_id))
        if cq is None:
            if not valid_topic(topic):
                raise CorruptRecord(f"invalid topic {topic!r} for a consume queue")
            cq = self.queues[(topic, queue_id)] = ConsumeQueue(self.dir / topic / str(queue_id))
        return cq

    def dispatch(self, topic: str, queue_id: int, phys: int, size: int) -> int:
        """Index one message; return its queue offset."""
        return self.get_or_create(topic, queue_id).append(phys, size)

    def truncate_from_phys(self, phys: int) -> int:
        """Drop every entry at log position >= phys in every queue."""
        return sum(cq.truncate_from_phys(phys) for cq in self.queues.values())

    def take_pending(self) -> list[tuple[Path, int, bytes]]:
        """Entries of every queue not yet written (see ConsumeQueue.take_pending)."""
        return [job for cq in self.queues.values() if (job := cq.take_pending()) is not None]

    def topics(self) -> dict[str, int]:
        """topic -> number of queues seen (highest queue id + 1)."""
        out: dict[str, int] = {}
        for topic, qid in self.queues:
            out[topic] = max(out.get(topic, 0), qid + 1)
        return out

