"""Anomaly classes: what "the same failure" means when a shrink compares runs.

A run's results.json names its anomalies per checker; a class is the kind of
anomaly, not its count or its messages (two runs losing different messages
lose messages alike). A candidate fails "the same way" as the original when
its results show the target class, whatever else they show.
"""
from __future__ import annotations

from typing import Any

# queue counts -> class, in the order a shrink picks its default target
QUEUE_CLASSES = (
    ("lost", "lost"),
    ("lost_after_consume", "lost-after-consume"),
    ("inconsistent_offsets", "inconsistent-offsets"),
    ("poll_skip", "poll-skip"),
    ("unexpected", "unexpected"),
    ("recovered_fail", "recovered-fail"),
    ("duplicated", "duplicated"),
    ("nonmonotonic_poll", "nonmonotonic-poll"),
)
# other checkers whose `valid: false` is a class of its own
CHECKER_CLASSES = (("linearizable", "non-linearizable"), ("order", "out-of-order"), ("rto", "slow-recovery"))
PRIORITY = tuple(name for _, name in QUEUE_CLASSES[:3]) + ("non-linearizable",) + tuple(
    name for _, name in QUEUE_CLASSES[3:]) + ("out-of-order", "slow-recovery")
DUPLICATE_COUNTS = {"duplicated", "nonmonotonic_poll"}


def classes(results: dict[str, Any]) -> frozenset[str]:
    """The anomaly classes of one run's results.json (empty for a valid run)."""
    checkers = results.get("checkers") or {}
    found = set()
    queue = checkers.get("queue") or {}
    if queue.get("valid") is False:
        counts = queue.get("counts") or {}
        tolerated = queue.get("duplicates_allowed", True)
        for count, name in QUEUE_CLASSES:
            if counts.get(count) and not (tolerated and count in DUPLICATE_COUNTS):
                found.add(name)
    for checker, name in CHECKER_CLASSES:
        if (checkers.get(checker) or {}).get("valid") is False:
            found.add(name)
    for checker, section in checkers.items():
        if isinstance(section, dict) and section.get("valid") is False and checker not in (
                "queue", *(c for c, _ in CHECKER_CLASSES)):
            found.add(checker)
    return frozenset(found)


def default_target(found: frozenset[str]) -> str | None:
    """The class a shrink keeps by default: the first of PRIORITY the run shows."""
    for name in PRIORITY:
        if name in found:
            return name
    return min(found) if found else None
