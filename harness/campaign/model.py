"""The campaign file: a YAML matrix of profiles x workloads x faults x repeats.

Validated with pydantic before anything starts. An error names the file, the
field's path and its line in the YAML, and what is allowed, as one line:

    campaigns/x.yaml: profiles[1] (line 4): unknown profile 'dledger-5'; known: ...

Durations are stated explicitly in the file (run, fault, quiet between faults,
recovery after them): a campaign must mean the same runs next year, whatever
the defaults of `chaos run` become.
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from harness.bounds import run_size_problem
from harness.spec import check_fault, known_profiles, known_workloads, release_problem
from sut import bugs as bug_library
from sut import profiles, systems

# `a+b` in a fault entry: `a` cycles, `b` overlaps inside every window of `a`.
COMBINE = "+"
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"


class CampaignError(ValueError):
    """A campaign file that cannot be used: one line naming file, field and line."""


def _known(kind: str, known: Any) -> AfterValidator:
    def check(value: str) -> str:
        names = known()
        if value not in names:
            raise ValueError(f"unknown {kind} {value!r}; known: {', '.join(names)}")
        return value
    return AfterValidator(check)


def _fault_entry(entry: str) -> str:
    for text in entry.split(COMBINE):
        check_fault(text.strip())
    return entry


# `rmq-controller-3@5.1.4` in profiles: that profile on that RocketMQ release (a cell of its own).
AT_RELEASE = "@"


def profile_of(entry: str) -> str:
    """The profile name of a campaign profile entry (`rmq-controller-3@5.1.4` -> rmq-controller-3)."""
    return entry.split(AT_RELEASE, 1)[0]


def release_of(entry: str, campaign_release: str | None = None) -> str | None:
    """The RocketMQ release of a profile entry: its own `@V`, else the campaign's `rocketmq_version`."""
    name, sep, version = entry.partition(AT_RELEASE)
    return version if sep else campaign_release


def _profile_entry(entry: str) -> str:
    name, sep, version = entry.partition(AT_RELEASE)
    _known("profile", known_profiles).func(name)
    problem = release_problem(name, version) if sep else None
    if problem:
        raise ValueError(problem)
    return entry


ProfileName = Annotated[str, AfterValidator(_profile_entry)]
BugName = Annotated[str, _known("bug", bug_library.known)]
WorkloadName = Annotated[str, _known("workload", known_workloads)]
FaultEntry = Annotated[str, AfterValidator(_fault_entry)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class InventoryChoice(Strict):
    """Where the runs go: a local cluster of `nodes` (network namespaces, or containers
    with `provider: docker`), or an inventory `file`."""

    nodes: int | None = Field(None, ge=1, le=32)
    provider: Literal["netns", "docker"] = "netns"
    file: Path | None = None

    @model_validator(mode="after")
    def _one_of(self) -> "InventoryChoice":
        if (self.nodes is None) == (self.file is None):
            raise ValueError("give exactly one of nodes (a local cluster of that size) or file (an inventory)")
        if self.file is not None and self.provider != "netns":
            raise ValueError("provider applies to a local cluster (nodes), not to an inventory file")
        return self


class Durations(Strict):
    """Seconds. A run is `run` s of workload with faults, then `recovery` s of workload alone."""

    run: float = Field(gt=0, description="workload with the fault schedule")
    fault: float = Field(gt=0, description="how long each fault window lasts")
    between: float = Field(gt=0, description="quiet time before each fault window")
    recovery: float = Field(ge=0, description="workload after the last fault is healed")
    drain_timeout: float = Field(60.0, gt=0, description="longest final drain")

    @model_validator(mode="after")
    def _room_for_one_fault(self) -> "Durations":
        if self.run < self.between + self.fault:
            raise ValueError(f"run {self.run:g}s holds no fault: each window needs between + fault = "
                             f"{self.between + self.fault:g}s")
        return self


class Thresholds(Strict):
    """Checker thresholds written into every run (checkers read them from run.json)."""

    rto_s: float | None = Field(None, gt=0, description="a window longer than this is flagged")
    min_availability: float | None = Field(None, ge=0, le=1, description="share of ok writes during faults")


class Gates(Strict):
    """Which gates decide the exit code (docs/campaigns.md, "Gates"); each can be switched off."""

    safe_valid: bool = True
    no_lost_on_safe: bool = True
    unsafe_found: bool = True
    no_unknown: bool = True
    no_error: bool = True
    rto_p99_s: float | None = Field(None, gt=0, description="bound on RTO p99 per safe profile and fault")


class Spark(Strict):
    """Where the checkers run; `batch` runs are checked together in one pass."""

    master: str | None = None
    conf: dict[str, str] = Field(default_factory=dict)
    batch: int = Field(16, ge=1, le=1000)


class Client(Strict):
    """The workload client's routing. `on-failure` (ours) re-reads routes right after a
    failed call; `periodic` follows RocketMQ's client: routes polled every
    `route_refresh_s` (pollNameServerInterval, 30 s by default), a failed send retried
    twice (retryTimesWhenSendFailed) on the cached route, avoiding the failed group."""

    route_refresh: Literal["on-failure", "periodic"] = "on-failure"
    route_refresh_s: float = Field(30.0, gt=0)


class Trend(Strict):
    regression_factor: float = Field(1.5, gt=1, description="p99 worse than the trailing median by this factor")
    nights: int = Field(7, ge=1, description="how many earlier campaigns the trailing median spans")


class Reference(Strict):
    """A published figure shown next to ours on compare.html (the seed experiment's)."""

    label: str
    rto_s: float = Field(gt=0)
    source: str = ""


class Campaign(Strict):
    name: str = Field(pattern=NAME_PATTERN)
    description: str = ""
    inventory: InventoryChoice = InventoryChoice(nodes=5)
    profiles: tuple[ProfileName, ...] = Field(min_length=1)
    workloads: tuple[WorkloadName, ...] = ("queue",)
    faults: tuple[FaultEntry, ...] = Field(min_length=1)
    bugs: tuple[BugName, ...] = Field((), description="library bugs switched on in every run (sut/bugs.py)")
    targets: tuple[str, ...] = ()
    timing: str = "default"
    rocketmq_version: str | None = Field(None, description="real RocketMQ's release for every rmq-* profile "
                                         "without an `@V` of its own (default: the pinned one)")
    durations: Durations
    rate: float = Field(20.0, gt=0)
    concurrency: int = Field(6, ge=1, le=512)
    queues: int = Field(4, ge=1, le=64)
    op_timeout: float = Field(6.0, gt=0)
    repeats: int = Field(1, ge=1, le=1000)
    seed: int = Field(ge=0, lt=2**63)
    thresholds: Thresholds = Thresholds()
    gates: Gates = Gates()
    spark: Spark = Spark()
    client: Client = Client()
    trend: Trend = Trend()
    reference: Reference | None = None
    shrink: bool = Field(False, description="after the campaign, shrink the first failing run of each failing cell")
    shrink_minutes: float = Field(15.0, gt=0, description="time budget of all the shrinks together")

    @field_validator("profiles", "workloads", "faults", "bugs")
    @classmethod
    def _no_repeats(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError("an entry is listed twice")
        return value

    @field_validator("timing")
    @classmethod
    def _timing_known(cls, value: str) -> str:
        known = sorted(profiles.TIMINGS)
        if value not in known:
            raise ValueError(f"unknown timing scale {value!r}; known: {', '.join(known)}")
        return value

    @model_validator(mode="after")
    def _releases_fit(self) -> "Campaign":
        """`rocketmq_version` applies to every profile with releases and no `@V` of its own."""
        if self.rocketmq_version is None:
            return self
        takers = [entry for entry in self.profiles
                  if AT_RELEASE not in entry and systems.default_release(entry) is not None]
        if not takers:
            raise ValueError(f"rocketmq_version {self.rocketmq_version}: no profile of the campaign takes it "
                             f"(only real RocketMQ's rmq-* profiles have releases)")
        for entry in takers:
            problem = release_problem(entry, self.rocketmq_version)
            if problem:
                raise ValueError(f"rocketmq_version: {problem}")
        return self

    @model_validator(mode="after")
    def _profiles_fit(self) -> "Campaign":
        nodes = self.inventory.nodes
        if nodes is None:  # an inventory file: its size is checked when a run loads it
            return self
        for name in map(profile_of, self.profiles):
            needed = systems.profile(name).nodes_needed
            if needed > nodes:
                raise ValueError(f"inventory.nodes is {nodes} but profile {name} needs {needed} nodes")
        return self

    @model_validator(mode="after")
    def _bounded(self) -> "Campaign":
        d = self.durations
        too_big = run_size_problem(self.rate, d.run + d.recovery, d.between + d.fault)
        if too_big:
            raise ValueError(too_big)
        return self


# -- loading, with line numbers -----------------------------------------------------------

def load_campaign(path: Path | str, rocketmq_version: str | None = None) -> Campaign:
    """Read and validate a campaign file; CampaignError (one line) on any problem.
    rocketmq_version (`--rocketmq-version`) replaces the file's `rocketmq_version`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CampaignError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise CampaignError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    try:
        data = yaml.safe_load(text)
        tree = yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise CampaignError(f"{path}{where}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
    except ValueError as exc:  # an integer of thousands of digits (Python's conversion limit)
        raise CampaignError(f"{path}: a number too long to read ({str(exc).split(':')[0]})") from None
    if not isinstance(data, dict):
        raise CampaignError(f"{path}: a campaign file is a YAML mapping (name:, profiles:, faults: ...)")
    if rocketmq_version is not None:
        data = {**data, "rocketmq_version": rocketmq_version}
    try:
        campaign = Campaign.model_validate(data)
    except ValidationError as error:
        raise CampaignError(describe(path, tree, error)) from None
    if campaign.inventory.file is not None:
        inventory = campaign.inventory.file
        if not inventory.is_absolute():
            inventory = (path.parent / inventory).resolve()
        if not inventory.is_file():
            raise CampaignError(f"{path}: inventory.file (line {line_of(tree, ('inventory', 'file'))}): "
                                f"{campaign.inventory.file} does not exist")
        campaign = campaign.model_copy(update={"inventory": InventoryChoice(file=inventory)})
    return campaign


def describe(path: Path, tree: yaml.Node | None, error: ValidationError) -> str:
    """The first problem as `file: field.path (line N): what is wrong`."""
    errors = error.errors()
    # A misspelt field also makes the real one "missing": the typo is the news.
    first = next((e for e in errors if e.get("type") == "extra_forbidden"), errors[0])
    loc = tuple(part for part in first.get("loc", ()) if not str(part).startswith("function-"))
    msg = first.get("msg", "invalid").removeprefix("Value error, ")
    if first.get("type") == "extra_forbidden":
        allowed = _allowed_fields(loc[:-1])
        msg = f"unknown field; allowed: {', '.join(allowed)}" if allowed else "unknown field"
    field_path = _dotted(loc) or "(top level)"
    line = line_of(tree, loc)
    where = f" (line {line})" if line else ""
    return f"{path}: {field_path}{where}: {msg}"


def _dotted(loc: tuple[Any, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _allowed_fields(loc: tuple[Any, ...]) -> list[str]:
    model: Any = Campaign
    for part in loc:
        field = model.model_fields.get(str(part)) if hasattr(model, "model_fields") else None
        if field is None:
            return []
        annotation = field.annotation
        model = next((a for a in getattr(annotation, "__args__", ()) if hasattr(a, "model_fields")), annotation)
    return list(getattr(model, "model_fields", {}))


def line_of(tree: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    """The 1-based line of the YAML node at `loc` (the deepest one that exists)."""
    node, line = tree, None
    for part in loc:
        if node is None:
            break
        line = node.start_mark.line + 1
        node = _child(node, part)
    if node is not None:
        line = node.start_mark.line + 1
    return line


def _child(node: yaml.Node, part: Any) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if key.value == str(part):
                return value
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
        return node.value[part]
    return None
