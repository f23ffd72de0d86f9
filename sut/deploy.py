"""Deploying the SUT to the nodes of an inventory over SSH (Fabric, via inventory.Pool).

The only module of sut/ that imports more than the standard library. Layout
on every node, all under its workdir (nodes of the local cluster share one
file system, so nothing may live elsewhere):

    <workdir>/lib/sut/                   the uploaded package (PYTHONPATH=<workdir>/lib)
    <workdir>/conf/<process>.json        each process's config
    <workdir>/data/<process>/            data dir: <role>.pid, <role>.log, <role>.out, store

Processes are started detached (`python3 -m sut <role> --config ...`) and
found again by pidfile, never by a process-name pattern.
"""
from __future__ import annotations

import dataclasses
import json
import posixpath
import shlex
from pathlib import Path
from typing import Any, Callable

from inventory import CommandFailed, Inventory, InventoryError, Node, Pool
from sut import admin, cluster_state, systems
from sut.invariants import FILE_NAME as INVARIANTS_FILE
from sut.profiles import ProfileError, RenderedProcess, render, serves_kv
from sut.systems import ProcessRef

SUT_DIR = Path(__file__).resolve().parent
START_ORDER = {"namesrv": 0, "controller": 1, "broker": 2}


class DeployError(Exception):
    """The SUT could not be deployed or did not become healthy (one line)."""


class Placement:
    """Where a deployer's processes are: shared by the model's and RocketMQ's deployers."""

    nodes: list[Node]
    refs: list[ProcessRef]
    # Clock faults move the wall clock only, unless a system's leases read the monotonic one.
    fake_monotonic_clock = False

    def _place(self, pool: Pool | None, inventory: Inventory, profile_name: str, run_dir: str | Path,
               render_processes: Callable[[Any, list[str], list[str]], list[Any]]) -> list[Any]:
        """The common part of a deployer's set-up: the profile, checked workdirs, the
        processes rendered for these nodes (DeployError on a bad profile or node)."""
        try:
            self.profile = systems.profile(profile_name)
            nodes = list(inventory.nodes)
            for node in nodes:
                check_workdir(node)
            rendered = render_processes(self.profile, [n.host for n in nodes], [n.workdir for n in nodes])
        except ProfileError as exc:
            raise DeployError(str(exc)) from None
        self.pool = pool
        self.inventory = inventory
        self.run_dir = Path(run_dir)
        self.nodes = nodes
        # Called for every node before its data is wiped and its processes start
        # (the run mounts the crash file system on data_root(node) here).
        self.prepare_node: Callable[[Node], None] | None = None
        # Called around every start and restart of a process (a run with clock faults writes
        # the process's timestamp file before and notes its pid after).
        self.before_start: Callable[[ProcessRef], None] | None = None
        self.after_start: Callable[[ProcessRef, int], None] | None = None
        return rendered

    def _stop_and_prepare(self) -> None:
        """Before a start: stop what an earlier deployment left running, then let the run
        prepare every node (the crash file system's mount)."""
        self.stop()
        if self.prepare_node is not None:
            for node in self.used_nodes:
                self.prepare_node(node)

    def stop(self) -> None:
        raise NotImplementedError

    def add_env(self, env_of: Callable[[ProcessRef], dict[str, str]]) -> None:
        """Start every process with more environment (a run with clock faults: libfaketime's)."""
        self.refs = [dataclasses.replace(ref, env={**ref.env, **env_of(ref)}) for ref in self.refs]

    def start_process(self, ref: ProcessRef) -> int:
        """Start one process detached (also the restart hook of the kill nemesis); its pid."""
        if self.before_start is not None:
            self.before_start(ref)
        pid = self.pool.start_detached(ref.node, list(ref.argv), ref.pidfile, ref.logfile, cwd=ref.cwd,
                                       env=ref.env or None)
        if self.after_start is not None:
            self.after_start(ref, pid)
        return pid

    @staticmethod
    def data_root(node: Node) -> str:
        """The directory that holds every process's data dir on the node."""
        return posixpath.join(node.workdir, "data")

    @property
    def used_nodes(self) -> list[Node]:
        names = {r.node for r in self.refs}
        return [n for n in self.nodes if n.name in names]

    def processes(self, node_name: str) -> list[ProcessRef]:
        return [r for r in self.refs if r.node == node_name]


class ModelDeployer(Placement):
    """The model's deployer (sut.systems.Deployer): uploads sut/ and runs `python -m sut`."""

    # The model's leases and heartbeats read time.monotonic() where RocketMQ reads
    # System.currentTimeMillis(): a clock fault must move the monotonic clock too to reach them.
    fake_monotonic_clock = True

    def __init__(self, pool: Pool, inventory: Inventory, profile_name: str, run_dir: str | Path,
                 timing: str = "default", python: str = "python3", bugs: tuple[str, ...] = ()) -> None:
        rendered = self._place(pool, inventory, profile_name, run_dir,
                               lambda profile, hosts, workdirs: render(profile, hosts, workdirs, timing, bugs=bugs))
        self.python = python
        self.rendered = sorted(rendered, key=lambda p: (START_ORDER.get(p.role, 9), p.name))
        self.refs = [self._ref(p) for p in self.rendered]
        # Broker ids seen so far, so a SyncStateSet naming a broker that is down keeps its node.
        self._broker_nodes: dict[tuple[str, int], str] = {}

    def _ref(self, proc: RenderedProcess) -> ProcessRef:
        node = self.nodes[proc.node]
        config_path = posixpath.join(node.workdir, "conf", f"{proc.name}.json")
        return ProcessRef(
            node=node.name, role=proc.role, name=proc.name,
            pidfile=posixpath.join(proc.data_dir, f"{proc.role}.pid"),
            argv=(self.python, "-m", "sut", proc.role, "--config", config_path),
            config_path=config_path, data_dir=proc.data_dir, address=proc.address,
            cwd=node.workdir, logfile=posixpath.join(proc.data_dir, f"{proc.role}.out"),
            env={"PYTHONPATH": posixpath.join(node.workdir, "lib")})

    # -- lifecycle -----------------------------------------------------------------------
    def install(self) -> None:
        """Upload sut/ to every node that runs a process and check its Python."""
        check = [self.python, "-c", "import sys; print('%d.%d' % sys.version_info[:2]); "
                 "sys.exit(sys.version_info < (3, 11))"]
        for node in self.used_nodes:
            result = self.pool.run(node, check, check=False)
            if result.exited != 0:
                found = result.stdout.strip() or result.stderr.strip()[:120] or "nothing"
                raise DeployError(f"node {node.name}: the SUT needs {self.python} >= 3.11, found {found}")
            lib = posixpath.join(node.workdir, "lib")
            self.pool.run(node, ["rm", "-rf", posixpath.join(lib, "sut")])
            self.pool.put_dir(node, SUT_DIR, posixpath.join(lib, "sut"))

    def start(self) -> None:
        """Write every config, wipe old data and start every process (nameservers first).

        Processes of an earlier deployment that are still running are stopped first.
        """
        self._stop_and_prepare()
        local = self.run_dir / "sut-config"
        for proc, ref in zip(self.rendered, self.refs):
            path = local / ref.node / f"{ref.name}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(proc.config, indent=2))
            self.pool.run(ref.node, ["rm", "-rf", ref.data_dir])
            self.pool.put(ref.node, path, ref.config_path)
        for ref in self.refs:
            self.start_process(ref)

    def wait_healthy(self, timeout: float = 60.0) -> None:
        """Wait until every process answers PROCESS_STATUS with ready=true."""
        by_addr = {r.address: r for r in self.refs}
        pending = admin.run_sync(admin.wait_ready(list(by_addr), timeout))
        if pending:
            details = "; ".join(f"{by_addr[a].name} on {by_addr[a].node}: {why} "
                                f"(log {by_addr[a].data_dir}/{by_addr[a].role}.log)"
                                for a, why in pending.items())
            raise DeployError(f"SUT not healthy after {timeout:g}s: {details}")

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM every process (brokers first), SIGKILL what is still there after timeout."""
        errors = []
        for ref in reversed(self.refs):
            stop = shlex.join(["env", *(f"{k}={v}" for k, v in ref.env.items()), self.python, "-m",
                               "sut", "stop", ref.role, "--config", ref.config_path,
                               "--timeout", f"{timeout:g}"])
            cmd = f"if [ -e {shlex.quote(ref.config_path)} ]; then {stop}; fi"  # never configured: nothing runs
            try:
                self.pool.run(ref.node, cmd, timeout=timeout + 30)
            except InventoryError as exc:
                errors.append(str(exc))
        if errors:
            raise DeployError("could not stop every SUT process: " + "; ".join(errors))

    # -- queries -----------------------------------------------------------------------------
    def endpoints(self) -> dict[str, list[str]]:
        """Client addresses by kind: namesrv, brokers, controllers, kv (Raft KV servers)."""
        kinds = {"namesrv": "namesrv", "broker": "brokers", "controller": "controllers"}
        out: dict[str, list[str]] = {k: [] for k in [*kinds.values(), "kv"]}
        for proc, ref in zip(self.rendered, self.refs):
            out.setdefault(kinds.get(ref.role, ref.role), []).append(ref.address)
            if serves_kv(proc.role, proc.config):
                out["kv"].append(ref.address)
        return out

    def leader(self, role: str = "broker") -> str | None:
        """Node of the process of `role` that leads now (broker master, active controller).

        Asks every such process (PROCESS_STATUS `is_leader`); if several brokers
        claim to be master (an old master cut off), the nameserver's choice wins.
        """
        refs = [r for r in self.refs if r.role == role]

        async def ask() -> list[dict[str, Any] | None]:
            import asyncio
            return await asyncio.gather(*(admin.process_status(r.address, timeout=1.0) for r in refs))

        statuses = admin.run_sync(ask())
        leaders = [r for r, s in zip(refs, statuses) if s and s.get("is_leader")]
        if len(leaders) > 1 and role == "broker":
            named = self._namesrv_masters()
            preferred = [r for r in leaders if r.address in named]
            leaders = preferred or leaders
        return leaders[0].node if leaders else None

    def cluster_state(self, timeout: float = 0.5) -> dict[str, Any]:
        """The SUT's view of itself now (the dict documented in sut/cluster_state.py):
        every process asked at once, a silent one counted as down after `timeout`."""
        probes = [cluster_state.Probe(ref.node, ref.role, ref.name, ref.address,
                                      str(proc.config.get("broker_name", "")))
                  for proc, ref in zip(self.rendered, self.refs)]
        statuses = admin.run_sync(cluster_state.gather_statuses(probes, timeout))
        return cluster_state.summarize(probes, statuses, self._broker_nodes)

    def _namesrv_masters(self) -> set[str]:
        for ref in self.refs:
            if ref.role == "namesrv":
                info = admin.run_sync(admin.cluster_info(ref.address, timeout=1.0))
                if info:
                    return {g["addrs"]["0"] for g in info["brokers"].values() if "0" in g["addrs"]}
        return set()

    def collect_logs(self, dest_dir: str | Path) -> list[Path]:
        """Copy every process's log, stdout, config and invariant events (if it wrote any)
        to dest_dir/<node>/<process>/."""
        copied = []
        for ref in self.refs:
            target = Path(dest_dir) / ref.node / ref.name
            target.mkdir(parents=True, exist_ok=True)
            for remote in (posixpath.join(ref.data_dir, f"{ref.role}.log"), ref.logfile, ref.config_path,
                           posixpath.join(ref.data_dir, INVARIANTS_FILE)):
                try:
                    data = self.pool.read_file(ref.node, remote)
                except CommandFailed:
                    continue  # never started, or wiped: nothing to collect
                path = target / posixpath.basename(remote)
                path.write_bytes(data)
                copied.append(path)
        return copied


def make_deployer(pool: Pool | None, inventory: Inventory, profile_name: str, run_dir: str | Path,
                  timing: str = "default", bugs: tuple[str, ...] = (), release: str | None = None) -> systems.Deployer:
    """The deployer of the profile's system (sut/systems.py); DeployError for an unknown profile."""
    try:
        return systems.make_deployer(pool, inventory, profile_name, run_dir, timing=timing, bugs=bugs,
                                     release=release)
    except ProfileError as exc:
        raise DeployError(str(exc)) from None


def check_workdir(node: Node) -> None:
    workdir = node.workdir.rstrip("/")
    if not workdir.startswith("/") or workdir.count("/") < 2:
        raise ProfileError(f"node {node.name}: workdir '{node.workdir}' must be an absolute path "
                           "at least two levels deep (it holds data the deployer wipes)")
