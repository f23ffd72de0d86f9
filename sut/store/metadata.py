"""Small broker metadata files: topics and consumer-group offsets.

Both are JSON documents replaced atomically (write a temp file, fsync, rename,
fsync the directory), so a kill -9 leaves either the old or the new version.
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from sut.store.durable import write_atomic

__all__ = ["write_atomic"]  # re-exported: epochs and others import it from here


def read_json(path: Path, log: logging.Logger) -> Any:
    """The document at path, or None if it is missing or unreadable (logged)."""
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.error("ignoring unreadable %s: %s", path, exc)
        return None


class TopicTable:
    """topic -> number of queues (read = write queues here), persisted as topics.json."""

    def __init__(self, path: Path, log: logging.Logger) -> None:
        self.path, self.log = path, log
        self.topics: dict[str, int] = {}

    def load(self, configured: dict[str, int]) -> None:
        stored = read_json(self.path, self.log)
        if isinstance(stored, dict):
            self.topics.update({k: v for k, v in stored.items() if isinstance(v, int) and v > 0})
        self.topics.update(configured)

    def create(self, topic: str, queues: int) -> bool:
        """Add or resize a topic; return True if that changed anything."""
        if self.topics.get(topic) == queues:
            return False
        self.topics[topic] = queues
        write_atomic(self.path, json.dumps(self.topics, sort_keys=True).encode())
        return True

    def queues(self, topic: str) -> int | None:
        return self.topics.get(topic)


class ConsumerOffsets:
    """(group, topic, queue id) -> committed queue offset.

    Kept in memory and written every few seconds and on shutdown, like
    RocketMQ's consumerOffset.json: after a kill -9 the last few commits may
    be lost, so consumers re-read a little (at-least-once).
    """

    def __init__(self, path: Path, log: logging.Logger) -> None:
        self.path, self.log = path, log
        self.offsets: dict[str, dict[str, int]] = {}  # group -> "topic@queue" -> offset
        self._dirty = False

    def load(self) -> None:
        stored = read_json(self.path, self.log)
        if isinstance(stored, dict):
            self.offsets = {g: dict(v) for g, v in stored.items() if isinstance(v, dict)}

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.offsets.setdefault(group, {})[f"{topic}@{queue_id}"] = offset
        self._dirty = True

    def get(self, group: str, topic: str, queue_id: int) -> int | None:
        return self.offsets.get(group, {}).get(f"{topic}@{queue_id}")

    def snapshot(self) -> bytes | None:
        """The document to write if anything changed (taken on the event loop)."""
        if not self._dirty:
            return None
        self._dirty = False
        return json.dumps(self.offsets, sort_keys=True).encode()

    def write(self, snapshot: bytes) -> None:
        write_atomic(self.path, snapshot)

    def persist(self) -> None:
        snapshot = self.snapshot()
        if snapshot is not None:
            self.write(snapshot)
