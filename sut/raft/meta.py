"""Persisted term and vote (DLedger's currTerm / voteFor).

Written to a temporary file, fsynced, renamed over the old one and the
directory fsynced, so a crash (also of the machine) leaves either the old or
the new pair, never a mix and never an older one. A node must save before it
answers a vote or acts in a new term, or it could vote twice in one term.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from sut.store.durable import write_atomic


class MetaCorrupted(Exception):
    """The term/vote file exists but cannot be read: refuse to start rather than vote twice."""


class TermVote:
    """The current term and whom this node voted for in it (None = nobody yet)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.term, self.voted_for = 0, None
        if os.path.exists(path):
            try:
                with open(path, encoding="utf-8") as f:
                    raw = json.load(f)
                self.term, self.voted_for = int(raw["term"]), raw.get("voted_for")
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise MetaCorrupted(f"{path}: unreadable raft term/vote file: {exc}") from None

    def save(self, term: int, voted_for: str | None) -> None:
        if term == self.term and voted_for == self.voted_for:
            return
        if term < self.term:
            raise ValueError(f"term may not go back from {self.term} to {term}")
        write_atomic(Path(self.path), json.dumps({"term": term, "voted_for": voted_for}).encode())
        self.term, self.voted_for = term, voted_for
