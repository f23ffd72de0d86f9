"""Deploying real RocketMQ to the nodes of an inventory over SSH (Fabric, via inventory.Pool).

The same interface as the model's deployer (sut.systems.Deployer: install, start,
wait_healthy, stop, processes, endpoints, leader, collect_logs, start_process,
cluster_state), so the run
lifecycle, the nemeses and `chaos heal` work unchanged. The release is
uploaded once per node into a content-addressed directory and skipped when
present; processes start detached with pidfiles and are found again by them
(nuclei check that the pid's command line is the one started).
"""
from __future__ import annotations

import posixpath
import shlex
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from inventory import CommandFailed, Inventory, InventoryError, Node, Pool
from sut.deploy import DeployError, Placement
from sut.systems import ProcessRef
from sut.rocketmq import admin, class_archive
from sut.rocketmq.config import RmqProcess, properties_text, release_dir, render
from sut.rocketmq.release import (ReleaseError, check_version, ensure, pinned, profile_refusal,
                                  release_id)

START_ORDER = {"namesrv": 0, "controller": 1, "broker": 2}
ADMIN_TIMEOUT_S = 5.0


# Seven JVMs started one after another on a loaded 2-core machine (load average 20 or
# more) take longer than the run's 90 s to be routed; a slow start is not a broken one.
MIN_HEALTHY_WAIT_S = 180.0


class RocketMQDeployer(Placement):
    # RocketMQ's leases and heartbeats read System.currentTimeMillis(), but the monotonic clock
    # moves too: with FAKETIME_DONT_FAKE_MONOTONIC, libfaketime 0.9.10 makes every timed wait of
    # a JVM (Object.wait, LockSupport.parkNanos) return at once, and its service threads spin.
    fake_monotonic_clock = True

    def __init__(self, pool: Pool | None, inventory: Inventory, profile_name: str, run_dir: str | Path,
                 timing: str = "default", java: str = "java", bugs: tuple[str, ...] = (),
                 version: str | None = None, class_archives: bool = True) -> None:
        if bugs:  # RunSpec refuses them first (sut/systems.py: no bug library here)
            raise DeployError(f"real RocketMQ has no bug library: cannot switch on {', '.join(bugs)}")
        try:
            self.version = check_version(version or pinned())
        except ReleaseError as exc:
            raise DeployError(str(exc)) from None
        self.release = release_id(self.version)
        rendered = self._place(pool, inventory, profile_name, run_dir,
                               lambda profile, hosts, workdirs: render(profile, hosts, workdirs, self.release,
                                                                       timing, java, class_archives, self.version))
        refused = profile_refusal(self.profile, self.version)
        if refused:
            raise DeployError(refused)
        self.timing = timing
        self.class_archives = class_archives
        self.notes: list[str] = []   # what the run record should say (an archive not made)
        self.rendered = sorted(rendered, key=lambda p: (START_ORDER[p.role], p.name))
        self.refs = [self._ref(p) for p in self.rendered]

    def _ref(self, proc: RmqProcess) -> ProcessRef:
        node = self.nodes[proc.node]
        return ProcessRef(node=node.name, role=proc.role, name=proc.name, pidfile=proc.pidfile, argv=proc.argv,
                          config_path=proc.config_path, data_dir=proc.data_dir, address=proc.address,
                          cwd=proc.data_dir, logfile=proc.stdout)

    # -- lifecycle -----------------------------------------------------------------------
    def install(self) -> None:
        """Check each node's JDK and put the release there unless it already is; then
        each node's class-data-sharing archives (class_archive.py) unless they are there."""
        try:
            home = ensure(self.version)
        except ReleaseError as exc:
            raise DeployError(str(exc)) from None
        for node in self.used_nodes:
            self._check_java(node)
            target = release_dir(node.workdir, self.release)
            present = self.pool.run(node, ["test", "-f", posixpath.join(target, ".stamp")], check=False)
            if present.exited == 0:
                continue
            partial = target + ".part"
            self.pool.run(node, ["rm", "-rf", partial])
            self.pool.put_dir(node, home, partial, exclude=("mvn.log",), timeout=600)
            self.pool.run(node, ["mv", "-T", partial, target])
        if self.class_archives:
            self.install_class_archives(home)

    def install_class_archives(self, home: Path) -> None:
        """Every node's archive of every role it runs, made there once per release and JDK.
        Only time is at stake: a failure is noted and the JVMs start without (-Xshare:auto)."""
        try:
            lists = class_archive.class_lists(home)
        except (class_archive.ArchiveError, OSError) as exc:
            self.notes.append(f"no class-data-sharing archives: {exc}")
            return

        def on_node(node: Node) -> str | None:
            target = release_dir(node.workdir, self.release)
            roles = sorted({p.role for p in self.rendered if self.nodes[p.node].name == node.name})
            try:
                for role in roles:
                    remote = posixpath.join(target, "cds", f"{role}.classlist")
                    if self.pool.run(node, ["test", "-f", remote], check=False).exited != 0:
                        self.pool.put(node, lists / f"{role}.classlist", remote)
                    self.pool.run(node, class_archive.dump_command(target, role), timeout=class_archive.DUMP_TIMEOUT_S)
            except InventoryError as exc:
                return f"node {node.name}: {exc}"
            return None

        with ThreadPoolExecutor(max_workers=max(1, len(self.used_nodes))) as workers:
            problems = [p for p in workers.map(on_node, self.used_nodes) if p]
        if problems:
            self.notes.append("class-data-sharing archives not made (the JVMs start without): " + "; ".join(problems))

    def _check_java(self, node: Node) -> None:
        result = self.pool.run(node, "java -version 2>&1", check=False)
        text = result.stdout.strip()
        major = _java_major(text)
        if result.exited != 0 or major is None or major < 17:
            found = text.splitlines()[0][:120] if text else "no java on PATH"
            raise DeployError(f"node {node.name}: real RocketMQ needs a JDK 17+ on the node, found: {found}")

    def start(self) -> None:
        """Write every config, wipe old data, start every process (nameserver, controllers, brokers)."""
        self._stop_and_prepare()
        local = self.run_dir / "sut-config"
        for proc, ref in zip(self.rendered, self.refs):
            path = local / ref.node / posixpath.basename(proc.config_path)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(properties_text(proc))
            self.pool.run(ref.node, ["rm", "-rf", ref.data_dir])
            self.pool.run(ref.node, ["mkdir", "-p", ref.data_dir])
            self.pool.put(ref.node, path, proc.config_path)
        for ref in self.refs:
            if ref.role == "broker" and ref is self._first_broker():
                self._wait_controller_leader()
            self.start_process(ref)

    def _first_broker(self) -> ProcessRef | None:
        return next((r for r in self.refs if r.role == "broker"), None)

    def _wait_controller_leader(self, timeout: float = 60.0) -> None:
        """Brokers in Controller mode retry their first registration only every few
        seconds: starting them once the controllers have a leader saves that wait."""
        controllers = [r.address for r in self.refs if r.role == "controller"]
        deadline = time.monotonic() + timeout
        while controllers and time.monotonic() < deadline:
            if any(map(self._ask_leader, controllers)):
                return
            time.sleep(0.5)

    def wait_healthy(self, timeout: float = 90.0) -> None:
        """Wait until the nameserver routes every broker and its group has a master (at
        least MIN_HEALTHY_WAIT_S: a process that died fails the wait at once anyway)."""
        timeout = max(timeout, MIN_HEALTHY_WAIT_S)
        deadline = time.monotonic() + timeout
        why = "no answer yet"
        while time.monotonic() < deadline:
            dead = self._dead_processes()
            if dead:
                raise DeployError(f"RocketMQ processes exited during start: {', '.join(dead)} "
                                  f"(see <role>.out and logs/rocketmqlogs/ in their data dirs)")
            why = self._unhealthy()
            if why is None:
                return
            time.sleep(1.0)
        raise DeployError(f"RocketMQ not healthy after {timeout:g}s: {why}")

    def _unhealthy(self) -> str | None:
        try:
            entries = admin.cluster_list(self.namesrv, ADMIN_TIMEOUT_S)
        except admin.AdminError as exc:
            return str(exc)
        routed = {e.address for e in entries}
        brokers = [r.address for r in self.refs if r.role == "broker"]
        missing = [a for a in brokers if a not in routed]
        if missing:
            return f"brokers not routed by the nameserver: {', '.join(missing)}"
        if not any(e.broker_id == 0 for e in entries):
            return "the broker group has no master"
        return self._sync_state_incomplete()

    def _sync_state_incomplete(self) -> str | None:
        """Controller mode: why the SyncStateSets do not hold every broker yet. A cluster
        counts as up only when they do, so that the first fault finds every replica
        electable, as a long-running cluster has it, rather than the master alone."""
        controllers = [r.address for r in self.refs if r.role == "controller"]
        if not controllers:
            return None
        leader = next(filter(None, map(self._ask_leader, controllers)), None)
        if leader is None:
            return "the controllers have no leader"
        groups: dict[str, dict[str, Any]] = {
            self._group_of(r): {"sync_state_set": None} for r in self.refs if r.role == "broker"}
        self._add_sync_state(leader, groups, ADMIN_TIMEOUT_S)
        for name, group in sorted(groups.items()):
            members = {r.node for r in self.refs if r.role == "broker" and self._group_of(r) == name}
            missing = sorted(members - set(group["sync_state_set"] or ()))
            if missing:
                return f"{name}: SyncStateSet lacks {', '.join(missing)}"
        return None

    def _dead_processes(self) -> list[str]:
        dead = []
        for ref in self.refs:
            check = f"kill -0 $(cat {shlex.quote(ref.pidfile)}) 2>/dev/null"
            if self.pool.run(ref.node, check, check=False).exited != 0:
                dead.append(f"{ref.name} on {ref.node}")
        return dead

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM every process, SIGKILL what is still there after timeout; the
        processes of a node in parallel, the nodes in parallel.

        A pid is signalled only if its command line carries the process's own data
        dir (local nodes share one pid namespace: a stale pidfile may name a stranger).
        """
        by_node: dict[str, list[ProcessRef]] = {}
        for ref in self.refs:
            by_node.setdefault(ref.node, []).append(ref)

        def stop_node(node: str) -> str | None:
            script = " ".join(f"( {_stop_script(r.pidfile, r.data_dir, timeout)} ) &" for r in by_node[node])
            try:
                self.pool.run(node, f"{script} wait", timeout=timeout + 30)
            except InventoryError as exc:
                return str(exc)
            return None

        with ThreadPoolExecutor(max_workers=max(1, len(by_node))) as workers:
            errors = [e for e in workers.map(stop_node, list(by_node)) if e]
        admin.close()
        if errors:
            raise DeployError("could not stop every RocketMQ process: " + "; ".join(errors))

    # -- queries -----------------------------------------------------------------------------
    @property
    def namesrv(self) -> str:
        return ";".join(r.address for r in self.refs if r.role == "namesrv")

    def endpoints(self) -> dict[str, list[str]]:
        kinds = {"namesrv": "namesrv", "broker": "brokers", "controller": "controllers"}
        out: dict[str, list[str]] = {k: [] for k in [*kinds.values(), "kv"]}
        for ref in self.refs:
            out[kinds[ref.role]].append(ref.address)
        return out

    def leader(self, role: str = "broker") -> str | None:
        """Node of the broker master (brokerId 0 in the nameserver's routes) or of the
        controllers' Raft leader; None if nobody answers or nobody leads."""
        try:
            if role == "controller":
                controllers = [r.address for r in self.refs if r.role == "controller"]
                address = next((a for a in map(self._ask_leader, controllers) if a), None)
            else:
                address = next((e.address for e in admin.cluster_list(self.namesrv, ADMIN_TIMEOUT_S)
                                if e.broker_id == 0), None)
        except admin.AdminError:
            return None
        return self._node_of(address, role)

    def _ask_leader(self, controller: str) -> str | None:
        try:
            return admin.controller_leader(self.namesrv, controller, ADMIN_TIMEOUT_S)
        except admin.AdminError:
            return None

    def _node_of(self, address: str | None, role: str) -> str | None:
        if address is None:
            return None
        host = address.rsplit(":", 1)[0]
        return next((r.node for r in self.refs if r.role == role and r.address.rsplit(":", 1)[0] == host), None)

    def collect_logs(self, dest_dir: str | Path) -> list[Path]:
        """Copy every process's main log, stdout, config and the logs that report broken
        invariants (RmqProcess.invariant_logs) to dest_dir/<node>/<process>/."""
        copied = []
        for proc, ref in zip(self.rendered, self.refs):
            target = Path(dest_dir) / ref.node / ref.name
            target.mkdir(parents=True, exist_ok=True)
            for remote in (proc.log, proc.stdout, proc.config_path, *proc.invariant_logs):
                try:
                    data = self.pool.read_file(ref.node, remote)
                except CommandFailed:
                    continue
                path = target / posixpath.basename(remote)
                path.write_bytes(data)
                copied.append(path)
        return copied

    def cluster_state(self, timeout: float = ADMIN_TIMEOUT_S) -> dict[str, Any]:
        """The SUT's view of itself in sut/cluster_state.py's shape, from RocketMQ's admin
        API: the nameserver's routes (brokerId 0 is master), the controllers' metadata
        and the leader's SyncStateSet. A broker the nameserver does not route is `down`,
        and so is a controller silent for `timeout` seconds."""
        answered: set[str] = set()
        groups: dict[str, dict[str, Any]] = {}
        brokers = [r for r in self.refs if r.role == "broker"]
        for ref in brokers:
            group = groups.setdefault(self._group_of(ref), {"master": None, "epoch": None, "term": None,
                                                            "sync_state_set": None, "members": {}})
            group["members"][ref.node] = "down"
        try:
            for entry in admin.cluster_list(self.namesrv, timeout):
                node = self._node_of(entry.address, "broker")
                if node is None or entry.broker_name not in groups:
                    continue
                answered.add(node)
                groups[entry.broker_name]["members"][node] = "master" if entry.broker_id == 0 else "slave"
                if entry.broker_id == 0:
                    groups[entry.broker_name]["master"] = node
            answered.update(r.node for r in self.refs if r.role == "namesrv")
        except admin.AdminError:
            pass
        controller = self._controller_state(groups, answered, timeout)
        nodes = {ref.node: {"reachable": ref.node in answered, "down": []} for ref in self.refs}
        for ref in self.refs:
            up = ref.node in answered and (ref.role != "broker" or
                                            groups[self._group_of(ref)]["members"][ref.node] != "down")
            if not up:
                nodes[ref.node]["down"].append(ref.name)
        return {"groups": dict(sorted(groups.items())), "controller": controller, "nodes": dict(sorted(nodes.items()))}

    def _group_of(self, ref: ProcessRef) -> str:
        proc = next(p for p in self.profile.processes if p.name == ref.name)
        return str(proc.config.get("broker_name", ref.name))

    def _controller_state(self, groups: dict[str, dict[str, Any]], answered: set[str],
                          timeout: float) -> dict[str, Any] | None:
        controllers = [r for r in self.refs if r.role == "controller"]
        if not controllers:
            return None
        members, leader_addr = {}, None
        for ref in controllers:
            try:
                meta = admin.ask("controller_meta", timeout, namesrv=self.namesrv, controller=ref.address)
            except admin.AdminError:
                members[ref.node] = "down"
                continue
            answered.add(ref.node)
            members[ref.node] = "leader" if meta.get("is_leader") else "follower"
            leader_addr = leader_addr or meta.get("leader_addr")
        leader = next((n for n, role in members.items() if role == "leader"), None)
        if leader_addr is not None:
            self._add_sync_state(leader_addr, groups, timeout)
        return {"leader": leader, "term": None, "members": members}

    def _add_sync_state(self, controller: str, groups: dict[str, dict[str, Any]], timeout: float) -> None:
        try:
            state = admin.sync_state(self.namesrv, controller, sorted(groups), timeout)
        except admin.AdminError:
            return
        for name, info in state.items():
            if name in groups:
                groups[name]["epoch"] = info.get("master_epoch")
                groups[name]["sync_state_set"] = sorted(
                    n for n in (self._node_of(r.get("addr"), "broker") for r in live_sync_state_members(info)) if n)


def live_sync_state_members(info: dict[str, Any]) -> list[dict[str, Any]]:
    """The SyncStateSet members that are still the broker at their address.

    A Controller-mode broker that lost its `brokerIdentity` file (RocketMQ writes it
    without fsync, so a machine crash may take it) registers again under a new
    brokerId; the controllers keep its old id in the SyncStateSet, where it can
    never come back. Such an id is not counted as its node's broker."""
    replicas = [*(info.get("in_sync") or []), *(info.get("not_in_sync") or [])]
    alive_at = {r.get("addr"): r.get("id") for r in replicas if r.get("alive")}
    return [r for r in info.get("in_sync") or [] if alive_at.get(r.get("addr"), r.get("id")) == r.get("id")]


def _java_major(version_text: str) -> int | None:
    for word in version_text.replace('"', " ").split():
        head = word.split(".")[0].split("-")[0]
        if head.isdigit() and ("." in word or "-" in word):
            major = int(head)
            return int(word.split(".")[1]) if major == 1 else major
    return None


def _stop_script(pidfile: str, data_dir: str, timeout: float) -> str:
    """Shell: TERM the pidfile's process if it is ours, wait, then KILL it."""
    pid_q, mark = shlex.quote(pidfile), shlex.quote(f"-Duser.home={data_dir}")
    ours = f'tr "\\0" "\\n" </proc/$pid/cmdline 2>/dev/null | grep -qxF -- {mark}'
    steps = int(max(1, timeout * 5))
    return (f"[ -f {pid_q} ] || exit 0; pid=$(cat {pid_q}); [ -n \"$pid\" ] || exit 0; "
            f"if {ours}; then kill -TERM $pid 2>/dev/null; i=0; "
            f"while kill -0 $pid 2>/dev/null && [ $i -lt {steps} ]; do sleep 0.2; i=$((i+1)); done; "
            f"if kill -0 $pid 2>/dev/null; then kill -KILL $pid 2>/dev/null; sleep 0.2; fi; fi; "
            f"rm -f {pid_q}")
