"""The crash-safe journal of nuclei actions (`<run_dir>/journal.jsonl`).

Write-ahead: an action is appended and fsynced *before* it is applied, and an
`undo` line is appended after it has been undone. Whatever has an `apply` line
and no `undo` line may still be in effect, so `chaos heal` can repair a run
that died at any instant. Undo actions are idempotent for exactly that reason:
the journal may name an action that never got applied.
"""
from __future__ import annotations

import json
import os
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class JournalError(Exception):
    """The journal file cannot be read or written; the message names file and line."""


@dataclass(frozen=True)
class JournalEntry:
    """One applied action: what, on which node, with the facts needed to undo it."""

    id: str
    action: str
    node: str
    params: dict[str, Any] = field(default_factory=dict)
    time: float = 0.0


class Journal:
    """Append-only log of applied / undone nuclei actions, safe to share between threads."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        # A token per Journal object keeps ids (and the iptables rule tags made
        # from them) unique even when a heal appends to a crashed run's file.
        self.token = secrets.token_hex(3)
        self._counter = 0
        self._lock = threading.Lock()

    def record(self, action: str, node: str, **params: Any) -> JournalEntry:
        """Append an action before it is applied; returns once it is on disk."""
        with self._lock:
            self._counter += 1
            entry = JournalEntry(f"{self.token}-{self._counter}", action, node, params, time.time())
            self._append({"event": "apply", "id": entry.id, "action": action, "node": node,
                          "params": params, "time": entry.time})
        return entry

    def mark_undone(self, entry: JournalEntry, **note: Any) -> None:
        """Append that an action has been undone (and verified)."""
        with self._lock:
            line = {"event": "undo", "id": entry.id, "time": time.time()}
            if note:
                line["note"] = note
            self._append(line)

    def entries(self) -> list[JournalEntry]:
        """Every applied action in the order it was applied."""
        return [entry for entry, _ in self._read()]

    def pending(self) -> list[JournalEntry]:
        """Actions applied and not yet undone, in the order they were applied."""
        return [entry for entry, undone in self._read() if not undone]

    def _append(self, line: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # default=str: paths and other plain values from a deployer's ProcessRef.
        data = (json.dumps(line, sort_keys=True, default=str) + "\n").encode()
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise JournalError(f"{self.path}: cannot append to the journal: {exc.strerror}") from exc

    def _read(self) -> list[tuple[JournalEntry, bool]]:
        try:
            lines = self.path.read_bytes().split(b"\n")
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise JournalError(f"{self.path}: cannot read the journal: {exc.strerror}") from exc
        applied: dict[str, JournalEntry] = {}
        undone: set[str] = set()
        last = len(lines) - 1
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
                if line["event"] == "apply":
                    applied[line["id"]] = JournalEntry(line["id"], line["action"], line["node"],
                                                       line.get("params", {}), line.get("time", 0.0))
                elif line["event"] == "undo":
                    undone.add(line["id"])
                else:
                    raise KeyError("event")
            except (ValueError, KeyError, TypeError) as exc:
                # A torn last line is what a crash mid-append leaves; the
                # action it describes was never applied (we apply after fsync).
                if number - 1 == last:
                    continue
                raise JournalError(f"{self.path}:{number}: malformed journal line ({exc})") from exc
        return [(entry, entry.id in undone) for entry in applied.values()]
