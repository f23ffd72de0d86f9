"""A third system under test that exists only in the systems table: three "nodes" of a
pretend broker, a deployer that places processes but refuses to deploy anything, and a
queue client that is never made. It shows that a system is added by one entry in
sut/systems.py and that `chaos run --dry-run` answers for it without touching a node."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from inventory import Inventory, Pool
from sut.deploy import Placement
from sut.profiles import ProcessSpec, Profile
from sut.systems import ProcessRef, System

NAME = "dummy"
PROFILES = {
    "dummy-3": Profile("dummy-3", "three pretend brokers, one group, failover after 2 s",
                       tuple(ProcessSpec(f"broker-{i}", "broker", i, {"broker_name": "group-a"}) for i in range(3)),
                       mode="dledger", system=NAME, refused={"crash": "the dummy keeps nothing on disk"}),
}
ENTRY = System(title="the dummy system", profiles=f"{__name__}:PROFILES",
               failure_detection=f"{__name__}:failure_detection_s", deployer=f"{__name__}:DummyDeployer",
               queue_client=f"{__name__}:no_client", refused_workloads={"register": "the dummy has no registers"})


def failure_detection_s(profile: Profile, timing: str = "default") -> float:
    return 2.0 if timing == "default" else 0.2


class DeployAttempted(AssertionError):
    """A dry run must not deploy."""


class DummyDeployer(Placement):
    """Places the dummy's processes on the inventory's nodes; every effect raises."""

    def __init__(self, pool: Pool | None, inventory: Inventory, profile_name: str, run_dir: str | Path,
                 timing: str = "default", bugs: tuple[str, ...] = ()) -> None:
        placed = self._place(pool, inventory, profile_name, run_dir,
                             lambda profile, hosts, workdirs: list(profile.processes))
        self.refs = [ProcessRef(node=self.nodes[p.node].name, role=p.role, name=p.name, pidfile="/nonexistent",
                                argv=("false",), config_path="", data_dir="", cwd="/", logfile="",
                                address=f"{self.nodes[p.node].host}:1") for p in placed]

    def _effect(self, *args: Any, **kwargs: Any) -> Any:
        raise DeployAttempted("the dummy system was asked to act")

    install = start = start_process = wait_healthy = stop = endpoints = leader = collect_logs = _effect

    def cluster_state(self, timeout: float = 0.5) -> dict[str, Any]:
        raise DeployAttempted("the dummy system was asked for its state")


def no_client(*args: Any, **kwargs: Any) -> Any:
    raise DeployAttempted("the dummy system has no client")
