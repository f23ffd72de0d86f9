"""The shrink search, pure: which smaller schedules to try, given a way to try one.

The search never runs anything itself: `trial(schedule)` runs one try of a
candidate and returns the anomaly classes it showed (harness.shrink.trials
does that through the run lifecycle and the checkers; unit tests pass a
fake). Steps, each keeping a change only if the candidate still fails:

1. `windows`: delta debugging (ddmin, Zeller and Hildebrandt 2002) over the
   set of fault windows; never below one window.
2. `compact`: the windows moved to start early and the main phase cut to end
   just after the last one.
3. `window-length`: each window halved while the candidate still fails.
4. `concurrency`, `rate`, `queues` / `keys`: halved while it still fails.
5. `confirm`: the minimal schedule tried again until it has `confirm` tries,
   for its reproduction rate.

Chaos runs are not deterministic, so a candidate is tried up to `tries` times
and fails when at least `share` of its tries failed with the target anomaly
class; trying stops as soon as the answer is known. Budgets of runs and
seconds stop the search early; the best schedule found so far is kept.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from harness.schedule import Schedule

T = TypeVar("T")

# Lower bounds of what the search lowers (the workloads refuse less anyway).
MIN_WINDOW_S = 0.5
MIN_RATE = 5.0
LEAD_S = 1.0      # quiet before the first window: acknowledged writes exist when it starts
TAIL_S = 0.5      # main phase left after the last window ends


@dataclass(frozen=True)
class TryResult:
    """What one try of a candidate showed: its anomaly classes and the run it made."""

    classes: frozenset[str]
    run: str | None = None


class Rejected(Exception):
    """A candidate that cannot run (e.g. the workload refuses its shape): not failing, no run spent."""


class BudgetExhausted(Exception):
    """No runs or seconds left."""


@dataclass(frozen=True)
class Settings:
    """How hard to search: tries per candidate, the failing share, budgets."""

    tries: int = 2
    share: float = 0.5
    max_runs: int = 16
    max_seconds: float = 900.0
    confirm: int = 3

    @property
    def needed(self) -> int:
        """Failing tries a candidate needs out of `tries`."""
        return max(1, math.ceil(self.share * self.tries - 1e-9))


@dataclass
class Attempt:
    """One candidate: the step that made it, its schedule, the result of each try."""

    index: int
    step: str
    schedule: Schedule
    tries: list[dict[str, Any]] = field(default_factory=list)
    failing: bool | None = None
    note: str | None = None

    @property
    def failed_tries(self) -> int:
        return sum(1 for t in self.tries if t["same_failure"])


@dataclass
class Outcome:
    """Where the search ended: the minimal schedule, how often it failed, why it stopped."""

    original: Schedule
    minimal: Schedule
    status: str                  # done | budget | interrupted
    runs: int
    seconds: float
    minimal_tries: int
    minimal_failed: int

    @property
    def reproduction_rate(self) -> float:
        return self.minimal_failed / self.minimal_tries if self.minimal_tries else 0.0


def ddmin(items: Sequence[T], fails: Callable[[list[T]], bool]) -> list[T]:
    """A 1-minimal failing subsequence of `items` (which fails); never empty."""
    current = list(items)
    n = 2
    while len(current) >= 2:
        chunks = _split(current, n)
        reduced = next((chunk for chunk in chunks if fails(chunk)), None)
        if reduced is not None:
            current, n = reduced, 2
            continue
        if n > 2:  # with two chunks each complement is the other chunk, already tried
            complement = next((rest for rest in (_without(current, chunk) for chunk in chunks) if fails(rest)), None)
            if complement is not None:
                current, n = complement, max(n - 1, 2)
                continue
        if n >= len(current):
            break
        n = min(len(current), 2 * n)
    return current


def _split(items: list[T], n: int) -> list[list[T]]:
    size, extra = divmod(len(items), n)
    chunks, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        chunks.append(items[start:end])
        start = end
    return [chunk for chunk in chunks if chunk]


def _without(items: list[T], chunk: list[T]) -> list[T]:
    return [item for item in items if item not in chunk]


def compacted(schedule: Schedule) -> Schedule:
    """Windows moved to start LEAD_S in (keeping their gaps), the main phase ending TAIL_S
    after the last one."""
    if not schedule.windows:
        return schedule
    shift = max(0.0, min(w.start for w in schedule.windows) - LEAD_S)
    windows = tuple(w.model_copy(update={"start": round(w.start - shift, 3)}) for w in schedule.windows)
    end = max(w.end for w in windows)
    return schedule.replace(windows=[w.model_dump() for w in windows],
                            shape={"time": round(min(schedule.shape.time, end + TAIL_S), 3)})


def size(schedule: Schedule) -> dict[str, float]:
    """What "smaller" means: windows, fault seconds, run seconds, planned operations."""
    seconds = schedule.shape.time + schedule.shape.recovery
    return {"windows": len(schedule.windows), "fault_seconds": schedule.fault_seconds,
            "seconds": round(seconds, 3), "operations": int(round(schedule.shape.rate * seconds)),
            "concurrency": schedule.shape.concurrency}


class Shrinker:
    """Runs the steps against `trial`; `best` is the smallest failing schedule so far."""

    def __init__(self, original: Schedule, trial: Callable[[Schedule], TryResult], target: str,
                 settings: Settings = Settings(), clock: Callable[[], float] = time.monotonic,
                 on_attempt: Callable[[Attempt], None] | None = None,
                 lowered: Sequence[str] = ("concurrency", "rate", "queues")) -> None:
        self.original = self.best = original
        self.trial = trial
        self.target = target
        self.settings = settings
        self.clock = clock
        self.began = clock()
        self.on_attempt = on_attempt or (lambda attempt: None)
        self.lowered = tuple(lowered)
        self.attempts: list[Attempt] = []
        self.runs = 0
        self._known: dict[str, Attempt] = {}

    # -- the steps ------------------------------------------------------------------------------
    def run(self) -> Outcome:
        """All steps until done or a budget runs out (KeyboardInterrupt propagates; `outcome`
        then says what was found)."""
        try:
            self._windows()
            self._accept_if_fails("compact", compacted(self.best))
            self._shorten_windows()
            for name in self.lowered:
                self._lower(name)
            self._confirm()
        except BudgetExhausted:
            return self.outcome("budget")
        return self.outcome("done")

    def _windows(self) -> None:
        """ddmin over window indices; every failing subset becomes `best` at once, so that a
        budget or a stop in the middle keeps it."""
        start = self.best
        if len(start.windows) < 2:
            return

        def with_windows(indices: list[int]) -> Schedule:
            return start.replace(windows=[start.windows[i].model_dump() for i in indices])

        def fails(indices: list[int]) -> bool:
            candidate = with_windows(indices)
            failing = self._fails("windows", candidate)
            if failing and len(candidate.windows) < len(self.best.windows):
                self.best = candidate
            return failing
        ddmin(list(range(len(start.windows))), fails)

    def _shorten_windows(self) -> None:
        for index in range(len(self.best.windows)):
            while self.best.windows[index].length / 2 >= MIN_WINDOW_S:
                windows = [w.model_dump() for w in self.best.windows]
                windows[index]["length"] = round(windows[index]["length"] / 2, 3)
                if not self._accept_if_fails("window-length", compacted(self.best.replace(windows=windows))):
                    break

    def _lower(self, name: str) -> None:
        floors = {"concurrency": 1, "rate": MIN_RATE, "queues": 1, "keys": 1}
        while True:
            value = getattr(self.best.shape, name)
            lower = max(floors[name], value / 2 if name == "rate" else value // 2)
            if lower >= value:
                return
            lower = round(lower, 3) if name == "rate" else int(lower)
            if not self._accept_if_fails(name, self.best.replace(shape={name: lower})):
                return

    def _confirm(self) -> None:
        attempt = self._known.get(_key(self.best))
        if attempt is None:
            return
        while len(attempt.tries) < self.settings.confirm:
            self._try(attempt)
            self.on_attempt(attempt)

    def _accept_if_fails(self, step: str, candidate: Schedule) -> bool:
        if _key(candidate) == _key(self.best) or not self._fails(step, candidate):
            return False
        self.best = candidate
        return True

    # -- trying a candidate ---------------------------------------------------------------------
    def _fails(self, step: str, candidate: Schedule) -> bool:
        """Whether `candidate` fails with the target class, trying it up to `tries` times."""
        known = self._known.get(_key(candidate))
        if known is not None and known.failing is not None:
            return known.failing
        attempt = Attempt(sum(1 for a in self.attempts if a.index) + 1, step, candidate)
        self.attempts.append(attempt)
        self._known[_key(candidate)] = attempt
        try:
            while attempt.failing is None:
                self._try(attempt)
                failed, done = attempt.failed_tries, len(attempt.tries)
                if failed >= self.settings.needed:
                    attempt.failing = True
                elif failed + self.settings.tries - done < self.settings.needed:
                    attempt.failing = False
        except Rejected as exc:
            attempt.failing, attempt.note = False, f"not run: {exc}"
        finally:
            self.on_attempt(attempt)
        return attempt.failing

    def _try(self, attempt: Attempt) -> None:
        if self.runs >= self.settings.max_runs:
            raise BudgetExhausted(f"{self.runs} runs")
        if self.clock() - self.began >= self.settings.max_seconds:
            raise BudgetExhausted(f"{self.settings.max_seconds:g}s")
        began = self.clock()
        result = self.trial(attempt.schedule)
        self.runs += 1
        attempt.tries.append({"classes": sorted(result.classes), "same_failure": self.target in result.classes,
                              "seconds": round(self.clock() - began, 3), "run": result.run})

    def record_original(self, classes: frozenset[str], run: str | None = None) -> None:
        """The original run counts as one failing try of the original schedule."""
        attempt = Attempt(0, "original", self.original, failing=True)
        attempt.tries.append({"classes": sorted(classes), "same_failure": self.target in classes,
                              "seconds": None, "run": run})
        self._known[_key(self.original)] = attempt
        self.attempts.append(attempt)
        self.on_attempt(attempt)

    def outcome(self, status: str) -> Outcome:
        attempt = self._known.get(_key(self.best))
        tries = len(attempt.tries) if attempt else 0
        return Outcome(self.original, self.best, status, self.runs, round(self.clock() - self.began, 3),
                       tries, attempt.failed_tries if attempt else 0)


def _key(schedule: Schedule) -> str:
    return schedule.model_dump_json()
