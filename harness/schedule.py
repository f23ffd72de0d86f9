"""Explicit schedules: a run's fault windows and workload shape as a file people can read.

Every run writes the schedule it actually ran to `schedule.yaml` in its run
directory (docs/history-format.md); `chaos run --schedule FILE` replays one,
and `chaos shrink` edits them. A schedule with the same seed gives the same
operations (the seed and the shape fix the operation plan) and the same
faults at the same offsets (each window keeps the seed its targets are drawn
from), whether the windows came from the seeded generator or from the file.
This module is the file format; harness/plan.py turns a run spec into a
schedule and back.
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from harness.bounds import windows_problem
from harness.store import write_text

FORMAT = 1
FILE_NAME = "schedule.yaml"
HEADER = ("# A chaos schedule (docs/history-format.md, \"schedule.yaml\"): replay it with\n"
          "#   chaos run --schedule THIS_FILE\n"
          "# Offsets and lengths are seconds from the start of the main phase.\n")


class ScheduleFileError(ValueError):
    """A schedule file that cannot be read or is not valid: one line naming the file and field."""


class FaultWindow(BaseModel):
    """One fault on for `length` seconds from `start`; `targets` are roles (empty: the run's)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fault: str
    targets: tuple[str, ...] = ()
    start: float = Field(ge=0)
    length: float = Field(gt=0)
    seed: int | None = Field(None, description="seeds the choice of targets; derived when absent")
    trigger: str | None = Field(None, description="a state-triggered fault's trigger (written by the run)")
    fired_at: float | Literal["never"] | None = Field(
        None, description="when the trigger fired, seconds from the main phase's start ('never': it did "
                          "not); a replay fires there without watching")

    @property
    def end(self) -> float:
        return round(self.start + self.length, 3)

    @property
    def name(self) -> str:
        return self.fault.split(":")[0]

    def target_seed(self, run_seed: int) -> int:
        """The given seed, else one drawn from the run seed, the fault and the start, so
        that dropping other windows does not change this one's targets."""
        if self.seed is not None:
            return self.seed
        return random.Random(f"chaos-window:{run_seed}:{self.fault}:{self.start}").getrandbits(63)


class Shape(BaseModel):
    """The workload's shape: how long, how many clients, how fast, over how many queues/keys."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    time: float = Field(gt=0, description="seconds of the main phase (faults happen inside it)")
    recovery: float = Field(ge=0, description="seconds of workload after the main phase")
    rate: float = Field(gt=0)
    concurrency: int = Field(ge=1)
    queues: int = Field(ge=1)
    keys: int = Field(ge=1)
    ordered: bool = False
    mix: dict[str, float] = Field(default_factory=dict)


class Schedule(BaseModel):
    """What a run does and when: profile, workload, seed, timing, shape and fault windows."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: int = FORMAT
    profile: str
    workload: str
    seed: int
    timing: str = "default"
    bugs: tuple[str, ...] = Field((), description="bugs of the bug library switched on (`chaos run --bug`)")
    rocketmq_version: str | None = Field(None, description="real RocketMQ's release (rmq-* profiles)")
    shape: Shape
    windows: tuple[FaultWindow, ...] = ()

    @model_validator(mode="after")
    def _windows_fit(self) -> "Schedule":
        if self.format != FORMAT:
            raise ValueError(f"format {self.format} is not supported (this harness reads format {FORMAT})")
        for index, window in enumerate(self.windows):
            if window.end > self.shape.time + 1e-6:
                raise ValueError(f"windows[{index}] ({window.fault} at {window.start:g}s for "
                                 f"{window.length:g}s) ends after the main phase ({self.shape.time:g}s)")
        return self

    def with_firings(self, firings: list[dict[str, Any]]) -> "Schedule":
        """The windows of state-triggered faults with their trigger and the offset they fired
        at (faults.runner.ScheduleRunner.firings), found by fault and start."""
        found = {(f["fault"], round(float(f["start"]), 3)): f for f in firings}
        windows = []
        for window in self.windows:
            firing = found.get((window.fault, round(window.start, 3)))
            if firing is not None:
                window = window.model_copy(update={"trigger": firing["trigger"], "fired_at": firing["fired_at"]})
            windows.append(window)
        return self.replace(windows=tuple(w.model_dump() for w in windows))

    def unfired(self) -> list[FaultWindow]:
        """Windows whose trigger never fired."""
        return [window for window in self.windows if window.fired_at == "never"]

    @property
    def fault_seconds(self) -> float:
        return round(sum(window.length for window in self.windows), 3)

    def replace(self, **changes: Any) -> "Schedule":
        """A copy with some fields (or shape fields) changed, validated again."""
        shape = self.shape.model_copy(update=changes.pop("shape", {}))
        return Schedule.model_validate({**self.model_dump(), **changes, "shape": shape.model_dump()})


# -- the file -----------------------------------------------------------------------------

def dump(schedule: Schedule) -> str:
    """YAML with a header saying how to replay it; windows one mapping each."""
    data = schedule.model_dump(mode="json")
    if not data["bugs"]:
        data.pop("bugs")
    if data["rocketmq_version"] is None:
        data.pop("rocketmq_version")
    data["windows"] = [{k: v for k, v in window.items() if v not in ((), [], None)}
                       for window in data["windows"]]
    if not data["shape"]["mix"]:
        data["shape"].pop("mix")
    return HEADER + yaml.safe_dump(data, sort_keys=False, default_flow_style=None)


def parse(text: str, where: str = "schedule") -> Schedule:
    """A Schedule from YAML text; ScheduleFileError names `where` and the first bad field."""
    try:  # libyaml's parser where there is one: a long schedule reads ~10x faster
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise ScheduleFileError(f"{where}: not YAML: {str(exc).splitlines()[0]}") from None
    except ValueError as exc:  # an integer of thousands of digits (Python's conversion limit)
        raise ScheduleFileError(f"{where}: a number too long to read ({str(exc).split(':')[0]})") from None
    if not isinstance(data, dict):
        raise ScheduleFileError(f"{where}: expected a mapping with profile, workload, seed, shape, windows")
    windows = data.get("windows")
    if isinstance(windows, list) and (too_many := windows_problem(len(windows))):
        raise ScheduleFileError(f"{where}: windows: {too_many}")  # before validating each one
    try:
        return Schedule.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        loc = ".".join(str(part) for part in first.get("loc", ())) or "schedule"
        msg = first.get("msg", "invalid").removeprefix("Value error, ")
        raise ScheduleFileError(f"{where}: {loc}: {msg}") from None


def load(path: Path) -> Schedule:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScheduleFileError(f"schedule file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ScheduleFileError(f"schedule file {path}: not UTF-8 text (byte {exc.start})") from None
    return parse(text, str(path))


def save(path: Path, schedule: Schedule) -> None:
    write_text(path, dump(schedule))
