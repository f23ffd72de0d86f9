"""Run a fault schedule against a live cluster, record it, and always heal.

Blocking by design (SSH calls block): the run lifecycle starts it in a
thread next to the asyncio workloads and sets `stop_event` to end it early.
Whatever happens - the schedule ends, stop_event is set, a fault fails, an
exception or Ctrl-C arrives - active faults are stopped and the journal is
healed before `run` returns or raises.
"""
from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import nuclei
from faults import registry
from faults.context import FaultContext, FaultError
from faults.schedule import ScheduledEvent
from faults.targets import normalize_roles
from nuclei.heal import HealReport


@dataclass(frozen=True)
class ActiveFault:
    """A fault that is on right now (for progress displays)."""

    name: str
    window: int
    targets: tuple[str, ...]
    since_ns: int

    def __str__(self) -> str:
        return f"{self.name} on {', '.join(self.targets)}" if self.targets else self.name


def nemesis_event(fault: str, phase: str, time_ns: int, targets: Iterable[str] = (),
                  grudge: dict[str, list[str]] | None = None, error: str | None = None,
                  **extra: Any) -> dict[str, Any]:
    """One nemesis.jsonl line in the history format (docs/history-format.md)."""
    value = {"phase": phase, "targets": list(targets), "grudge": grudge, **extra}
    return {"process": "nemesis", "type": "info", "f": fault, "key": None, "value": value,
            "time": time_ns, "node": None, "error": error}


class ScheduleRunner:
    """Executes schedule events at their offsets; `current` says what is on."""

    def __init__(self, ctx: FaultContext, schedule: Iterable[ScheduledEvent],
                 on_change: Callable[[list[ActiveFault]], None] | None = None) -> None:
        self.ctx = ctx
        self.schedule = schedule
        self.on_change = on_change
        self.heal_report: HealReport | None = None
        self._active: dict[tuple[int, int], tuple[ActiveFault, Any, Any]] = {}
        self._lock = threading.Lock()

    @property
    def active(self) -> list[ActiveFault]:
        with self._lock:
            return [fault for fault, _, _ in self._active.values()]

    @property
    def current(self) -> str:
        """"quiet" or what is on, e.g. "random-partition on n1, n2 + random-kill on n4"."""
        active = self.active
        return " + ".join(map(str, active)) if active else "quiet"

    def run(self, stop_event: threading.Event) -> None:
        """Play the schedule until it ends or `stop_event` is set; heal in every case."""
        began = time.monotonic()
        try:
            for event in self.schedule:
                if stop_event.wait(max(0.0, began + event.offset - time.monotonic())):
                    break
                if event.phase == "start":
                    self._start(event)
                else:
                    self._stop((event.window, event.slot))
        finally:
            with _sigint_deferred():
                self._heal()

    def _start(self, event: ScheduledEvent) -> None:
        name = event.fault.name
        ctx = self.ctx.with_rng(event.seed)
        if event.roles is not None:
            ctx = replace(ctx, target_roles=normalize_roles(list(event.roles)))
        began = ctx.now_ns()
        try:
            nemesis = registry.create(name, **dict(event.fault.options))
            handle = nemesis.start(ctx)
        except Exception as error:  # noqa: BLE001 - record it, go on with the schedule
            text = f"{type(error).__name__}: {error}" if not isinstance(error, FaultError) else str(error)
            self.ctx.emit(nemesis_event(name, "start", began, error=text, window=event.window))
            self.ctx.emit(nemesis_event(name, "stop", ctx.now_ns(), error=text, window=event.window))
            return
        targets = list(getattr(handle, "targets", []) or [])
        extra = dict(getattr(handle, "details", {}) or {})
        self.ctx.emit(nemesis_event(name, "start", began, targets, getattr(handle, "grudge", None),
                                    window=event.window, **extra))
        with self._lock:
            self._active[(event.window, event.slot)] = (
                ActiveFault(name, event.window, tuple(targets), began), nemesis, handle)
        self._changed()

    def _stop(self, key: tuple[int, int]) -> None:
        with self._lock:
            item = self._active.pop(key, None)
        if item is None:
            return
        fault, nemesis, handle = item
        error = None
        try:
            nemesis.stop(self.ctx, handle)
        except Exception as exc:  # noqa: BLE001 - the final heal retries; the event says so
            error = f"{type(exc).__name__}: {exc}"
        self.ctx.emit(nemesis_event(fault.name, "stop", self.ctx.now_ns(), fault.targets,
                                    getattr(handle, "grudge", None), error=error, window=fault.window))
        self._changed()

    def _heal(self) -> None:
        for key in reversed(list(self._active)):
            try:
                self._stop(key)
            except Exception:  # noqa: BLE001 - e.g. a failing display; nuclei.heal below undoes it all
                pass
        self.heal_report = nuclei.heal(self.ctx.pool, self.ctx.journal, start=self.ctx.start_process)
        if not self.heal_report.ok:
            raise FaultError("heal incomplete, run `chaos heal` for this run: "
                             + "; ".join(self.heal_report.errors))

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self.active)


def run_schedule(ctx: FaultContext, schedule: Iterable[ScheduledEvent], stop_event: threading.Event,
                 on_change: Callable[[list[ActiveFault]], None] | None = None) -> ScheduleRunner:
    """Run `schedule` (e.g. `faults.events(seed, spec)`) until it ends or `stop_event`
    is set, always healing at the end; returns the finished runner."""
    runner = ScheduleRunner(ctx, schedule, on_change)
    runner.run(stop_event)
    return runner


@contextmanager
def _sigint_deferred() -> Iterator[None]:
    """While healing in the main thread, a second Ctrl-C waits until the heal is done."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pressed: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: pressed.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if pressed:
            raise KeyboardInterrupt
