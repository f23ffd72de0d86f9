"""run.json: what a run was asked to do, what happened, and what its checkers need."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from records.base import StoreFile, read_model

Delivery = Literal["at-least-once", "exactly-once"]


class CheckInputs(BaseModel):
    """run.json's `checks`: every fact a checker reads, written by the harness.

    A run stored without run.json (an imported history, a hand-made case) is
    checked with these defaults."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    workload: str | None = None
    profile: str | None = None
    seed: int | None = None
    ordered: bool = False
    delivery: Delivery = "at-least-once"
    rto_threshold_s: float | None = None
    min_availability: float | None = None
    linearizable_time_limit_s: float = 30.0
    timing: str = "default"             # the SUT's timing scale (sut.profiles.TIMINGS)
    write_rate: float | None = None     # writes per second the run asked for (rate x share of writes)
    detection_s: float | None = None    # the profile's failure detection time at this timing
    failover_window_s: float | None = None  # the shortest fault window that exercises a failover

    @property
    def tolerates_duplicates(self) -> bool:
        """RocketMQ delivers at least once, so duplicates alone are not a failure."""
        return self.delivery != "exactly-once"


class RunJson(StoreFile):
    """A run's record, rewritten by the harness at every phase change."""

    kind: str = "run"               # run | import (a history from elsewhere)
    run_id: str | None = None
    campaign_id: str | None = None
    workload: str | None = None
    profile: str | None = None
    faults: list[str] = Field(default_factory=list)
    seed: int | None = None
    bugs: list[str] = Field(default_factory=list)
    spec: dict[str, Any] = Field(default_factory=dict, description="the resolved `chaos run` spec")
    checks: CheckInputs = CheckInputs()
    status: str | None = None          # running -> checking -> complete | interrupted | error
    error: str | None = None
    stop_reason: str | None = None
    valid: StrictBool | Literal["unknown"] | None = None
    started_at: str | None = None
    timings: dict[str, Any] = Field(default_factory=dict)
    plan: dict[str, Any] = Field(default_factory=dict)
    inventory: dict[str, Any] | None = None
    cluster: dict[str, Any] = Field(default_factory=dict)
    heal: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    versions: dict[str, Any] = Field(default_factory=dict)


def read_check_inputs(run_dir: Path) -> CheckInputs:
    """The checks of a stored run; defaults when it has no run.json (StoreFormatError if unusable)."""
    try:
        return read_model(RunJson, Path(run_dir) / "run.json").checks
    except FileNotFoundError:
        return CheckInputs()
