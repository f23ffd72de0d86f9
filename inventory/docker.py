"""The docker provider: one container per node, reached over SSH like any host.

Each node is a container of a locally built image (Debian with python3,
sshd, iptables, iproute2, procps) on a user-defined bridge network with a
fixed address (10.214.X.0/24: the gateway is .1, node i is .10+i). It runs
sshd as its only service with a host key and an authorized key that belong to
the cluster (bind-mounted read-only from the state directory), and has the
NET_ADMIN capability (its own iptables; never --privileged). Root inside a
container may already signal every process of that container, so kill and
suspend need nothing more. The provider writes the same inventory file the
netns provider writes, so deploy, nemeses and workloads use SSH/Fabric
exactly as with VMs.

The node image is built here (inventory/docker_image.py): no registry is
reachable.

Every container, network and image carries the provider's labels, including
the CHAOS_HOME it belongs to, so `down` and the stale sweep find exactly ours.
The engine is reached with the docker SDK only, never the CLI.

State lives in $CHAOS_HOME/docker/<name>/: cluster.json, inventory.yaml,
known_hosts and ssh/ (keys and sshd_config, mounted into every container).
"""
from __future__ import annotations

import ipaddress
import os
import shutil
from collections.abc import Callable
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, ClassVar

from inventory import sshd
from inventory.docker_image import DEBOOTSTRAP, LABEL, LABEL_ROLE, SETUP_HINT, build_image
from inventory.errors import ProvisionError, one_line
from inventory.model import Inventory, Node
from inventory.local import (ClusterLayout, LocalClusterRecord, chaos_home, check_name, host_networks, locked,
                             poll, process_alive, process_start_time, read_record, state_dirs, write_record)
from inventory.netns import DEFAULT_NAME, DEFAULT_NODES, MAX_NODES, MIN_NODES, choose_subnet, subnets_in_use

__all__ = ["DEFAULT_NAME", "DEFAULT_NODES", "MAX_NODES", "MIN_NODES", "clusters", "down", "down_stale", "engine",
           "inventory_path", "owned", "up"]

NETWORK_PREFIX = "10.214"  # the netns provider uses 10.213.X.0/24
LABEL_CLUSTER = f"{LABEL}.cluster"
LABEL_HOME = f"{LABEL}.home"
# Crash faults (a FUSE file system under each data directory) need /dev/fuse and
# CAP_SYS_ADMIN in the container, and the fuse3 package in the image
# (docker_image.EXTRA_PACKAGES; docs/docker.md, "Hook for crash faults").
EXTRA_CAPABILITIES: tuple[str, ...] = ()
EXTRA_DEVICES: tuple[str, ...] = ()
CAPABILITIES = ("NET_ADMIN",)
SSH_MOUNT = "/etc/rocketmq-chaos"
SSHD_READY_TIMEOUT_S = 30
ENGINE_TIMEOUT_S = 120


class DockerRecord(LocalClusterRecord):
    """A docker cluster: its network and containers are named after the cluster."""

    network_prefix: ClassVar[str] = NETWORK_PREFIX

    image: str

    @property
    def network(self) -> str:
        return f"rmqc-{self.name}"

    def container(self, node: str) -> str:
        return f"rmqc-{self.name}-{node}"


class Layout(ClusterLayout):
    """Paths inside one docker cluster's state directory (sshd's files are mounted into the containers)."""

    kind: ClassVar[str] = "docker"

    def __init__(self, home: Path, name: str) -> None:
        super().__init__(home, name)
        self.ssh = self.root / "ssh"  # mounted read-only at SSH_MOUNT in every container
        self.host_key = self.ssh / "host_ed25519"
        self.authorized_keys = self.ssh / "authorized_keys"
        self.sshd_config = self.ssh / "sshd_config"


# -- the engine ---------------------------------------------------------------------


def engine() -> Any:
    """A docker SDK client that has answered a ping; ProvisionError says what to do otherwise."""
    import docker
    from docker.errors import DockerException
    try:
        client = docker.from_env(timeout=ENGINE_TIMEOUT_S)
        client.ping()
    except DockerException as error:
        raise ProvisionError(_engine_problem(error)) from None
    return client


def _engine_problem(error: Exception) -> str:
    """One line for an engine that cannot be reached: missing, or no permission."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    chain, cause = [], error
    while cause is not None:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    if any(isinstance(c, PermissionError) for c in chain) or "Permission denied" in str(error):
        return (f"no permission to use the Docker engine at {host}: run as root or add your user to "
                "the docker group (then log in again)")
    return (f"no Docker engine answers at {host}: install and start it with `{SETUP_HINT}` "
            f"({one_line(str(error), 120)})")


# -- public API -----------------------------------------------------------------------


def up(name: str = DEFAULT_NAME, nodes: int = DEFAULT_NODES, *, home: Path | None = None,
       persistent: bool = True, image: str = DEBOOTSTRAP, subnet: str | None = None,
       on_node: Callable[[str], None] | None = None, on_step: Callable[[str], None] | None = None) -> Inventory:
    """Create the docker cluster `name` with `nodes` containers and return its inventory.

    All or nothing, like `netns.up`: on any error (or a stop signal) every
    container, the network and the state directory are removed before the
    error propagates. `image` is DEBOOTSTRAP or a local image to build on;
    `subnet` (10.214.X.0/24) overrides the automatic choice.
    """
    check_can_provision(name, nodes)
    requested = _parse_subnet(subnet)
    client = engine()
    home = home or chaos_home()
    node_image = build_image(client, image, on_step=on_step)
    with locked(home):
        _remove_locked(client, home, name)
        record = _reserve(client, home, name, nodes, persistent, node_image, requested)
    layout = Layout(home, name)
    try:
        return _finish_in_worker(lambda cancelled: _build(client, record, layout, on_node, cancelled))
    except BaseException:
        _teardown(client, home, name, layout.root)
        raise


def down(name: str = DEFAULT_NAME, *, home: Path | None = None) -> bool:
    """Remove the docker cluster `name` (containers, network, state); False if nothing was there."""
    client = engine()
    home = home or chaos_home()
    with locked(home):
        return _remove_locked(client, home, name)


def down_stale(*, home: Path | None = None) -> list[str]:
    """Remove docker clusters left behind by crashed runs; one description per removal."""
    client = engine()
    home = home or chaos_home()
    with locked(home):
        return _sweep_locked(client, home)


def clusters(*, home: Path | None = None) -> list[DockerRecord]:
    home = home or chaos_home()
    return [r for r in (_read_record(d) for d in _state_dirs(home)) if r is not None]


def inventory_path(name: str = DEFAULT_NAME, *, home: Path | None = None) -> Path:
    return Layout(home or chaos_home(), name).inventory


def check_can_provision(name: str, nodes: int) -> None:
    """Validate the request before touching anything (one-line errors)."""
    check_name(name)
    if not MIN_NODES <= nodes <= MAX_NODES:
        raise ProvisionError(f"a docker cluster has {MIN_NODES} to {MAX_NODES} nodes, not {nodes}")
    if shutil.which("ssh-keygen") is None:
        raise ProvisionError("ssh-keygen not found: run bash scripts/setup.sh to install the system packages")


def owned(client: Any, home: Path | None = None, cluster: str | None = None) -> dict[str, list[Any]]:
    """Our containers and networks (of one CHAOS_HOME, optionally one cluster)."""
    labels = [f"{LABEL_HOME}={home or chaos_home()}"]
    if cluster is not None:
        labels.append(f"{LABEL_CLUSTER}={cluster}")
    return {"containers": client.containers.list(all=True, filters={"label": labels}),
            "networks": client.networks.list(filters={"label": labels})}


# -- building a cluster -----------------------------------------------------------------


def _parse_subnet(subnet: str | None) -> int | None:
    if subnet is None:
        return None
    try:
        network = ipaddress.IPv4Network(subnet)
    except ValueError as error:
        raise ProvisionError(f"--subnet {subnet!r}: {error}") from None
    octets = str(network.network_address).split(".")
    if network.prefixlen != 24 or ".".join(octets[:2]) != NETWORK_PREFIX:
        raise ProvisionError(f"--subnet {subnet!r}: give a {NETWORK_PREFIX}.X.0/24 network")
    return int(octets[2])


def _docker_networks(client: Any) -> list[ipaddress.IPv4Network]:
    networks = []
    for network in client.networks.list():
        for pool in (network.attrs.get("IPAM") or {}).get("Config") or []:
            try:
                networks.append(ipaddress.IPv4Network(pool.get("Subnet", ""), strict=False))
            except ValueError:
                continue
    return networks


def _reserve(client: Any, home: Path, name: str, size: int, persistent: bool, image: str,
             requested: int | None) -> DockerRecord:
    """Pick the subnet and write the record (caller holds the lock)."""
    used = {r.subnet for r in clusters(home=home)} | subnets_in_use(host_networks() + _docker_networks(client), NETWORK_PREFIX)
    if requested is not None and requested in used:
        raise ProvisionError(f"subnet {NETWORK_PREFIX}.{requested}.0/24 is already in use on this host "
                             "(a route, an address or a Docker network): pick another --subnet or leave it out")
    subnet = requested if requested is not None else choose_subnet(name, used, NETWORK_PREFIX)
    pid = os.getpid()
    record = DockerRecord(name=name, subnet=subnet, size=size, image=image, owner_pid=pid,
                          owner_start=process_start_time(pid) or 0, persistent=persistent)
    layout = Layout(home, name)
    layout.root.mkdir(parents=True, mode=0o700)
    write_record(layout, record)
    return record


def _finish_in_worker(build: Callable[[threading.Event], Inventory]) -> Inventory:
    """Run `build` in a worker thread so that a stop signal (raised in the main thread)
    never aborts a request to the engine halfway: the engine would still create the
    container after we had listed what to remove. On a stop, the worker is told to
    quit after its current request, and we wait for it before the caller tears down."""
    cancelled = threading.Event()
    with ThreadPoolExecutor(max_workers=1) as executor:
        future = executor.submit(build, cancelled)
        try:
            return future.result()
        except BaseException:
            cancelled.set()
            while not future.done():
                try:
                    wait([future])
                except KeyboardInterrupt:  # already stopping; keep waiting for the worker
                    continue
            raise


def _build(client: Any, record: DockerRecord, layout: Layout, on_node: Callable[[str], None] | None,
           cancelled: threading.Event) -> Inventory:
    _make_keys(record, layout)
    _make_network(client, record, home=layout.root.parent.parent)
    for index, node in enumerate(record.node_names, start=1):
        if cancelled.is_set():
            raise ProvisionError(f"creating docker cluster {record.name} was stopped")
        _start_container(client, record, layout, index, node)
        if on_node is not None:
            on_node(node)
    _wait_for_sshd(client, record)
    addresses = [record.address(i) for i in range(1, record.size + 1)]
    layout.known_hosts.write_text(sshd.known_hosts_lines(addresses, layout.host_key.with_suffix(".pub")))
    nodes = [Node(name=node, host=record.address(index), key_file=layout.client_key, user="root")
             for index, node in enumerate(record.node_names, start=1)]
    inventory = Inventory(name=record.name, kind="docker", nodes=nodes, strict_host_keys=True,
                          known_hosts=layout.known_hosts)
    inventory.write(layout.inventory)
    inventory.source = layout.inventory
    write_record(layout, record.model_copy(update={"status": "ready"}))
    return inventory


def _make_keys(record: DockerRecord, layout: Layout) -> None:
    for directory in (layout.client_key.parent, layout.ssh):
        directory.mkdir(mode=0o700, exist_ok=True)
    sshd.generate_key(layout.client_key, f"rocketmq-chaos client {record.name}")
    sshd.generate_key(layout.host_key, f"rocketmq-chaos host {record.name}")
    shutil.copyfile(layout.client_key.with_suffix(".pub"), layout.authorized_keys)
    mounted = Path(SSH_MOUNT)
    sshd.write_config(layout.sshd_config, mounted / layout.host_key.name, mounted / layout.authorized_keys.name)


def _labels(home: Path, cluster: str, role: str) -> dict[str, str]:
    return {LABEL: "1", LABEL_HOME: str(home), LABEL_CLUSTER: cluster, LABEL_ROLE: role}


def _make_network(client: Any, record: DockerRecord, home: Path) -> None:
    from docker.errors import APIError
    from docker.types import IPAMConfig, IPAMPool
    ipam = IPAMConfig(pool_configs=[IPAMPool(subnet=record.cidr, gateway=record.gateway)])
    try:
        client.networks.create(record.network, driver="bridge", ipam=ipam, check_duplicate=True,
                               labels=_labels(home, record.name, "network"))
    except APIError as error:
        reason = one_line(error.explanation or str(error), 160)
        if "overlap" in reason:
            raise ProvisionError(f"subnet {record.cidr} is already in use by another Docker network: "
                                 f"{reason}; pick another --subnet") from None
        raise ProvisionError(f"creating Docker network {record.network} failed: {reason}") from None


def _start_container(client: Any, record: DockerRecord, layout: Layout, index: int, node: str) -> None:
    from docker.errors import APIError
    endpoint = client.api.create_endpoint_config(ipv4_address=record.address(index))
    try:
        client.containers.run(
            record.image, ["/usr/sbin/sshd", "-D", "-e", "-f", f"{SSH_MOUNT}/sshd_config"],
            name=record.container(node), hostname=node, detach=True,
            labels=_labels(layout.root.parent.parent, record.name, "node"),
            cap_add=list(CAPABILITIES + EXTRA_CAPABILITIES), devices=list(EXTRA_DEVICES),
            network=record.network, networking_config={record.network: endpoint},
            volumes={str(layout.ssh): {"bind": SSH_MOUNT, "mode": "ro"}})
    except APIError as error:
        raise ProvisionError(f"starting container {record.container(node)} failed: "
                             f"{one_line(error.explanation or str(error), 200)}") from None


def _wait_for_sshd(client: Any, record: DockerRecord) -> None:
    def wait(index: int) -> None:
        node = record.node_names[index - 1]
        try:
            sshd.wait_ready(record.address(index), SSHD_READY_TIMEOUT_S, Path("/nonexistent"))
        except ProvisionError:
            raise ProvisionError(f"sshd in container {record.container(node)} did not accept connections "
                                 f"within {SSHD_READY_TIMEOUT_S} s: {_container_log(client, record, node)}") from None

    with ThreadPoolExecutor(max_workers=record.size) as executor:
        for future in [executor.submit(wait, i) for i in range(1, record.size + 1)]:
            future.result()


def _container_log(client: Any, record: DockerRecord, node: str) -> str:
    from docker.errors import DockerException
    try:
        container = client.containers.get(record.container(node))
        logs = container.logs(tail=3).decode(errors="replace")
        return one_line(f"status {container.status}; {logs}") or "no log output"
    except DockerException as error:
        return one_line(str(error))


# -- removing ---------------------------------------------------------------------------


def _remove_locked(client: Any, home: Path, name: str) -> bool:
    layout = Layout(home, name)
    present = layout.root.exists() or any(owned(client, home, name).values())
    if present:
        _teardown(client, home, name, layout.root)
    return present


def _sweep_locked(client: Any, home: Path) -> list[str]:
    removed = []
    known = set()
    for state_dir in _state_dirs(home):
        record = _read_record(state_dir)
        known.add(state_dir.name)
        reason = _stale_reason(client, record, home)
        if reason is not None:
            _teardown(client, home, state_dir.name, state_dir)
            removed.append(f"docker cluster {state_dir.name}: {reason}")
    objects = owned(client, home)
    names = {(_labels_of(o).get(LABEL_CLUSTER) or "") for o in objects["containers"] + objects["networks"]}
    for cluster in sorted(names - known - {""}):
        _teardown(client, home, cluster, None)
        removed.append(f"docker cluster {cluster}: containers/network without a state directory")
    return removed


def _labels_of(obj: Any) -> dict[str, str]:
    attrs = obj.attrs
    return attrs.get("Labels") or (attrs.get("Config") or {}).get("Labels") or {}


def _stale_reason(client: Any, record: DockerRecord | None, home: Path) -> str | None:
    """Why a docker cluster counts as left behind by a crash, or None if it is in use."""
    if record is None:
        return "its state directory has no readable cluster.json"
    owner_gone = not process_alive(record.owner_pid, record.owner_start)
    if owner_gone and record.status == "creating":
        return f"its creation by pid {record.owner_pid} never finished"
    if owner_gone and not record.persistent:
        return f"its owner (pid {record.owner_pid}) has exited"
    if record.status == "ready":
        running = [c for c in owned(client, home, record.name)["containers"] if c.status == "running"]
        if len(running) < record.size:
            return "some of its containers are gone or stopped (engine restarted?)"
    return None


def _teardown(client: Any, home: Path, name: str, state_dir: Path | None) -> None:
    """Remove the containers and network of `name` plus the state directory; idempotent."""
    from docker.errors import APIError

    def remove_all() -> bool:
        """One pass: containers first, then the network; True once nothing is left."""
        objects = owned(client, home, name)
        removals = [lambda c=c: c.remove(force=True, v=True) for c in objects["containers"]]
        removals += [n.remove for n in objects["networks"]]
        for remove in removals:
            try:
                remove()
            except APIError:  # gone already, or the network still has an endpoint: next pass
                pass
        return not any(objects.values())

    if not poll(remove_all, timeout=20, interval=0.2):
        left = owned(client, home, name)
        names = [c.name for c in left["containers"]] + [n.name for n in left["networks"]]
        raise ProvisionError(f"could not remove Docker objects {', '.join(names)} of cluster {name}")
    if state_dir is not None:
        shutil.rmtree(state_dir, ignore_errors=True)


# -- state directory ----------------------------------------------------------------------


def _state_dirs(home: Path) -> list[Path]:
    return state_dirs(home, Layout.kind)


def _read_record(state_dir: Path) -> DockerRecord | None:
    return read_record(state_dir, DockerRecord)
