"""Trying a candidate schedule for real: one run through the run lifecycle, then the checkers.

Every try is a run of its own in the shrink's campaign (runs/try-001, ...),
on the original run's nodes, so it is healed, recorded and checkable like
any run. A stop signal during a try heals (the lifecycle does) and ends the
search with KeyboardInterrupt.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from harness import schedule as schedule_file
from harness.plan import spec_values
from harness.run import RunLifecycle, check
from harness.shrink import failure
from harness.shrink.search import Rejected, TryResult
from harness.spec import SpecError, build_spec


class LifecycleTrials:
    """`trial(schedule)` for the search: run, check, return the anomaly classes."""

    def __init__(self, base_values: dict[str, Any], campaign_id: str, console: Any,
                 log: Callable[[str], None] = lambda line: None) -> None:
        self.base_values = base_values
        self.campaign_id = campaign_id
        self.console = console
        self.log = log
        self.count = 0

    def __call__(self, schedule: schedule_file.Schedule) -> TryResult:
        values = {**self.base_values, **spec_values(schedule)}
        try:
            spec = build_spec(values)
        except SpecError as exc:
            raise Rejected(str(exc)) from None
        self.count += 1
        lifecycle = RunLifecycle(spec, self.console, show_progress=False, campaign_id=self.campaign_id,
                                 run_id=f"try-{self.count:03d}")
        outcome = lifecycle.execute()
        run_path = outcome.run.path
        label = str(Path(run_path.parent.name, run_path.name))
        if outcome.status == "interrupted":
            raise KeyboardInterrupt(outcome.error or "interrupted")
        if outcome.status != "complete":
            self.log(f"  {label}: {outcome.status}: {outcome.error}")
            return TryResult(frozenset({f"run-{outcome.status}"}), str(run_path))
        results = check([run_path], spec.spark_master)
        found = failure.classes(results[0]) if results else frozenset()
        return TryResult(found, str(run_path))
