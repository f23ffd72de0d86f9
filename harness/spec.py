"""The run spec: everything a run depends on, validated before anything starts.

A typo (unknown profile, workload or fault), a run shorter than one fault
interval, or a store that cannot be written must fail in a second with one
line naming the option and what to do, not minutes later with a half-built
cluster. The resolved spec is written to run.json, so a run can be repeated
with `chaos run --spec run.json`-style tooling (the seed makes it replayable).
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

import workloads
from harness.bounds import MAX_DRAIN_TIMEOUT, MAX_OP_TIMEOUT, MIN_RATE, SEED_LIMIT, run_size_problem
from harness.schedule import FaultWindow
from harness.store import StoreError, check_writable
from sut import profiles, systems
from workloads.base import WorkloadOptions

# Option names as the user types them, for error messages.
OPTION_NAMES = {
    "profile": "--profile", "workload": "--workload", "faults": "--fault", "time": "--time",
    "rate": "--rate", "concurrency": "--concurrency", "interval": "--interval",
    "recovery": "--recovery", "seed": "--seed", "nodes": "--nodes", "inventory": "--inventory",
    "store": "--store", "queues": "--queues", "keys": "--keys", "ordered": "--ordered",
    "drain_timeout": "--drain-timeout", "targets": "--target", "mix": "--mix",
    "op_timeout": "--op-timeout", "timing": "--timing", "duration": "--fault-duration",
    "provider": "--provider", "windows": "--schedule", "bugs": "--bug",
    "rocketmq_version": "--rocketmq-version", "overlap": "--overlap",
    "rto_threshold_s": "--rto-threshold", "min_availability": "--min-availability",
}
NO_FAULT = "noop"


class SpecError(ValueError):
    """An invalid run spec, as one line."""


# -- registries (one place for each fact: the names live in their own packages) -----

def known_profiles() -> list[str]:
    return sorted(systems.profiles())


def nodes_needed(profile: str) -> int:
    return systems.profile(profile).nodes_needed


def known_workloads() -> list[str]:
    return sorted(workloads.known())


def check_fault(text: str) -> None:
    """A fault name with options (`random-loss:probability=0.3`) that the registry accepts."""
    from faults.context import FaultError
    from faults.registry import create
    from faults.schedule import FaultSpec, ScheduleError
    try:
        spec = FaultSpec.parse(text)
        create(spec.name, **dict(spec.options))
    except (FaultError, ScheduleError) as exc:
        raise ValueError(str(exc)) from None
    check_crash_fs(spec.name)


def refused_fault(profile: str, faults: list[str]) -> str | None:
    """Why one of these faults cannot apply to the profile (a crash on real RocketMQ), or None."""
    from faults.schedule import FaultSpec
    for text in faults:
        reason = systems.refused_fault(profile, FaultSpec.parse(text).name)
        if reason:
            return f"fault {text} on profile {profile}: {reason}"
    return None


def check_crash_fs(name: str) -> None:
    """Crash faults are refused before anything starts where FUSE cannot mount."""
    from faults.crash import crash_fs_unavailable, needs_crash_fs
    if needs_crash_fs([name]):
        reason = crash_fs_unavailable()
        if reason is not None:
            raise ValueError(f"fault {name}: {reason}")


def crash_model_problem(faults: list[str]) -> str | None:
    """Why the crash faults of one run cannot share a crash file system (they disagree on
    `dirty_expire`), or None."""
    from faults.context import FaultError
    from faults.crash import run_dirty_expire
    try:
        run_dirty_expire(faults)
    except FaultError as exc:
        return str(exc)
    return None


def local_node_limits() -> tuple[int, int]:
    """How many nodes the local (network-namespace) provider can bring up."""
    from inventory import netns
    return netns.MIN_NODES, netns.MAX_NODES


def load_inventory(path: Path) -> Any:
    """The inventory file, validated; ValueError (one line) names the file and the field."""
    from inventory import InventoryError, load
    try:
        return load(path)
    except InventoryError as exc:
        raise ValueError(str(exc)) from None


def running_default_cluster(spec: "RunSpec") -> Any:
    """The inventory of the local default cluster if the run will use it (no --inventory,
    the cluster is up and --nodes does not ask for another size), else None."""
    from inventory import netns
    existing = netns.inventory_path(netns.DEFAULT_NAME)
    if spec.inventory is not None or not existing.is_file():
        return None
    inventory = load_inventory(existing)
    return inventory if spec.nodes in (None, len(inventory.nodes)) else None


def planned_nodes(spec: "RunSpec") -> list[str]:
    """The names of the nodes the SUT will run on, known before anything starts: from the
    inventory file, else the running default local cluster, else the one a run brings up."""
    from inventory import Inventory, Node, netns
    from sut.deploy import DeployError, make_deployer
    inventory = load_inventory(spec.inventory) if spec.inventory is not None else running_default_cluster(spec)
    if inventory is None:
        inventory = Inventory(name="planned", kind="netns", nodes=[
            Node(name=f"n{i}", host=f"192.0.2.{i}") for i in range(1, (spec.nodes or netns.DEFAULT_NODES) + 1)])
    try:
        return [node.name for node in make_deployer(None, inventory, spec.profile, ".", timing=spec.timing,
                                                 release=spec.rocketmq_version).used_nodes]
    except DeployError as exc:
        raise ValueError(str(exc)) from None


def check_can_run_here(spec: "RunSpec") -> None:
    """A run that brings up its own local cluster needs what `chaos up` needs (root, the
    tools, a usable CHAOS_HOME): checked before anything exists. SpecError otherwise."""
    from inventory import InventoryError, netns
    check_release(spec.profile, spec.rocketmq_version)
    if spec.inventory is not None or running_default_cluster(spec) is not None:
        return
    try:
        netns.check_can_provision(netns.DEFAULT_NAME, spec.nodes or netns.DEFAULT_NODES)
    except InventoryError as exc:
        raise SpecError(f"cannot bring up a local cluster: {exc} (or pass --inventory FILE)") from None


def check_release(profile: str, release: str | None = None) -> None:
    """A profile's system may need a release at hand (real RocketMQ: the chosen or pinned
    release, fetched on first use; a JDK, Maven, the registry): one line saying what is
    missing, before any node is touched."""
    problem = systems.release_problem(profile, release)
    if problem:
        raise SpecError(f"profile {profile}: {problem}")


def release_problem(profile: str, release: str | None) -> str | None:
    """Why `--rocketmq-version` does not fit this profile (a system without releases, a
    release it does not have, or one that cannot run the profile), or None."""
    return None if release is None else systems.release_refusal(profile, release)


def check_faults_fit_the_nodes(spec: "RunSpec") -> None:
    """Fixed targets name real nodes, and every fault has enough of them."""
    from faults.context import FaultError
    from faults.validate import validate
    nodes = planned_nodes(spec)
    try:
        validate(spec.faults, nodes)
    except FaultError as exc:
        raise ValueError(str(exc)) from None
    problem = crash_reaching_a_majority(spec, nodes)
    if problem:
        raise ValueError(problem)


def crash_reaching_a_majority(spec: "RunSpec", nodes: list[str]) -> str | None:
    """On a profile that refuses `major-crash`, any crash that may hit a majority of one
    broker group's nodes (a minor crash on a large cluster, a fixed crash of two broker
    nodes) is refused with the same reason, or None."""
    from faults.crash import needs_crash_fs
    from faults.registry import lookup
    from faults.schedule import FaultSpec
    from faults.targets import SELECTORS, majority_size, most_hit, normalize_roles
    reason = systems.refused_fault(spec.profile, "major-crash")
    if reason is None:
        return None
    profile = systems.profile(spec.profile)
    groups: dict[str, list[str]] = {}
    for proc in profile.of_role("broker"):
        groups.setdefault(proc.config.get("broker_name", ""), []).append(nodes[proc.node])
    asked = [(text, spec.targets) for text in (*spec.faults, *spec.overlap)]
    asked += [(window.fault, window.targets or spec.targets) for window in spec.windows or ()]
    for text, roles in asked:
        fault = FaultSpec.parse(text)
        if not needs_crash_fs([fault.name]) or not getattr(lookup(fault.name).cls, "crashes_machines", True):
            continue  # a disk fault uses the crash file system but crashes nothing
        wanted = normalize_roles(list(roles))
        candidates = nodes if wanted is None else list(dict.fromkeys(
            nodes[p.node] for p in profile.processes if p.role in wanted))
        selector, fixed = fault.name.rsplit("-", 1)[0], fault.options.get("targets") or ()
        if selector not in SELECTORS:   # a state-triggered crash hits the master's node, as a leader crash
            selector = "leader"
        for group in groups.values():
            hits = most_hit(selector, candidates, group, fixed)
            if hits >= majority_size(len(group)):
                return (f"fault {text} on profile {spec.profile} may crash {hits} of the broker group's "
                        f"{len(group)} nodes: {reason}")
    return None


def _one_of(kind: str, value: str, known: list[str]) -> str:
    if value not in known:
        raise ValueError(f"unknown {kind} {value!r}; known: {', '.join(known)}")
    return value


class RunSpec(BaseModel):
    """A chaos run: what to deploy, which workload, which faults, for how long."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, allow_inf_nan=False)

    profile: str = "controller-3"
    workload: str = "queue"
    faults: tuple[str, ...] = ("random-kill",)
    time: float = Field(60.0, gt=0, description="seconds of workload + faults (main phase)")
    # High enough that a failover window holds hundreds of operations, with headroom
    # under what one control node sustains (docs/benchmarks.md, "Workloads").
    rate: float = Field(100.0, ge=MIN_RATE, allow_inf_nan=False,
                        description="operations per second, all clients together")
    concurrency: int = Field(10, ge=1, le=512, description="logical client processes")
    # None: derived from the profile's failure detection (_failover_defaults)
    interval: float = Field(None, gt=0, description="seconds of quiet before each fault")
    duration: float = Field(None, gt=0, description="seconds each fault lasts")
    recovery: float = Field(None, ge=0, description="seconds the workload goes on after the faults are healed")
    seed: int = Field(default_factory=lambda: random.randrange(2**31), ge=0, lt=SEED_LIMIT)
    nodes: int | None = Field(None, ge=1, le=32)
    inventory: Path | None = None
    provider: Literal["netns", "docker"] = Field("netns", description="kind of local cluster without --inventory")
    store: Path = Path("store")
    # workload options
    queues: int = Field(4, ge=1, le=64, description="queues of the topic (queue, log)")
    keys: int = Field(3, ge=1, le=64, description="register keys (register); sharding keys (ordered)")
    ordered: bool = Field(False, description="queue: one producer per shard key, one queue per key")
    drain_timeout: float = Field(60.0, gt=0, le=MAX_DRAIN_TIMEOUT,
                                 description="seconds the drain may take at most")
    mix: dict[str, float] = Field(default_factory=dict, description="operation weights (empty: default)")
    op_timeout: float = Field(6.0, gt=0, le=MAX_OP_TIMEOUT,
                              description="seconds before a call counts as indeterminate")
    # fault options
    targets: tuple[str, ...] = Field((), description="roles faults may hit (empty: every role)")
    overlap: tuple[str, ...] = Field((), description="faults started inside every window of the main ones")
    windows: tuple[FaultWindow, ...] | None = Field(None, description="explicit fault windows (--schedule) "
                                                    "instead of the seeded interval/duration cycle")
    route_refresh: float | None = Field(None, gt=0, description="client routing: None re-reads routes after a "
                                        "failure; seconds = RocketMQ's periodic refresh at that interval")
    # SUT
    timing: str = Field("default", description="SUT timing scale: default (RocketMQ's) or fast (a tenth)")
    bugs: tuple[str, ...] = Field((), description="library bugs switched on in the SUT (sut/bugs.py)")
    rocketmq_version: str | None = Field(None, description="real RocketMQ's release (rmq-* profiles; "
                                         "resolved to the pinned one when not given)")
    # checking
    check: bool = True
    spark_master: str | None = None
    rto_threshold_s: float | None = Field(None, gt=0, allow_inf_nan=False,
                                          description="seconds every fault window's RTO must stay under")
    min_availability: float | None = Field(None, ge=0, le=1, allow_inf_nan=False,
                                           description="share of writes in fault windows that must succeed")

    @model_validator(mode="before")
    @classmethod
    def _failover_defaults(cls, data: Any) -> Any:
        """Fault windows long enough for a failover unless the user chose them: quiet time,
        fault duration and recovery default to the profile's detection time plus a margin.
        A given --interval without --fault-duration keeps its old meaning (both)."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        try:
            window = systems.failover_window_s(data.get("profile") or cls.model_fields["profile"].default,
                                               data.get("timing") or cls.model_fields["timing"].default)
        except profiles.ProfileError:
            window = 1.0  # the field validators say what is wrong
        if data.get("duration") is None:
            data["duration"] = data.get("interval") or window
        for name in ("interval", "recovery"):
            if data.get(name) is None:
                data[name] = window
        return data

    @model_validator(mode="before")
    @classmethod
    def _default_release(cls, data: Any) -> Any:
        """A run of a system with releases records the release it ran: its default unless given."""
        if not isinstance(data, dict) or data.get("rocketmq_version") is not None:
            return data
        try:
            release = systems.default_release(data.get("profile") or cls.model_fields["profile"].default)
        except profiles.ProfileError:
            return data
        return data if release is None else {**data, "rocketmq_version": release}

    @field_validator("profile")
    @classmethod
    def _profile_is_known(cls, value: str) -> str:
        return _one_of("profile", value, known_profiles())

    @field_validator("workload")
    @classmethod
    def _workload_is_known(cls, value: str) -> str:
        return _one_of("workload", value, known_workloads())

    @field_validator("faults")
    @classmethod
    def _faults_are_known(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError(f"give at least one fault (or {NO_FAULT!r} for none)")
        for text in value:
            check_fault(text)
        return value

    @field_validator("overlap")
    @classmethod
    def _overlaps_are_known(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for text in value:
            check_fault(text)
        return value

    @field_validator("targets")
    @classmethod
    def _roles_are_known(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        from faults.targets import TargetError, normalize_roles
        try:
            normalize_roles(value)
        except TargetError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("timing")
    @classmethod
    def _timing_is_known(cls, value: str) -> str:
        return _one_of("timing scale", value, sorted(profiles.TIMINGS))

    @field_validator("bugs")
    @classmethod
    def _bugs_are_known(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        from sut import bugs
        try:
            return tuple(bugs.check(value))
        except bugs.UnknownBug as exc:
            raise ValueError(str(exc)) from None

    @field_validator("inventory")
    @classmethod
    def _inventory_exists(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_file():
            raise ValueError(f"inventory file {value} does not exist")
        if value is not None:
            load_inventory(value)  # its schema, now: not after a run directory exists
            value = value.resolve()  # run.json and a later shrink or heal must find it from anywhere
        return value

    @model_validator(mode="after")
    def _consistent(self) -> "RunSpec":
        if self.nodes is not None and self.inventory is not None:
            raise ValueError("give either --nodes (local cluster) or --inventory, not both")
        if self.provider == "docker" and self.inventory is not None:
            raise ValueError("give either --provider docker (a local docker cluster) or --inventory, not both")
        if self.bugs and not systems.takes_bugs(self.profile):
            raise ValueError(f"--bug: the bug library lives in the model SUT; {self.profile} runs "
                             f"{systems.system_of(self.profile).title}, which has none")
        problem = release_problem(self.profile, self.rocketmq_version)
        if problem:
            raise ValueError(problem)
        if self.ordered and self.workload != "queue":
            raise ValueError(f"--ordered applies to the queue workload, not {self.workload}")
        needed = nodes_needed(self.profile)
        if self.nodes is not None and self.nodes < needed:
            raise ValueError(f"--nodes {self.nodes}: profile {self.profile} needs {needed} nodes")
        low, high = local_node_limits()
        if self.nodes is not None and not low <= self.nodes <= high:
            raise ValueError(f"--nodes {self.nodes}: a local cluster has {low} to {high} nodes")
        too_many = run_size_problem(self.rate, self.time, None, len(self.windows or ()))
        if too_many:
            raise ValueError(too_many)
        if self.windows is not None:
            check_windows(self)
        elif self.has_faults and self.time < self.interval + self.duration:
            raise ValueError(
                f"--time {self.time:g}s is shorter than one fault interval: each fault comes after "
                f"--interval {self.interval:g}s of quiet and lasts --fault-duration {self.duration:g}s "
                f"({self.interval + self.duration:g}s in all), so no fault would run; raise --time or "
                f"lower --interval / --fault-duration")
        too_big = run_size_problem(self.rate, self.time + self.recovery,
                                   self.interval + self.duration if self.has_faults else None)
        if too_big:
            raise ValueError(too_big)
        workload = workloads.get(self.workload)
        problem = workload.unsupported(self.profile) or workload.options_problem(self.workload_options())
        problem = problem or refused_fault(self.profile, [*self.faults, *self.overlap])
        problem = problem or crash_model_problem([*self.faults, *self.overlap,
                                                  *(window.fault for window in self.windows or ())])
        if problem:
            raise ValueError(problem)
        check_faults_fit_the_nodes(self)
        return self

    def workload_options(self) -> WorkloadOptions:
        return WorkloadOptions(concurrency=self.concurrency, queues=self.queues, keys=self.keys,
                               ordered=self.ordered, mix=dict(self.mix), op_timeout=self.op_timeout,
                               drain_timeout=self.drain_timeout, route_refresh_s=self.route_refresh)

    @property
    def has_faults(self) -> bool:
        if self.windows is not None:
            return any(window.name != NO_FAULT for window in self.windows)
        # a `noop` window still carries the faults that overlap it
        return any(text.split(":")[0] != NO_FAULT for text in (*self.faults, *self.overlap))

    @property
    def longest_window_s(self) -> float:
        """The longest fault window (explicit windows differ; the cycle's are all --fault-duration)."""
        lengths = [w.length for w in self.windows or () if w.name != NO_FAULT]
        return max(lengths) if lengths else self.duration

    @property
    def detection_s(self) -> float:
        """How long the profile takes to notice a failed master (sut.systems)."""
        return systems.failure_detection_s(self.profile, self.timing)

    def failover_warning(self) -> str | None:
        """Why this run's fault windows cannot exercise a failover, or None."""
        needed = systems.failover_window_s(self.profile, self.timing)
        if not self.has_faults or self.longest_window_s >= needed or not systems.has_failover(self.profile):
            return None
        return (f"warning: faults last {self.longest_window_s:g}s but {self.profile} needs {self.detection_s:g}s "
                f"to detect a failed master ({needed:g}s with margin, timing {self.timing}): no failover "
                f"will be exercised; drop --interval/--fault-duration or raise them to {needed:g}")

    @property
    def fault_label(self) -> str:
        return "+".join(self.faults + self.overlap)

    def summary(self) -> str:
        bugs = f", bugs {'+'.join(self.bugs)}" if self.bugs else ""
        release = f" (RocketMQ {self.rocketmq_version})" if self.rocketmq_version else ""
        return (f"{self.profile}{release} / {self.workload} / {self.fault_label}, {self.time:g}s, "
                f"rate {self.rate:g}/s, concurrency {self.concurrency}, seed {self.seed}{bugs}")


def check_windows(spec: RunSpec) -> None:
    """Explicit windows: known faults, within the main phase."""
    from faults.targets import TargetError, normalize_roles
    for index, window in enumerate(spec.windows or ()):
        try:
            check_fault(window.fault)
            normalize_roles(list(window.targets))
        except (ValueError, TargetError) as exc:
            raise ValueError(f"window {index + 1} ({window.fault} at {window.start:g}s): {exc}") from None
        if window.end > spec.time + 1e-6:
            raise ValueError(f"window {index + 1} ({window.fault} at {window.start:g}s for {window.length:g}s) "
                             f"ends after --time {spec.time:g}s")


def describe_error(error: ValidationError) -> str:
    """The first problem of a pydantic error as one line: `--option value: problem`."""
    first = error.errors()[0]
    loc = [str(part) for part in first.get("loc", ())]
    msg = first.get("msg", "invalid").removeprefix("Value error, ")
    if not loc:
        return msg
    option = OPTION_NAMES.get(loc[0], loc[0])
    value = first.get("input")
    if first.get("type") == "extra_forbidden":
        return f"unknown setting {loc[0]!r}"
    if isinstance(value, (str, int, float)) and not isinstance(value, bool) and str(value) not in msg:
        return f"{option} {value}: {msg}"
    return f"{option}: {msg}"


def build_spec(values: dict[str, Any], check_store: bool = True) -> RunSpec:
    """Validate user input into a RunSpec; SpecError (one line) on any problem."""
    try:
        spec = RunSpec.model_validate({k: v for k, v in values.items() if v is not None})
    except ValidationError as error:
        raise SpecError(describe_error(error)) from None
    if check_store:
        check_store_writable(spec)
    return spec


def check_store_writable(spec: RunSpec) -> None:
    try:
        check_writable(spec.store)
    except StoreError as exc:
        raise SpecError(f"--store: {exc}") from None
