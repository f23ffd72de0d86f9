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
from faults.triggers import NEVER, fire_on, trigger_of
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
        # State-triggered faults: armed windows waiting on their own thread, and what each did
        # ({fault, window, slot, start, trigger, fired_at}: offsets in seconds, NEVER if it did not fire).
        self._armed: dict[tuple[int, int], threading.Thread] = {}
        self._halt = threading.Event()
        self._began = time.monotonic()
        self._stops: dict[tuple[int, int], float] = {}
        self.firings: list[dict[str, Any]] = []

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
        began = self._began = time.monotonic()
        if isinstance(self.schedule, (list, tuple)):  # an armed window watches until its stop
            self._stops = {(e.window, e.slot): e.offset for e in self.schedule if e.phase == "stop"}
        try:
            for event in self.schedule:
                if stop_event.wait(max(0.0, began + event.offset - time.monotonic())):
                    break
                if event.phase == "start":
                    self._start(event)
                else:
                    self._stop((event.window, event.slot))
        finally:
            self._halt.set()
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
            if trigger_of(nemesis) is not None:
                self._arm(event, ctx, nemesis)
                return
            handle = nemesis.start(ctx)
        except Exception as error:  # noqa: BLE001 - record it, go on with the schedule
            self._failed(event, ctx, began, error)
            return
        self._started(event, nemesis, handle, began)

    def _failed(self, event: ScheduledEvent, ctx: FaultContext, began: int, error: Exception) -> None:
        name = event.fault.name
        text = f"{type(error).__name__}: {error}" if not isinstance(error, FaultError) else str(error)
        self.ctx.emit(nemesis_event(name, "start", began, error=text, window=event.window))
        self.ctx.emit(nemesis_event(name, "stop", ctx.now_ns(), error=text, window=event.window))

    def _arm(self, event: ScheduledEvent, ctx: FaultContext, nemesis: Any) -> None:
        """Watch for the nemesis's trigger on a thread of its own until the window's stop
        (a replay: fire at the recorded offset); the window's stop waits for it."""
        key = (event.window, event.slot)
        record = {"fault": event.fault.label(), "window": event.window, "slot": event.slot,
                  "start": event.offset, "trigger": nemesis.trigger.name, "fired_at": NEVER}
        self.firings.append(record)
        stop_at = self._stops.get(key)
        deadline = None if stop_at is None else self._began + stop_at

        def watch() -> None:
            began = ctx.now_ns()
            try:
                if event.fired_at == NEVER:
                    return
                if event.fired_at is not None:  # a replay fires where the recorded run did
                    at = self._began + float(event.fired_at)
                    if (deadline is not None and at > deadline) or self._halt.wait(max(0.0, at - time.monotonic())):
                        return  # a window shortened (by shrink) to end before that instant: no fault
                    began, fired_at = ctx.now_ns(), float(event.fired_at)
                    handle = nemesis.start(ctx)
                else:
                    fired = fire_on(ctx, nemesis, deadline, self._halt)
                    if fired is None:
                        return
                    handle, instant = fired
                    began = ctx.now_ns() - int((time.monotonic() - instant) * 1e9)  # history time of the instant
                    fired_at = round(instant - self._began, 3)
            except Exception as error:  # noqa: BLE001 - record it, go on with the schedule
                record["error"] = str(error)
                self._failed(event, ctx, began, error)
                return
            record["fired_at"] = fired_at
            self._started(event, nemesis, handle, began, trigger=nemesis.trigger.name,
                          armed_at_s=event.offset, fired_at_s=fired_at)

        thread = threading.Thread(target=watch, name=f"trigger-{event.window}-{event.slot}", daemon=True)
        self._armed[key] = thread
        thread.start()

    def _started(self, event: ScheduledEvent, nemesis: Any, handle: Any, began: int, **more: Any) -> None:
        name = event.fault.name
        targets = list(getattr(handle, "targets", []) or [])
        extra = {**more, **dict(getattr(handle, "details", {}) or {})}
        self.ctx.emit(nemesis_event(name, "start", began, targets, getattr(handle, "grudge", None),
                                    window=event.window, **extra))
        with self._lock:
            self._active[(event.window, event.slot)] = (
                ActiveFault(name, event.window, tuple(targets), began), nemesis, handle)
        self._changed()

    def _stop(self, key: tuple[int, int]) -> None:
        armed = self._armed.pop(key, None)
        if armed is not None:
            armed.join()  # it watches until this stop's offset at the latest
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
        for thread in list(self._armed.values()):
            thread.join()  # _halt is set: a watch ends within a sample
        self._armed.clear()
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
