"""Disk-fault nuclei: have a node's crash file system (nuclei.lazyfs) fail, fill up or
slow down chosen operations on chosen files, and clear that again.

The rules live in the FUSE daemon's memory (nuclei/diskfault_node.py): nothing is
written on the node, and unmounting the file system ends them too. The action is
journaled before it is applied, so `heal` clears it even after the harness was killed.
A crash that power-cycles the node (`reset`) clears them early; clearing is idempotent,
so the fault's own undo still succeeds afterwards.
"""
from __future__ import annotations

import json
from typing import Any

from nuclei import lazyfs
from nuclei.journal import Journal, JournalEntry
from nuclei.remote import NucleusError

ACTION = "disk-fault"


def apply(pool: Any, journal: Journal, node: str, workdir: str, mountpoint: str,
          rules: list[dict[str, Any]]) -> JournalEntry:
    """Put `rules` in force on the node's crash file system (replacing any); verified."""
    entry = journal.record(ACTION, node, workdir=workdir, mountpoint=mountpoint, rules=rules)
    reply = lazyfs.ask(pool, node, workdir, mountpoint, "disk-set", "--rules", json.dumps(rules))
    if len(reply.get("rules") or []) != len(rules):
        raise NucleusError(f"node {node}: the crash file system at {mountpoint} did not take the disk "
                           f"fault rules (it holds {reply.get('rules')})")
    return entry


def status(pool: Any, node: str, workdir: str, mountpoint: str) -> dict[str, Any]:
    """The rules in force and how often each kind hit each operation."""
    return lazyfs.ask(pool, node, workdir, mountpoint, "disk-status")


def reset(pool: Any, node: str, workdir: str, mountpoint: str) -> dict[str, Any]:
    """Clear whatever disk faults are in force on the node's crash file system (a power cycle
    resetting a transient device fault) and verify none is left; returns the rules that were
    in force and their hits. Not journaled and no journal entry is marked: each disk fault's
    own stop (or the heal) still clears, which finds nothing left, and marks its entry undone."""
    rules = status(pool, node, workdir, mountpoint).get("rules") or []
    return {"rules": rules, "hits": _clear(pool, node, workdir, mountpoint)}


def _clear(pool: Any, node: str, workdir: str, mountpoint: str) -> dict[str, int]:
    """Remove every rule, verified; the hits counted until then."""
    counts = lazyfs.ask(pool, node, workdir, mountpoint, "disk-clear").get("counts") or {}
    left = status(pool, node, workdir, mountpoint).get("rules")
    if left:
        raise NucleusError(f"node {node}: disk fault rules are still in force at {mountpoint}: {left}")
    return counts


def undo(pool: Any, journal: Journal, entry: JournalEntry) -> dict[str, int]:
    """Clear the node's disk faults and verify none is left; returns the hits counted.
    A file system no longer mounted holds no rules: nothing to clear."""
    params = entry.params
    node, workdir, mountpoint = entry.node, params["workdir"], params["mountpoint"]
    counts: dict[str, int] = {}
    if lazyfs.daemon_running(pool, node, workdir, mountpoint):
        counts = _clear(pool, node, workdir, mountpoint)
    journal.mark_undone(entry)
    return counts
