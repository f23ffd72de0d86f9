"""The systems under test: one table, the one place that knows which systems exist.

A system is our model (sut/, the default) or real Apache RocketMQ (sut/rocketmq/),
later others. Each entry says where its profiles are, how long it takes to notice a
failed master, which class deploys it, which class the queue and log workloads use
as its client, how to check its release is at hand, whether it takes the model's bug
library (sut/bugs.py) and which workloads it refuses, with the reason. Code
above sut/ asks this module; nothing else compares a profile's `system` with a name
(docs/architecture.md, "Systems under test").

The entries name their parts as "module:attribute", imported only when used (as
sut/ha/__init__.py does for HA modes), so listing profiles never starts a JVM and
the model's modules never import sut/rocketmq/. A new system is one entry here:
its profiles (sut.profiles.Profile, `system` set to the entry's name), a deployer
that implements the protocol below and a client that implements
workloads.clients.QueueClient.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, runtime_checkable

from sut.profiles import Profile, ProfileError

if TYPE_CHECKING:
    from inventory import Inventory, Node, Pool


@dataclass(frozen=True)
class ProcessRef:
    """One SUT process on one node: what nuclei and nemeses need to find and restart it."""

    node: str
    role: str
    name: str
    pidfile: str
    argv: tuple[str, ...]
    config_path: str
    data_dir: str
    address: str
    cwd: str
    logfile: str
    env: dict[str, str] = field(default_factory=dict, hash=False, compare=False)


@runtime_checkable
class ClusterStateReader(Protocol):
    """The SUT's view of itself now, in the shape sut/cluster_state.py documents (groups,
    controller, nodes); a process silent for `timeout` seconds counts as down."""

    def cluster_state(self, timeout: float = ...) -> dict[str, Any]: ...


@runtime_checkable
class Deployer(ClusterStateReader, Protocol):
    """What the run lifecycle, the nemeses and `chaos heal` need of a deployed system.

    Made by `factory(pool, inventory, profile_name, run_dir, timing=..., bugs=...)`;
    with `pool` None it only places the processes (`used_nodes`, `refs`), which is
    all a `--dry-run` asks of it."""

    profile: Profile
    refs: list[ProcessRef]
    prepare_node: Callable[[Node], None] | None
    before_start: Callable[[ProcessRef], None] | None
    after_start: Callable[[ProcessRef, int], None] | None
    # Whether a clock fault moves the processes' CLOCK_MONOTONIC too (docs/nemeses.md, clocks).
    fake_monotonic_clock: bool

    @property
    def used_nodes(self) -> list[Node]: ...

    def processes(self, node_name: str) -> list[ProcessRef]: ...

    @staticmethod
    def data_root(node: Node) -> str: ...

    def install(self) -> None: ...

    def start(self) -> None: ...

    def start_process(self, ref: ProcessRef) -> int: ...

    def add_env(self, env_of: Callable[[ProcessRef], dict[str, str]]) -> None: ...

    def wait_healthy(self, timeout: float = ...) -> None: ...

    def stop(self, timeout: float = ...) -> None: ...

    def endpoints(self) -> dict[str, list[str]]: ...

    def leader(self, role: str = ...) -> str | None: ...

    def collect_logs(self, dest_dir: str | Path) -> list[Path]: ...


@dataclass(frozen=True)
class System:
    """One system under test; every part is "module:attribute", imported when used."""

    title: str                   # what messages call it
    profiles: str                # a dict[str, Profile]
    failure_detection: str       # (Profile, timing) -> seconds until a failed master is noticed
    deployer: str                # a Deployer factory
    queue_client: str            # a workloads.clients.QueueClient factory
    release_problem: str | None = None   # (release | None) -> what is missing to run it here (one line), or None
    # Systems with releases to choose from (real RocketMQ: any served 5.x, `--rocketmq-version`):
    default_release: str | None = None   # () -> the release a run takes when it names none
    release_refusal: str | None = None   # (Profile, release) -> why it cannot run that release, or None
    takes_bugs: bool = False     # whether `--bug` (sut/bugs.py) applies
    refused_workloads: Mapping[str, str] = field(default_factory=dict)   # workload -> why not
    # A consumer-group member (the group workload): (namesrv, group, topic, timeout, route_refresh_s) -> member
    group_member: str = "sut.client:group_member"

    def part(self, which: str) -> Any:
        module, _, name = getattr(self, which).partition(":")
        return getattr(importlib.import_module(module), name)


SYSTEMS: dict[str, System] = {
    "model": System(
        title="the model SUT",
        profiles="sut.profiles:PROFILES",
        failure_detection="sut.profiles:failure_detection_s",
        deployer="sut.deploy:ModelDeployer",
        queue_client="workloads.clients:BrokerClient",
        takes_bugs=True,
        refused_workloads={
            "ordered": "the model has no orderly consumer (queue locks, lockBatchMQ); run it on an rmq- profile",
            "transactional": "the model has no half messages or check-back; run it on an rmq- profile",
            "delayed": "the model has no timer wheel; run it on an rmq- profile"}),
    "rocketmq": System(
        title="real RocketMQ",
        profiles="sut.rocketmq.profiles:PROFILES",
        failure_detection="sut.rocketmq.profiles:failure_detection_s",
        deployer="sut.rocketmq.deploy:RocketMQDeployer",
        queue_client="workloads.rocketmq_client:RocketMQClient",
        release_problem="sut.rocketmq.release:problem",
        default_release="sut.rocketmq.release:pinned",
        release_refusal="sut.rocketmq.release:refusal",
        group_member="workloads.rocketmq_group:RocketMQGroupMember",
        refused_workloads={"register": "real RocketMQ has no key-value store (the model's Raft KV is ours); "
                                       "use queue or log"}),
}


def system(name: str) -> System:
    """The system called `name` (ProfileError if the table has none)."""
    try:
        return SYSTEMS[name]
    except KeyError:
        raise ProfileError(f"unknown system '{name}' (known: {', '.join(sorted(SYSTEMS))})") from None


def profiles() -> dict[str, Profile]:
    """Every profile of every system, by name."""
    found: dict[str, Profile] = {}
    for name, entry in SYSTEMS.items():
        for profile_name, its in entry.part("profiles").items():
            if its.system != name:
                raise ProfileError(f"profile {profile_name} of system {name} says it runs on {its.system}")
            found[profile_name] = its
    return found


def profile(name: str | Profile) -> Profile:
    """The profile called `name` (a Profile is returned as it is); ProfileError names the known ones."""
    if isinstance(name, Profile):
        return name
    known = profiles()
    try:
        return known[name]
    except KeyError:
        raise ProfileError(f"unknown profile '{name}' (known: {', '.join(sorted(known))})") from None


def system_of(name: str | Profile) -> System:
    return system(profile(name).system)


# -- what each profile can do, whatever its system ------------------------------------------
# A fault window must outlast detection by this share of it (at least
# FAILOVER_MARGIN_MIN_S): the election, the new master's registration and the
# clients' route refresh come after detection.
FAILOVER_MARGIN_SHARE = 0.5
FAILOVER_MARGIN_MIN_S = 2.0


def failure_detection_s(name: str | Profile, timing: str = "default") -> float:
    """Seconds until the profile's system notices that its master (or leader) is gone, at
    the worst: the one place for this fact (run defaults and the rto checker read it)."""
    found = profile(name)
    return system(found.system).part("failure_detection")(found, timing)


def has_failover(name: str | Profile) -> bool:
    """Whether the profile elects a new master when its master fails (not master-slave, single)."""
    found = profile(name)
    return found.mode in ("controller", "dledger") or any(
        p.config.get("slave_acting_master") for p in found.processes)


def failover_margin_s(detection_s: float) -> float:
    return max(detection_s * FAILOVER_MARGIN_SHARE, FAILOVER_MARGIN_MIN_S)


def failover_window_s(name: str | Profile, timing: str = "default") -> float:
    """The shortest fault window that exercises a failover: detection plus a margin."""
    detection = failure_detection_s(name, timing)
    return detection + failover_margin_s(detection)


def refused_fault(name: str | Profile, fault_name: str) -> str | None:
    """Why `fault_name` cannot apply to the profile, or None (the name itself, else its family)."""
    found = profile(name)
    family = fault_name.rsplit("-", 1)[-1]
    return found.refused.get(fault_name) or found.refused.get(family)


def refused_workload(name: str | Profile, workload: str) -> str | None:
    """Why the profile's system cannot run `workload`, or None."""
    found = profile(name)
    reason = system(found.system).refused_workloads.get(workload)
    return f"workload {workload} cannot run on {found.name}: {reason}" if reason else None


def takes_bugs(name: str | Profile) -> bool:
    """Whether library bugs (sut/bugs.py) can be switched on in the profile's system."""
    return system_of(name).takes_bugs


def release_problem(name: str | Profile, release: str | None = None) -> str | None:
    """What is missing on this machine to run the profile's system (at `release`; None: its
    default) (one line), or None. The release is fetched here if it can be."""
    entry = system_of(name)
    return None if entry.release_problem is None else entry.part("release_problem")(release)


def default_release(name: str | Profile) -> str | None:
    """The release a run of the profile takes when it names none (None: the system has no releases)."""
    entry = system_of(name)
    return None if entry.default_release is None else entry.part("default_release")()


def release_refusal(name: str | Profile, release: str) -> str | None:
    """Why the profile cannot run at `release` (not a release its system has, or one that
    cannot run this profile), or None."""
    found, entry = profile(name), system_of(name)
    if entry.release_refusal is None:
        return f"{found.name} runs {entry.title}, which has no releases to choose (release {release})"
    return entry.part("release_refusal")(found, release)


def make_deployer(pool: Pool | None, inventory: Inventory, profile_name: str, run_dir: str | Path,
                  timing: str = "default", bugs: tuple[str, ...] = (), release: str | None = None) -> Deployer:
    """The deployer of the profile's system (ProfileError for an unknown profile); `release`
    picks a system's release (None: its default) and goes only to systems that have them."""
    chosen = {"version": release} if release is not None else {}
    return system_of(profile_name).part("deployer")(pool, inventory, profile_name, run_dir, timing=timing, bugs=bugs,
                                                     **chosen)


def queue_client(system_name: str) -> Callable[..., Any]:
    """The queue and log workloads' client factory of a system (workloads.clients.QueueClient)."""
    return system(system_name).part("queue_client")
