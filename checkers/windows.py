"""Fault windows: pairing nemesis start/stop events into intervals (pure).

A window is half-open, [start, stop): an operation belongs to it when it was
invoked at or after the start and before the stop. A fault that is never
stopped stays open to the end of the run (stop = None). Faults compose, so
windows may overlap; `segments` cuts the timeline into pieces with a fixed set
of active windows, which lets Spark tag every operation with one range join.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

LONG_MIN = -(2**63)
LONG_MAX = 2**63 - 1


@dataclass(frozen=True)
class FaultEvent:
    """One validated line of nemesis.jsonl."""

    fault: str
    phase: str  # "start" | "stop"
    time: int
    value: dict[str, Any] = field(default_factory=dict)
    order: int = 0  # position in the file: breaks ties between equal times

    @property
    def targets(self) -> list[Any]:
        targets = self.value.get("targets")
        return list(targets) if isinstance(targets, list) else []


@dataclass(frozen=True)
class FaultWindow:
    """A fault that was in effect from `start` until `stop` (ns; None = never stopped)."""

    id: int
    fault: str
    start: int
    stop: int | None
    targets: list[Any]
    details: dict[str, Any]

    def contains(self, time: int) -> bool:
        return self.start <= time and (self.stop is None or time < self.stop)

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "fault": self.fault, "start_s": self.start / 1e9,
                "stop_s": None if self.stop is None else self.stop / 1e9,
                "targets": self.targets, "details": self.details}


def fault_windows(events: Iterable[FaultEvent]) -> tuple[list[FaultWindow], list[str]]:
    """Pair starts with stops of the same fault; returns windows and problems found.

    A stop closes the open window of the same fault with the same targets, or
    else the oldest open window of that fault (a nemesis may only know its
    targets when it starts). A stop with nothing open is a problem, not a crash.
    """
    open_windows: list[dict[str, Any]] = []
    closed: list[dict[str, Any]] = []
    problems: list[str] = []
    for event in sorted(events, key=lambda e: (e.time, e.order)):
        if event.phase == "start":
            open_windows.append({"event": event, "stop": None})
            continue
        same_fault = [w for w in open_windows if w["event"].fault == event.fault]
        same_targets = [w for w in same_fault if w["event"].targets == event.targets]
        match = (same_targets or same_fault or [None])[0]
        if match is None:
            problems.append(f"stop of {event.fault} at {event.time / 1e9:.3f}s has no matching start")
            continue
        match["stop"] = event.time
        open_windows.remove(match)
        closed.append(match)
    ordered = sorted(closed + open_windows, key=lambda w: (w["event"].time, w["event"].order))
    windows = [
        FaultWindow(id=i, fault=w["event"].fault, start=w["event"].time, stop=w["stop"],
                    targets=w["event"].targets,
                    details={k: v for k, v in w["event"].value.items() if k not in ("phase", "targets")})
        for i, w in enumerate(ordered)
    ]
    return windows, problems


def segments(windows: list[FaultWindow]) -> list[tuple[int, int, list[int]]]:
    """Cut (-inf, +inf) into [lo, hi) pieces, each with the ids of the windows active in it."""
    bounds = sorted({LONG_MIN, LONG_MAX} | {w.start for w in windows}
                    | {w.stop for w in windows if w.stop is not None})
    return [(lo, hi, [w.id for w in windows if w.contains(lo)])
            for lo, hi in zip(bounds, bounds[1:])]
