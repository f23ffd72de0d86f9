"""What the local providers (inventory.netns, inventory.docker) share: the state
directory of each cluster under $CHAOS_HOME, its record (cluster.json), the lock
that serializes reservations and sweeps, cluster names, the host's networks, and
telling a live owner process from a reused pid.
"""
from __future__ import annotations

import fcntl
import ipaddress
import json
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from inventory.errors import ProvisionError, one_line
from inventory.model import NAME_PATTERN

Record = TypeVar("Record", bound=BaseModel)


def chaos_home() -> Path:
    return Path(os.environ.get("CHAOS_HOME", "/var/lib/rocketmq-chaos"))


class LocalClusterRecord(BaseModel):
    """What cluster.json of a local cluster (namespaces or containers) remembers: enough to
    find and remove everything. Each provider has its own /16 (`network_prefix`)."""

    network_prefix: ClassVar[str]

    name: str
    subnet: int
    size: int
    owner_pid: int
    owner_start: int
    persistent: bool
    status: Literal["creating", "ready"] = "creating"

    @property
    def gateway(self) -> str:
        return f"{self.network_prefix}.{self.subnet}.1"

    @property
    def cidr(self) -> str:
        return f"{self.network_prefix}.{self.subnet}.0/24"

    @property
    def node_names(self) -> list[str]:
        return [f"n{i}" for i in range(1, self.size + 1)]

    def address(self, index: int) -> str:
        return f"{self.network_prefix}.{self.subnet}.{10 + index}"


class ClusterLayout:
    """Paths every local provider keeps in a cluster's state directory
    (`home/<kind>/<name>`); where sshd's files live is the provider's choice."""

    kind: ClassVar[str] = "clusters"

    def __init__(self, home: Path, name: str) -> None:
        check_name(name)  # the name becomes a path that `down` deletes
        self.root = home / self.kind / name
        self.record = self.root / "cluster.json"
        self.inventory = self.root / "inventory.yaml"
        self.known_hosts = self.root / "known_hosts"
        self.client_key = self.root / "keys" / "client_ed25519"


def check_name(name: str) -> None:
    if not re.fullmatch(NAME_PATTERN, name):
        raise ProvisionError(f"cluster name {name!r} is not valid: use letters, digits, '-', '_' or '.' (max 40)")


# -- state directory --------------------------------------------------------------------


def state_dirs(home: Path, kind: str) -> list[Path]:
    """The state directories of one provider's clusters (`kind`: its directory under home)."""
    base = home / kind
    return sorted(p for p in base.iterdir() if p.is_dir()) if base.exists() else []


def read_record(state_dir: Path, model: type[Record]) -> Record | None:
    """The `model` in state_dir/cluster.json, or None if it is missing or unreadable."""
    try:
        return model.model_validate_json((state_dir / "cluster.json").read_text())
    except (OSError, ValidationError):
        return None


def write_record(layout: ClusterLayout, record: LocalClusterRecord) -> None:
    tmp = layout.record.with_suffix(".tmp")
    tmp.write_text(record.model_dump_json(indent=2))
    tmp.replace(layout.record)


@contextmanager
def locked(home: Path) -> Iterator[None]:
    """Serialize reservations and sweeps across processes (flock on $CHAOS_HOME/.lock)."""
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# -- the host ---------------------------------------------------------------------------


def run_command(argv: list[str], what: str, check: bool = True) -> str:
    """stdout of `argv` (no shell); a failure is a one-line ProvisionError naming `what`."""
    proc = subprocess.run(argv, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise ProvisionError(f"{what} failed: {one_line(proc.stderr) or f'exit {proc.returncode}'}")
    return proc.stdout


def host_networks() -> list[ipaddress.IPv4Network]:
    """Networks of every IPv4 route and address on the host."""
    networks = []
    routes = json.loads(run_command(["ip", "-j", "-4", "route", "show", "table", "all"], "ip route") or "[]")
    for route in routes:
        networks += _as_network(route.get("dst", ""))
    for link in json.loads(run_command(["ip", "-j", "-4", "addr", "show"], "ip addr") or "[]"):
        for info in link.get("addr_info", []):
            networks += _as_network(f"{info.get('local')}/{info.get('prefixlen')}")
    return networks


def _as_network(text: str) -> list[ipaddress.IPv4Network]:
    try:
        return [ipaddress.IPv4Network(text, strict=False)]
    except ValueError:  # "default", "multicast", ...
        return []


def process_start_time(pid: int) -> int | None:
    """Kernel start time of a live `pid` (clock ticks since boot), None if it is gone;
    it tells a live owner from a reused pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def process_alive(pid: int, start: int) -> bool:
    """Whether `pid` still runs the process that started at `start` (not a reused pid)."""
    return process_start_time(pid) == start


def poll(condition: Callable[[], bool], timeout: float, interval: float = 0.02) -> bool:
    """Wait until `condition()` holds; False if `timeout` seconds passed first."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True


__all__ = ["ClusterLayout", "LocalClusterRecord", "check_name", "chaos_home", "host_networks", "locked",
           "poll", "process_alive", "process_start_time", "read_record", "run_command", "state_dirs",
           "write_record"]
