"""Invariant events: the broken protocol invariants a model process observes.

The model does what RocketMQ and DLedger do, so where the real system would
obey a leader and lose committed data, the model obeys too; it does not
refuse quietly. What it can observe of such a breach (a committed entry cut, a
commit index going back, two leaders in one term, truncation below the confirm
offset) is written here, one JSON line per breach, to
`<data_dir>/invariants.jsonl`:

    {"kind": "raft-committed-entries-cut", "node": "n1", "time": 1732770000.123,
     "details": {...}}

`time` is the node's wall clock (Unix seconds). The deployer collects the file
with the process's log, and the `invariants` checker turns every line into a
safety anomaly (docs/invariants.md lists the kinds).
"""
from __future__ import annotations

import json
import logging
import os
import time
from typing import Any

FILE_NAME = "invariants.jsonl"

# kind -> what was broken (the checker and docs/invariants.md use the same table)
KINDS = {
    "raft-committed-entries-cut": "a follower cut committed Raft entries on its leader's order",
    "raft-commit-index-back": "a Raft commit index went back",
    "raft-two-leaders-one-term": "two Raft leaders claimed the same term",
    "ha-truncated-below-confirm": "a replica truncated its commit log below the confirm offset it had learned",
}


class InvariantLog:
    """Appends invariant events of one node to its data directory (and logs them)."""

    def __init__(self, data_dir: str | os.PathLike[str], node: str,
                 log: logging.Logger | None = None) -> None:
        self.path = os.path.join(os.fspath(data_dir), FILE_NAME)
        self.node = node
        self.log = log or logging.getLogger(f"invariants.{node}")

    def breach(self, kind: str, **details: Any) -> dict[str, Any]:
        """Record one broken invariant of kind `kind` (one of KINDS) and return the event."""
        if kind not in KINDS:
            raise ValueError(f"unknown invariant kind {kind!r}")
        event = {"kind": kind, "node": self.node, "time": round(time.time(), 6), "details": details}
        line = json.dumps(event, sort_keys=True, default=str) + "\n"
        self.log.error("invariant broken: %s (%s)", KINDS[kind], line.strip())
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            # one write of one line with O_APPEND: several writers of one process never interleave
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)
        except OSError as exc:  # a full or failing disk must not stop the node; the log has it
            self.log.error("could not write invariant event to %s: %s", self.path, exc)
        return event

