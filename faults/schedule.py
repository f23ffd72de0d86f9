"""Fault schedules: a pure function from (seed, spec) to timed start/stop events.

OpenChaos alternates 30 s quiet and 30 s fault; that is the default here.
Everything random (jitter, which fault comes next, where an overlapping fault
sits inside a window, and the seed each fault start uses to pick its targets)
is drawn from the run seed, so the same seed replays the same faults at the
same offsets.
"""
from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Phase = Literal["start", "stop"]


class ScheduleError(ValueError):
    """A schedule spec that cannot produce a schedule (bad numbers, no faults)."""


@dataclass(frozen=True)
class FaultSpec:
    """A fault name plus its options, e.g. fixed targets or a loss probability."""

    name: str
    options: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> FaultSpec:
        """`name` or `name:key=value[:key=value]`; comma-separated values become lists.

        Examples: `random-kill`, `random-loss:probability=0.3`,
        `fixed-partition:targets=n1,n2`.
        """
        name, *pairs = text.strip().split(":")
        options: dict[str, Any] = {}
        for pair in pairs:
            key, sep, value = pair.partition("=")
            if not sep or not key.strip():
                raise ScheduleError(f"fault {text!r}: option {pair!r} is not key=value")
            options[key.strip()] = _parse_value(key.strip(), value.strip())
        return cls(name.strip(), options)

    def label(self) -> str:
        """The text form `parse` reads back."""
        parts = [self.name]
        for key, value in self.options.items():
            shown = ",".join(map(str, value)) if isinstance(value, (list, tuple)) else value
            parts.append(f"{key}={shown}")
        return ":".join(parts)


def _parse_value(key: str, value: str) -> Any:
    if key == "targets" or "," in value:
        return [item.strip() for item in value.split(",") if item.strip()]
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


@dataclass(frozen=True)
class ScheduleSpec:
    """How faults follow each other in time (seconds).

    - `interval`: quiet time before each fault window;
    - `duration`: how long each fault of the cycle stays on;
    - `recovery`: fault-free time guaranteed after every fault, whatever the
      jitter, and before the end of a bounded schedule;
    - `jitter`: each interval and duration is drawn from x * [1 - j, 1 + j];
    - `order`: `cycle` takes `faults` in turn, `random` draws one per window;
    - `overlap`: faults started inside every window and stopped before it
      ends (a kill overlapping a partition).
    """

    faults: Sequence[FaultSpec]
    interval: float = 30.0
    duration: float = 30.0
    recovery: float = 0.0
    jitter: float = 0.0
    order: Literal["cycle", "random"] = "cycle"
    overlap: Sequence[FaultSpec] = ()

    def check(self) -> None:
        """Raise ScheduleError naming the first bad field."""
        if not self.faults:
            raise ScheduleError("schedule: no faults given")
        if self.interval < 0 or self.recovery < 0:
            raise ScheduleError("schedule: interval and recovery must be >= 0 seconds")
        if self.duration <= 0:
            raise ScheduleError(f"schedule: duration must be > 0 seconds, got {self.duration}")
        if not 0 <= self.jitter < 1:
            raise ScheduleError(f"schedule: jitter must be in [0, 1), got {self.jitter}")
        if self.order not in ("cycle", "random"):
            raise ScheduleError(f"schedule: order must be cycle or random, got {self.order!r}")


@dataclass(frozen=True)
class ScheduledEvent:
    """One start or stop of one fault.

    `window` counts fault windows, `slot` tells the main fault (0) from the
    overlapping ones (1, 2, ...) of one window, and `seed` seeds the RNG the
    start draws its targets from. `roles`, when given, limits this fault's
    targets to those roles instead of the run's (an explicit schedule's window).
    `fired_at`, for a state-triggered fault replayed from a schedule file, is the
    offset it fired at in the recorded run ("never": it did not fire).
    """

    offset: float
    fault: FaultSpec
    phase: Phase
    window: int
    slot: int
    seed: int
    roles: tuple[str, ...] | None = None
    fired_at: float | str | None = None


def events(seed: int | str, spec: ScheduleSpec, total: float | None = None) -> Iterator[ScheduledEvent]:
    """Start/stop events in time order; endless unless `total` seconds bounds them.

    With `total`, no window starts that could not stop `recovery` seconds
    before the end.
    """
    spec.check()
    rng = random.Random(f"chaos-schedule:{seed}")
    now = 0.0
    window = 0
    while True:
        quiet = _jittered(rng, spec.interval, spec.jitter)
        if window > 0:
            quiet = max(quiet, spec.recovery)
        start = now + quiet
        length = _jittered(rng, spec.duration, spec.jitter)
        stop = start + length
        if total is not None and stop + spec.recovery > total:
            return
        main = spec.faults[window % len(spec.faults)] if spec.order == "cycle" else rng.choice(spec.faults)
        slots = [(main, start, stop)]
        for extra in spec.overlap:
            # Starts in the first half, stops in the second: the two faults
            # are both on for at least a fifth of the window.
            slots.append((extra, start + length * rng.uniform(0.1, 0.4),
                          start + length * rng.uniform(0.6, 0.9)))
        batch = []
        for slot, (fault, begin, end) in enumerate(slots):
            fault_seed = rng.getrandbits(63)
            batch.append(ScheduledEvent(round(begin, 3), fault, "start", window, slot, fault_seed))
            batch.append(ScheduledEvent(round(end, 3), fault, "stop", window, slot, fault_seed))
        batch.sort(key=lambda event: (event.offset, event.phase == "start"))
        yield from batch
        now = stop
        window += 1


def plan(seed: int | str, spec: ScheduleSpec, total: float) -> list[ScheduledEvent]:
    """The whole bounded schedule as a list (what `chaos run --dry-run` would show)."""
    return list(events(seed, spec, total))


def _jittered(rng: random.Random, value: float, jitter: float) -> float:
    return value if jitter == 0 else value * rng.uniform(1 - jitter, 1 + jitter)
