"""Explicit schedules: a run's fault windows and workload shape as a file people can read.

Every run writes the schedule it actually ran to `schedule.yaml` in its run
directory (docs/history-format.md); `chaos run --schedule FILE` replays one,
and `chaos shrink` edits them. A schedule with the same seed gives the same
operations (the seed and the shape fix the operation plan) and the same
faults at the same offsets (each window keeps the seed its targets are drawn
from), whether the windows came from the seeded generator or from the file.
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

if TYPE_CHECKING:
    from faults.schedule import ScheduledEvent
    from harness.spec import RunSpec

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

    @property
    def fault_seconds(self) -> float:
        return round(sum(window.length for window in self.windows), 3)

    def replace(self, **changes: Any) -> "Schedule":
        """A copy with some fields (or shape fields) changed, validated again."""
        shape = self.shape.model_copy(update=changes.pop("shape", {}))
        return Schedule.model_validate({**self.model_dump(), **changes, "shape": shape.model_dump()})


# -- from and to a run spec ---------------------------------------------------------------

def from_spec(spec: "RunSpec") -> Schedule:
    """The schedule a spec runs: its explicit windows, or the seeded generator's."""
    if spec.windows is not None:
        windows = spec.windows
    else:
        from harness.run import fault_schedule
        starts = {}
        windows_found = []
        for event in fault_schedule(spec):
            key = (event.window, event.slot)
            if event.phase == "start":
                starts[key] = event
            elif key in starts:
                begin = starts.pop(key)
                windows_found.append(FaultWindow(fault=begin.fault.label(), targets=tuple(spec.targets),
                                                 start=begin.offset, length=round(event.offset - begin.offset, 3),
                                                 seed=begin.seed))
        windows = tuple(sorted(windows_found, key=lambda w: (w.start, w.end)))
    return Schedule(profile=spec.profile, workload=spec.workload, seed=spec.seed, timing=spec.timing,
                    bugs=tuple(spec.bugs), rocketmq_version=spec.rocketmq_version,
                    shape=Shape(time=spec.time, recovery=spec.recovery, rate=spec.rate,
                                concurrency=spec.concurrency, queues=spec.queues, keys=spec.keys,
                                ordered=spec.ordered, mix=dict(spec.mix)),
                    windows=windows)


def spec_values(schedule: Schedule) -> dict[str, Any]:
    """RunSpec values that replay `schedule` (the caller adds store, inventory, ...)."""
    labels = list(dict.fromkeys(window.fault for window in schedule.windows)) or ["noop"]
    return {"profile": schedule.profile, "workload": schedule.workload, "seed": schedule.seed,
            "timing": schedule.timing, **schedule.shape.model_dump(), "faults": labels,
            "windows": schedule.windows, **({"bugs": schedule.bugs} if schedule.bugs else {}),
            **({"rocketmq_version": schedule.rocketmq_version} if schedule.rocketmq_version else {})}


def events(windows: tuple[FaultWindow, ...], run_seed: int) -> list[ScheduledEvent]:
    """The start/stop events of explicit windows, in time order (stops first on a tie)."""
    from faults.schedule import FaultSpec, ScheduledEvent
    found = []
    ordered = sorted(windows, key=lambda w: (w.start, w.end))
    for index, window in enumerate(ordered):
        spec = FaultSpec.parse(window.fault)
        seed = window.target_seed(run_seed)
        roles = tuple(window.targets) or None
        for phase, offset in (("start", window.start), ("stop", window.end)):
            found.append(ScheduledEvent(round(offset, 3), spec, phase, index, 0, seed, roles))
    found.sort(key=lambda event: (event.offset, event.phase == "start"))
    return found


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
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ScheduleFileError(f"{where}: not YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise ScheduleFileError(f"{where}: expected a mapping with profile, workload, seed, shape, windows")
    try:
        return Schedule.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        loc = ".".join(str(part) for part in first.get("loc", ())) or "schedule"
        msg = first.get("msg", "invalid").removeprefix("Value error, ")
        raise ScheduleFileError(f"{where}: {loc}: {msg}") from None


def load(path: Path) -> Schedule:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ScheduleFileError(f"schedule file {path}: {exc.strerror or exc}") from None
    return parse(text, str(path))


def save(path: Path, schedule: Schedule) -> None:
    from harness.store import write_text
    write_text(path, dump(schedule))
