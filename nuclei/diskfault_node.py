"""Disk faults inside the crash file system's daemon (runs on the node, stdlib only).

A rule says which operations (`read`, `write`, `fsync`) on which files (`commitlog`,
`consumequeue`, `metadata`, `raftlog`, or `all`) fail with an errno (EIO, ENOSPC) with
a probability, or wait `delay_ms` first. A full disk also reports no free space to
statfs (what RocketMQ's disk check reads). The daemon holds one set of rules at a time:
`set` replaces it, `clear` removes it (nothing is left on the node: the rules live in
the daemon's memory only).
"""
from __future__ import annotations

import errno
import random
import threading
import time
from typing import Any

OPERATIONS = ("read", "write", "fsync")
FILE_KINDS = ("commitlog", "consumequeue", "metadata", "raftlog", "all")
KINDS = {"error": errno.EIO, "full": errno.ENOSPC, "slow": 0}
MAX_DELAY_MS = 10_000


def file_kind(path: str) -> str:
    """Which of the SUT's files `path` (under the mount) is: the commit log, a consume
    queue, the Raft log (the model's `raftstore/`, DLedger's `dledger-*/data/`), else
    metadata (configs, offsets, checkpoints, epochs)."""
    parts = [p for p in path.split("/") if p]
    if "consumequeue" in parts:
        return "consumequeue"
    if "raftstore" in parts or any(a.startswith("dledger-") and b == "data" for a, b in zip(parts, parts[1:])):
        return "raftlog"
    if "commitlog" in parts:
        return "commitlog"
    return "metadata"


def check_rule(rule: dict[str, Any]) -> dict[str, Any]:
    """A rule with its defaults, or ValueError saying what is wrong."""
    kind = rule.get("kind")
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    ops = list(rule.get("ops") or OPERATIONS)
    files = list(rule.get("files") or ["all"])
    bad = [o for o in ops if o not in OPERATIONS] + [f for f in files if f not in FILE_KINDS]
    if bad:
        raise ValueError(f"unknown operation or file kind: {', '.join(map(str, bad))}")
    probability = float(rule.get("probability", 1.0))
    delay_ms = int(rule.get("delay_ms", 0))
    if not 0 < probability <= 1 or not 0 <= delay_ms <= MAX_DELAY_MS:
        raise ValueError("probability must be in (0, 1] and delay_ms in [0, 10000]")
    return {"kind": kind, "ops": ops, "files": files, "probability": probability, "delay_ms": delay_ms}


class DiskFaults:
    """The rules in force and what they did (counts per kind and operation)."""

    def __init__(self) -> None:
        self.rules: list[dict[str, Any]] = []
        self.counts: dict[str, int] = {}
        self.rng = random.Random()
        self.lock = threading.Lock()

    def set(self, rules: list[dict[str, Any]]) -> None:
        checked = [check_rule(r) for r in rules]
        with self.lock:
            self.rules, self.counts = checked, {}

    def clear(self) -> dict[str, int]:
        with self.lock:
            done, self.rules, self.counts = self.counts, [], {}
        return done

    def status(self) -> dict[str, Any]:
        with self.lock:
            return {"rules": list(self.rules), "counts": dict(self.counts)}

    def full(self) -> bool:
        return any(r["kind"] == "full" for r in self.rules)

    def check(self, op: str, path: str) -> None:
        """Before an operation: wait, or raise the rule's OSError, or do nothing."""
        rules = self.rules
        if not rules:
            return
        kind = file_kind(path)
        for rule in rules:
            if op not in rule["ops"] or not ("all" in rule["files"] or kind in rule["files"]):
                continue
            if rule["probability"] < 1 and self.rng.random() >= rule["probability"]:
                continue
            key = f"{rule['kind']}:{op}"
            with self.lock:
                self.counts[key] = self.counts.get(key, 0) + 1
            if rule["kind"] == "slow":
                time.sleep(rule["delay_ms"] / 1000)
            else:
                raise OSError(KINDS[rule["kind"]], f"injected {rule['kind']} on {op} of {kind}")
