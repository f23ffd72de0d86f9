"""The local cluster: one Linux bridge plus one network namespace per node.

Each node gets a veth pair (host end on the bridge, `eth0` inside its
namespace), its own address on a private /24 (10.213.X.0/24; the bridge is
.1, node i is .10+i), its own iptables (the namespace's), and its own sshd.
The control node reaches the nodes through the bridge, over SSH, exactly as it
reaches VMs. The file system and PID namespace are shared with the host, so
each node gets its own work directory.

All kernel objects carry the prefix `rmqc` plus a 6-hex tag derived from the
cluster name (interface names must fit IFNAMSIZ = 15 bytes), so `down` and the
stale-cluster sweep find exactly what a cluster owns and nothing else.

State lives in $CHAOS_HOME/clusters/<name>/ (default CHAOS_HOME:
/var/lib/rocketmq-chaos): cluster.json (the record), inventory.yaml,
known_hosts, keys/, sshd/ (config, pid and log files) and nodes/<node>/.
"""
from __future__ import annotations

import hashlib
import ipaddress
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import ClassVar

from inventory import sshd
from inventory.errors import ProvisionError, one_line
from inventory.local import (ClusterLayout, LocalClusterRecord, chaos_home, check_name, host_networks, locked,
                             poll, process_alive, process_start_time, read_record, run_command, state_dirs,
                             write_record)
from inventory.model import PATH_PATTERN, Inventory, Node

DEFAULT_NAME = "chaos"
DEFAULT_NODES = 5
MIN_NODES, MAX_NODES = 3, 9
PREFIX = "rmqc"
IFNAMSIZ_MAX = 15  # longest Linux interface name (IFNAMSIZ - 1)
NETWORK_PREFIX = "10.213"
NETNS_DIR = Path("/run/netns")
SYS_NET = Path("/sys/class/net")
SSHD_READY_TIMEOUT_S = 20
_OWNED = re.compile(rf"^{PREFIX}([0-9a-f]{{6}})(?:br|v\d+|-n\d+)$")


class ClusterRecord(LocalClusterRecord):
    """A namespace cluster: its bridge, namespaces and veths are named after its tag."""

    network_prefix: ClassVar[str] = NETWORK_PREFIX

    tag: str

    @property
    def bridge(self) -> str:
        return f"{PREFIX}{self.tag}br"

    @property
    def network(self) -> str:
        return self.cidr

    def netns(self, index: int) -> str:
        return f"{PREFIX}{self.tag}-n{index}"

    def veth(self, index: int) -> str:
        return f"{PREFIX}{self.tag}v{index}"


class Layout(ClusterLayout):
    """Paths inside one netns cluster's state directory (sshd runs on the host)."""

    def __init__(self, home: Path, name: str) -> None:
        super().__init__(home, name)
        self.host_key = self.root / "keys" / "host_ed25519"
        self.sshd_config = self.root / "sshd" / "sshd_config"
        self.authorized_keys = self.root / "sshd" / "authorized_keys"

    def sshd_pidfile(self, node: str) -> Path:
        return self.root / "sshd" / f"{node}.pid"

    def sshd_log(self, node: str) -> Path:
        return self.root / "sshd" / f"{node}.log"

    def workdir(self, node: str) -> Path:
        return self.root / "nodes" / node


# -- public API -------------------------------------------------------------------


def up(name: str = DEFAULT_NAME, nodes: int = DEFAULT_NODES, *, home: Path | None = None,
       persistent: bool = True, on_node: Callable[[str], None] | None = None) -> Inventory:
    """Create the cluster `name` with `nodes` nodes and return its inventory.

    All or nothing: if any step fails (or `on_node`, called after each node is
    set up, raises), everything created so far is removed before the error
    propagates. An existing cluster of the same name is replaced. A cluster
    that is not `persistent` lives only as long as the calling process: once
    that process is gone, the stale sweep (`down_stale`) removes it.
    """
    check_can_provision(name, nodes)
    home = home or chaos_home()
    with locked(home):
        _remove_locked(home, name)
        record = _reserve(home, name, nodes, persistent)
    layout = Layout(home, name)
    try:
        inventory = _build(record, layout, on_node)
    except BaseException:
        _teardown(record.tag, layout.root)
        raise
    return inventory


def down(name: str = DEFAULT_NAME, *, home: Path | None = None) -> bool:
    """Remove the cluster `name` entirely; False if there was nothing to remove."""
    _require_root("remove a local cluster")
    home = home or chaos_home()
    with locked(home):
        return _remove_locked(home, name)


def down_stale(*, home: Path | None = None, orphans: bool = True) -> list[str]:
    """Remove clusters left behind by crashed runs; one description per removal.

    Without `orphans`, only clusters with a state directory in `home` are
    considered (what `chaos run` sweeps automatically: namespaces of ours
    without a state directory may belong to another CHAOS_HOME being built).
    """
    _require_root("remove stale clusters")
    home = home or chaos_home()
    with locked(home):
        return _sweep_locked(home, everything=False, orphans=orphans)


def down_all(*, home: Path | None = None) -> list[str]:
    """Remove every local cluster and every orphaned kernel object of ours."""
    _require_root("remove local clusters")
    home = home or chaos_home()
    with locked(home):
        return _sweep_locked(home, everything=True)


def clusters(*, home: Path | None = None) -> list[ClusterRecord]:
    """The records of all clusters that have a state directory."""
    home = home or chaos_home()
    return [r for r in (read_record(d, ClusterRecord) for d in state_dirs(home, Layout.kind)) if r is not None]


def inventory_path(name: str = DEFAULT_NAME, *, home: Path | None = None) -> Path:
    return Layout(home or chaos_home(), name).inventory


def check_can_provision(name: str, nodes: int) -> None:
    """Validate the request before touching anything (one-line errors)."""
    check_name(name)
    if not MIN_NODES <= nodes <= MAX_NODES:
        raise ProvisionError(f"a local cluster has {MIN_NODES} to {MAX_NODES} nodes, not {nodes}")
    if not re.fullmatch(PATH_PATTERN, str(chaos_home())):
        raise ProvisionError(f"CHAOS_HOME {str(chaos_home())!r} must be an absolute path of letters, digits "
                             f"and ._+@%=,/- (the nodes' work directories live under it)")
    _require_root("create network namespaces")
    for tool in ("ip", "ssh-keygen"):
        if shutil.which(tool) is None:
            raise ProvisionError(f"{tool} not found: run bash scripts/setup.sh to install the system packages")
    sshd.check_available()


# -- choosing names and addresses (pure) --------------------------------------------


def choose_tag(name: str, used: dict[str, str]) -> str:
    """6 hex digits from the name; `used` maps tags already taken to their cluster."""
    for attempt in range(1000):
        seed = name if attempt == 0 else f"{name}#{attempt}"
        tag = hashlib.sha256(seed.encode()).hexdigest()[:6]
        if used.get(tag, name) == name:
            return tag
    raise ProvisionError("no free cluster tag (too many local clusters)")


def choose_subnet(name: str, taken: set[int], prefix: str = NETWORK_PREFIX) -> int:
    """Third octet of 10.213.X.0/24 (or `prefix`.X.0/24): derived from the name, else the next free one."""
    start = int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) % 256
    for step in range(256):
        candidate = (start + step) % 256
        if candidate not in taken:
            return candidate
    raise ProvisionError(f"every subnet {prefix}.X.0/24 is in use on this host")


def subnets_in_use(networks: list[ipaddress.IPv4Network], prefix: str = NETWORK_PREFIX) -> set[int]:
    """Which 10.213.X.0/24 (or `prefix`.X.0/24) overlap a network already configured on the host."""
    return {x for x in range(256)
            if any(ipaddress.ip_network(f"{prefix}.{x}.0/24").overlaps(n) for n in networks)}


# -- building ---------------------------------------------------------------------


def _reserve(home: Path, name: str, size: int, persistent: bool) -> ClusterRecord:
    """Pick tag and subnet and write the record (caller holds the lock)."""
    records = clusters(home=home)
    tag = choose_tag(name, {r.tag: r.name for r in records})
    taken = {r.subnet for r in records} | subnets_in_use(host_networks())
    pid = os.getpid()
    record = ClusterRecord(name=name, tag=tag, subnet=choose_subnet(name, taken), size=size,
                           owner_pid=pid, owner_start=process_start_time(pid) or 0, persistent=persistent)
    layout = Layout(home, name)
    layout.root.mkdir(parents=True, mode=0o700)
    write_record(layout, record)
    return record


def _build(record: ClusterRecord, layout: Layout, on_node: Callable[[str], None] | None) -> Inventory:
    _make_keys(record, layout)
    _make_bridge(record)
    for index, node in enumerate(record.node_names, start=1):
        _make_node(record, layout, index, node)
        if on_node is not None:
            on_node(node)
    _wait_for_sshd(record, layout)
    addresses = [record.address(i) for i in range(1, record.size + 1)]
    layout.known_hosts.write_text(sshd.known_hosts_lines(addresses, layout.host_key.with_suffix(".pub")))
    inventory = _inventory(record, layout)
    inventory.write(layout.inventory)
    inventory.source = layout.inventory
    write_record(layout, record.model_copy(update={"status": "ready"}))
    return inventory


def _make_keys(record: ClusterRecord, layout: Layout) -> None:
    for directory in (layout.client_key.parent, layout.sshd_config.parent):
        directory.mkdir(mode=0o700, exist_ok=True)
    sshd.generate_key(layout.client_key, f"rocketmq-chaos client {record.name}")
    sshd.generate_key(layout.host_key, f"rocketmq-chaos host {record.name}")
    shutil.copyfile(layout.client_key.with_suffix(".pub"), layout.authorized_keys)
    sshd.write_config(layout.sshd_config, layout.host_key, layout.authorized_keys)


def _make_bridge(record: ClusterRecord) -> None:
    _ip_batch(None, [f"link add {record.bridge} type bridge",
                     f"addr add {record.gateway}/24 dev {record.bridge}",
                     f"link set {record.bridge} up"])
    _allow_bridged_traffic(record)


def _make_node(record: ClusterRecord, layout: Layout, index: int, node: str) -> None:
    netns, veth = record.netns(index), record.veth(index)
    _ip_batch(None, [f"netns add {netns}",
                     f"link add {veth} type veth peer name eth0 netns {netns}",
                     f"link set {veth} master {record.bridge} up"])
    _ip_batch(netns, [f"addr add {record.address(index)}/24 dev eth0",
                      "link set eth0 up",
                      "link set lo up"])
    layout.workdir(node).mkdir(parents=True, exist_ok=True)
    sshd.start(netns, record.address(index), layout.sshd_config,
               layout.sshd_pidfile(node), layout.sshd_log(node))


def _wait_for_sshd(record: ClusterRecord, layout: Layout) -> None:
    def wait(index: int) -> None:
        node = record.node_names[index - 1]
        sshd.wait_ready(record.address(index), SSHD_READY_TIMEOUT_S, layout.sshd_log(node))

    with ThreadPoolExecutor(max_workers=record.size) as executor:
        for future in [executor.submit(wait, i) for i in range(1, record.size + 1)]:
            future.result()


def _inventory(record: ClusterRecord, layout: Layout) -> Inventory:
    nodes = [Node(name=node, host=record.address(index), key_file=layout.client_key, user="root",
                  workdir=str(layout.workdir(node)), netns=record.netns(index))
             for index, node in enumerate(record.node_names, start=1)]
    return Inventory(name=record.name, kind="netns", nodes=nodes, strict_host_keys=True,
                     known_hosts=layout.known_hosts)


def _allow_bridged_traffic(record: ClusterRecord) -> None:
    """Let node-to-node traffic cross the bridge even if the host FORWARD policy drops.

    Only matters when br_netfilter hands bridged frames to the host's
    iptables (Docker loads it and sets FORWARD to DROP).
    """
    if not _bridge_netfilter_on():
        return
    run_command(["iptables", "-w", "5", "-I", "FORWARD", "-i", record.bridge, "-o", record.bridge,
          "-m", "comment", "--comment", f"{PREFIX}{record.tag}", "-j", "ACCEPT"], "iptables")


# -- removing ---------------------------------------------------------------------


def _remove_locked(home: Path, name: str) -> bool:
    layout = Layout(home, name)
    record = read_record(layout.root, ClusterRecord)
    tag = record.tag if record else choose_tag(name, {r.tag: r.name for r in clusters(home=home)})
    present = layout.root.exists() or bool(_owned_objects(tag))
    if present:
        _teardown(tag, layout.root)
    return present


def _sweep_locked(home: Path, everything: bool, orphans: bool = True) -> list[str]:
    removed: list[str] = []
    namespaces, links = _list_netns(), _list_links()
    known_tags: set[str] = set()
    for state_dir in state_dirs(home, Layout.kind):
        record = read_record(state_dir, ClusterRecord)
        if record is not None:
            known_tags.add(record.tag)
        reason = "removed on request" if everything else _stale_reason(record, namespaces, links)
        if reason is not None:
            _teardown(record.tag if record else None, state_dir)
            removed.append(f"cluster {state_dir.name}: {reason}")
    for tag in sorted(_owned_tags(namespaces, links) - known_tags) if orphans else ():
        # Without a state directory here, objects still running processes may
        # belong to a cluster of another CHAOS_HOME: only --all takes those.
        in_use = bool(_pids_in({n for n in namespaces if _tag_of(n) == tag}))
        if everything or not in_use:
            _teardown(tag, None)
            removed.append(f"orphaned namespaces/links {PREFIX}{tag}*: no state directory")
    return removed


def _stale_reason(record: ClusterRecord | None, namespaces: set[str], links: set[str]) -> str | None:
    """Why a cluster counts as left behind by a crash, or None if it is in use."""
    if record is None:
        return "its state directory has no readable cluster.json"
    owner_gone = not process_alive(record.owner_pid, record.owner_start)
    if owner_gone and record.status == "creating":
        return f"its creation by pid {record.owner_pid} never finished"
    if owner_gone and not record.persistent:
        return f"its owner (pid {record.owner_pid}) has exited"
    if record.status == "ready":
        expected = {record.netns(i) for i in range(1, record.size + 1)}
        if not expected <= namespaces or record.bridge not in links:
            return "its namespaces or bridge are gone (host rebooted?)"
    return None


def _teardown(tag: str | None, state_dir: Path | None) -> None:
    """Remove everything carrying `tag` plus the state directory; idempotent."""
    if state_dir is not None:
        for pidfile in state_dir.glob("sshd/*.pid"):
            sshd.stop(pidfile)
    if tag is not None:
        namespaces = sorted(n for n in _list_netns() if _tag_of(n) == tag)
        _kill_processes_in(namespaces)
        for netns in namespaces:
            run_command(["ip", "netns", "delete", netns], "ip netns delete", check=False)
        links = sorted(_list_links_of(tag), key=lambda link: link.endswith("br"))  # veths first
        for link in links:
            run_command(["ip", "link", "delete", link], "ip link delete", check=False)
        _remove_forward_rules(tag)
        _wait_until_gone(tag)
    if state_dir is not None:
        shutil.rmtree(state_dir, ignore_errors=True)


def _pids_in(namespaces: set[str] | list[str]) -> list[int]:
    """Processes living in any of these namespaces."""
    inodes = set()
    for netns in namespaces:
        try:
            inodes.add(os.stat(NETNS_DIR / netns).st_ino)
        except OSError:
            continue
    return [pid for pid in _pids() if _netns_inode(pid) in inodes] if inodes else []


def _kill_processes_in(namespaces: list[str]) -> None:
    """SIGKILL every process living in these namespaces (sshd, sessions, the SUT).

    Repeats until none is left, so a process forked during the sweep dies too.
    """
    def kill_survivors() -> list[int]:
        survivors = _pids_in(namespaces)
        for pid in survivors:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return survivors

    poll(lambda: not kill_survivors(), timeout=10)


def _remove_forward_rules(tag: str) -> None:
    if shutil.which("iptables") is None:
        return
    listing = subprocess.run(["iptables", "-w", "5", "-S", "FORWARD"], capture_output=True, text=True)
    for line in listing.stdout.splitlines():
        if line.startswith("-A FORWARD") and f"--comment {PREFIX}{tag}" in line:
            rule = line.split()[2:]
            run_command(["iptables", "-w", "5", "-D", "FORWARD", *rule], "iptables -D", check=False)


def _wait_until_gone(tag: str) -> None:
    """Veths vanish asynchronously once their namespace is freed."""
    if not poll(lambda: not _owned_objects(tag), timeout=10):
        left = ", ".join(sorted(_owned_objects(tag)))
        raise ProvisionError(f"could not remove {left}; see `ip link` and `ip netns list`")


# -- host inspection ------------------------------------------------------------------


def _list_netns() -> set[str]:
    try:
        return {p.name for p in NETNS_DIR.iterdir()}
    except FileNotFoundError:
        return set()


def _list_links() -> set[str]:
    return {p.name for p in SYS_NET.iterdir()}


def _tag_of(object_name: str) -> str | None:
    match = _OWNED.match(object_name)
    return match.group(1) if match else None


def _list_links_of(tag: str) -> set[str]:
    return {link for link in _list_links() if _tag_of(link) == tag}


def _owned_objects(tag: str) -> set[str]:
    return {n for n in _list_netns() | _list_links() if _tag_of(n) == tag}


def _owned_tags(namespaces: set[str], links: set[str]) -> set[str]:
    return {t for t in (_tag_of(n) for n in namespaces | links) if t is not None}


def _bridge_netfilter_on() -> bool:
    try:
        return Path("/proc/sys/net/bridge/bridge-nf-call-iptables").read_text().strip() == "1"
    except OSError:
        return False


def _pids() -> Iterator[int]:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            yield int(entry)


def _netns_inode(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


# -- state directory --------------------------------------------------------------------


# -- small helpers -------------------------------------------------------------------------


def _require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise ProvisionError(f"root is needed to {what}; run it as root (e.g. with sudo)")


def _ip_batch(netns: str | None, commands: list[str]) -> None:
    """Several `ip` commands in one process (fast); stops at the first failure."""
    argv = ["ip", "-batch", "-"] if netns is None else ["ip", "-n", netns, "-batch", "-"]
    proc = subprocess.run(argv, input="\n".join(commands) + "\n", capture_output=True, text=True)
    if proc.returncode != 0:
        raise ProvisionError(f"ip {'' if netns is None else f'-n {netns} '}failed: {one_line(proc.stderr)}")
