"""Raw history events (docs/history-format.md) and the Jepsen process rules.

Each worker writes its own JSONL file, one event per line, flushed as it is
written so that a crash or Ctrl-C keeps everything recorded so far. A worker
acts as one logical process at a time: every invoke is followed by exactly one
completion of the same process, and a process whose operation ended `info`
(indeterminate) is retired: the worker continues as process id + concurrency,
so process ids never collide between workers (Jepsen's rule).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TextIO

EVENT_TYPES = ("invoke", "ok", "fail", "info")
COMPLETION_TYPES = ("ok", "fail", "info")


class Clock:
    """Nanoseconds since the run started, on the control node's monotonic clock."""

    def __init__(self, origin_ns: int | None = None) -> None:
        self.origin_ns = time.monotonic_ns() if origin_ns is None else origin_ns

    def now(self) -> int:
        return time.monotonic_ns() - self.origin_ns


def event(process: int | str, type: str, f: str, key: Any = None, value: Any = None,
          time: int = 0, node: str | None = None, error: str | None = None) -> dict[str, Any]:
    """One history event with every field of the schema, in schema order."""
    if type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {type!r}")
    return {"process": process, "type": type, "f": f, "key": key, "value": value,
            "time": time, "node": node, "error": error}


class EventLog:
    """An append-only JSONL file of events, flushed line by line."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file: TextIO = open(path, "a", encoding="utf-8")

    def write(self, ev: dict[str, Any]) -> None:
        self._file.write(json.dumps(ev, separators=(",", ":"), default=str) + "\n")
        self._file.flush()

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()

    def __enter__(self) -> "EventLog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ProcessRuleError(RuntimeError):
    """A worker broke the invoke/complete discipline: a bug in the workload, not the SUT."""


@dataclass
class Pending:
    f: str
    key: Any
    value: Any


class WorkerHistory:
    """The history of one worker: tracks its current process id and pending op.

    `on_event` (optional) sees every event after it is written, e.g. for live
    progress counters.
    """

    def __init__(self, log: EventLog, worker: int, concurrency: int, clock: Clock,
                 on_event: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.log, self.worker, self.concurrency, self.clock = log, worker, concurrency, clock
        self.process = worker
        self.pending: Pending | None = None
        self.on_event = on_event

    def _emit(self, ev: dict[str, Any]) -> dict[str, Any]:
        self.log.write(ev)
        if self.on_event is not None:
            self.on_event(ev)
        return ev

    def invoke(self, f: str, key: Any = None, value: Any = None) -> dict[str, Any]:
        if self.pending is not None:
            raise ProcessRuleError(
                f"worker {self.worker}: process {self.process} invoked {f} while {self.pending.f} is pending")
        self.pending = Pending(f, key, value)
        return self._emit(event(self.process, "invoke", f, key, value, self.clock.now()))

    def complete(self, type: str, value: Any = None, node: str | None = None,
                 error: str | None = None) -> dict[str, Any]:
        """Record the completion of the pending op; `info` retires the process id."""
        if type not in COMPLETION_TYPES:
            raise ProcessRuleError(f"worker {self.worker}: {type!r} is not a completion type")
        if self.pending is None:
            raise ProcessRuleError(f"worker {self.worker}: completion {type} without an invoke")
        op, self.pending = self.pending, None
        ev = self._emit(event(self.process, type, op.f, op.key, value, self.clock.now(), node, error))
        if type == "info":
            self.process += self.concurrency
        return ev

    def close_pending(self, error: str) -> None:
        """Close a pending op as `info` (the run is being cut short: outcome unknown)."""
        if self.pending is not None:
            self.complete("info", self.pending.value, error=error)


def worker_file(history_dir: Path, worker: int) -> Path:
    return history_dir / f"worker-{worker:03d}.jsonl"


def read_events(path: Path) -> list[dict[str, Any]]:
    """Read one JSONL event file; a malformed line is reported with file and line number."""
    events = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                ev = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: malformed history line: {exc.msg}") from None
            if not isinstance(ev, dict) or "type" not in ev or "process" not in ev:
                raise ValueError(f"{path}:{lineno}: history line is not an event object")
            events.append(ev)
    return events


def read_history(run_dir: Path) -> list[dict[str, Any]]:
    """All client events of a run (every worker file), ordered by time."""
    events: list[dict[str, Any]] = []
    for path in sorted((run_dir / "history").glob("*.jsonl")):
        events.extend(read_events(path))
    events.sort(key=lambda ev: ev.get("time") or 0)
    return events
