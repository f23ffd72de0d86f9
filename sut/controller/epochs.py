"""The broker's epoch file and the consistent-point search (AutoSwitch HA).

Every master epoch owns a contiguous range of the commitlog: entry
(epoch, start_offset) says "bytes from start_offset on were written by the
master of this epoch", up to the next entry's start (or the log's end for the
last entry). Only one broker is ever master of a given epoch, so two brokers
that hold an entry with the same epoch AND the same start offset hold the same
bytes for the part of that range they both have. That is what lets a returning
broker find where its log stops agreeing with the master's and truncate there.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from sut.store.metadata import write_atomic

NO_CONSISTENT_POINT = -1


class EpochFileError(Exception):
    """The epoch file on disk cannot be read: the broker must not guess."""


@dataclass(frozen=True)
class EpochEntry:
    epoch: int
    start_offset: int

    def to_json(self) -> list[int]:
        return [self.epoch, self.start_offset]

    @classmethod
    def from_json(cls, raw: object) -> "EpochEntry":
        if (not isinstance(raw, (list, tuple)) or len(raw) != 2
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in raw)):
            raise ValueError(f"epoch entry must be [epoch, start_offset], got {raw!r}")
        return cls(raw[0], raw[1])


def can_follow(last: EpochEntry | None, entry: EpochEntry) -> bool:
    """The append rule: both epoch and start offset strictly grow."""
    return last is None or (entry.epoch > last.epoch and entry.start_offset > last.start_offset)


def entry_ends(entries: Sequence[EpochEntry], last_end: int | None) -> list[int | None]:
    """End offset (exclusive) of each entry; None means open-ended (unbounded)."""
    ends: list[int | None] = [nxt.start_offset for nxt in entries[1:]]
    if entries:
        ends.append(last_end)
    return ends


def find_consistent_point(local: Sequence[EpochEntry], local_end: int | None,
                          remote: Sequence[EpochEntry], remote_end: int | None) -> int:
    """Offset up to which `local` and `remote` provably hold the same bytes.

    Walk the local epochs from newest to oldest; the first epoch the remote
    also has with the same start offset was written by one master into both
    logs, so they agree up to the smaller of the two ends of that epoch.
    Returns NO_CONSISTENT_POINT (-1) when no epoch matches.
    """
    remote_ends = dict(zip((e.epoch for e in remote), entry_ends(remote, remote_end)))
    remote_starts = {e.epoch: e.start_offset for e in remote}
    for entry, end in reversed(list(zip(local, entry_ends(local, local_end)))):
        if remote_starts.get(entry.epoch) != entry.start_offset:
            continue
        other_end = remote_ends[entry.epoch]
        candidates = [v for v in (end, other_end) if v is not None]
        if not candidates:
            raise ValueError("both logs end open-ended: pass at least one end offset")
        return min(candidates)
    return NO_CONSISTENT_POINT


class EpochFile:
    """The ordered (epoch, start offset) list, persisted on every change.

    Crash safety: the whole list is written to a temp file, fsynced, then
    renamed over the real file (rename is atomic), so a kill -9 at any moment
    leaves either the old or the new list, never a mix. The list is tiny (one
    entry per master change), so rewriting it is cheap.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._tmp = self.path.with_name(self.path.name + ".tmp")
        self._entries: list[EpochEntry] = self._load()

    def _load(self) -> list[EpochEntry]:
        if self._tmp.exists():
            self._tmp.unlink()  # a write that never reached its rename
        if not self.path.exists():
            return []
        try:
            raw = json.loads(self.path.read_text())
            entries = [EpochEntry.from_json(item) for item in raw]
        except (OSError, ValueError, TypeError) as exc:
            raise EpochFileError(f"{self.path}: unreadable epoch file: {exc}") from None
        for prev, entry in zip(entries, entries[1:]):
            if not can_follow(prev, entry):
                raise EpochFileError(f"{self.path}: entries out of order: {prev} then {entry}")
        return entries

    def _save(self) -> None:
        write_atomic(self.path, json.dumps([e.to_json() for e in self._entries]).encode())

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    def last(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    def last_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else 0

    def append(self, entry: EpochEntry) -> bool:
        """Append if the rule allows it (epoch and start both larger); persist."""
        if not can_follow(self.last(), entry):
            return False
        self._entries.append(entry)
        self._save()
        return True

    def truncate_from_offset(self, offset: int) -> None:
        """Drop entries that start at or after `offset` (their bytes are gone)."""
        kept = [e for e in self._entries if e.start_offset < offset]
        if len(kept) != len(self._entries):
            self._entries = kept
            self._save()

    def truncate_from_epoch(self, epoch: int) -> None:
        """Drop entries of `epoch` and newer (a master re-appending a stale epoch)."""
        kept = [e for e in self._entries if e.epoch < epoch]
        if len(kept) != len(self._entries):
            self._entries = kept
            self._save()

    def begin_master_epoch(self, epoch: int, max_offset: int) -> None:
        """Record that this broker is master of `epoch` from `max_offset` on.

        Entries of newer epochs are stale and removed first. If the last entry
        is this very epoch, this broker was its master all along (one master
        per epoch) and the entry stays. An older epoch that wrote nothing (it
        starts at `max_offset`) is replaced, since the append rule needs a
        strictly larger start and an empty range says nothing.
        """
        self.truncate_from_epoch(epoch + 1)
        last = self.last()
        if last is not None and last.epoch == epoch:
            return
        if last is not None and last.start_offset >= max_offset:
            self.truncate_from_offset(max_offset)
        if not self.append(EpochEntry(epoch, max_offset)):
            raise EpochFileError(f"{self.path}: cannot begin epoch {epoch} at {max_offset} "
                                 f"after {self.last()}")

    def entry_for_offset(self, offset: int) -> tuple[EpochEntry, int | None] | None:
        """The entry whose range holds `offset`, with that range's end (None = open)."""
        for entry, end in zip(self._entries, entry_ends(self._entries, None)):
            if entry.start_offset <= offset and (end is None or offset < end):
                return entry, end
        return None
