"""One run, end to end (docs/architecture.md, "One run"): the lifecycle behind `chaos run`.

    cluster -> deploy -> workload + fault schedule -> heal -> workload goes on
    for the recovery period -> final phase (drain) -> collect logs -> stop ->
    checkers -> report -> run.json

Everything the run does is written under its run directory as it happens,
so a run cut short still leaves what it recorded. Faults are healed whatever
happens (the schedule runner heals in its own `finally`, and the lifecycle
heals the journal once more as a safety net); the SUT is stopped and a
cluster the run brought up is taken down again, also on Ctrl-C. A second
Ctrl-C during clean-up is deferred until the clean-up is done.
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import random
import secrets
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterator

import faults
import nuclei
from checkers.ops import WRITE_FUNCTIONS
from faults.clock import needs_clock_preload
from faults.crash import needs_crash_fs, run_dirty_expire
from faults.runner import ActiveFault, ScheduleRunner
from faults.schedule import FaultSpec
from faults.targets import normalize_roles
from faults.triggers import StateFeed
from faults.validate import validate
from nuclei import clock
from nuclei.heal import AFTER_STOP_ACTIONS
from harness.cluster_state import FILE_NAME as CLUSTER_FILE, ClusterRecorder
from harness.console import LiveStatus, deferred_sigint, live_display, please_wait
from harness.signals import run_stoppable, stop_reason
from harness.stale import release_lease, take_lease
from harness import schedule as schedule_file
from harness.plan import fault_schedule, from_spec, make_workload, operation_plan, plan_summary
from harness.spec import RunSpec
from harness.store import RunDir, Store, slug, write_json, write_text
from inventory import Inventory, InventoryError, Pool, docker, load, netns
from records import CampaignJson, CheckInputs, RunJson
from sut.deploy import DeployError, make_deployer
from sut import systems
from sut.systems import Deployer
from workloads.base import run_together
from workloads.clients import Endpoints
from workloads.history import Clock, EventLog
from workloads.register import serves_kv
from workloads.runner import WorkloadRun

REPO = Path(__file__).resolve().parent.parent
HEALTHY_TIMEOUT_S = 90.0


class RunError(Exception):
    """A run could not go on (cluster, deploy, fault setup): one line, recorded in run.json."""


# -- the record (run.json) -------------------------------------------------------------

def versions() -> dict[str, Any]:
    try:
        harness_version = metadata.version("rocketmq-chaos")
    except metadata.PackageNotFoundError:
        harness_version = None
    try:
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                                text=True, timeout=5).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    return {"harness": harness_version, "git_commit": commit, "python": platform.python_version(),
            "platform": platform.platform()}


def check_inputs(spec: RunSpec, summary: dict[str, Any]) -> CheckInputs:
    """The facts the checkers read from run.json: settings, thresholds and the profile's timings."""
    try:
        detection = systems.failure_detection_s(spec.profile, spec.timing)
        window = systems.failover_window_s(spec.profile, spec.timing)
    except systems.ProfileError:
        detection = window = None
    return CheckInputs(workload=spec.workload, profile=spec.profile, seed=spec.seed, ordered=spec.ordered,
                       rto_threshold_s=spec.rto_threshold_s, min_availability=spec.min_availability,
                       timing=spec.timing, write_rate=write_rate(spec.rate, summary),
                       detection_s=detection, failover_window_s=window)


def write_rate(rate: float, summary: dict[str, Any]) -> float | None:
    """The requested rate times the share of writes in the planned operations (plan_summary)."""
    total = summary.get("operations")
    if not total:
        return None
    writes = sum(n for f, n in summary.get("by_f", {}).items() if f in WRITE_FUNCTIONS)
    return float(rate) * writes / total


@dataclass
class RunRecord:
    """What run.json says about the run; saved at every phase change."""

    spec: RunSpec
    run: RunDir
    campaign_id: str
    started: float = field(default_factory=time.time)
    status: str = "running"  # running -> checking -> complete | interrupted | error
    error: str | None = None
    stop_reason: str | None = None
    valid: Any = None
    phases: dict[str, dict[str, float]] = field(default_factory=dict)
    inventory: dict[str, Any] | None = None
    cluster: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    history_origin_s: float | None = None
    heal: list[str] = field(default_factory=list)
    _versions: dict[str, Any] = field(default_factory=versions)

    def as_json(self) -> dict[str, Any]:
        return RunJson(
            run_id=self.run.run_id, campaign_id=self.campaign_id,
            workload=self.spec.workload, profile=self.spec.profile, faults=list(self.spec.faults),
            seed=self.spec.seed, bugs=list(self.spec.bugs), spec=self.spec.model_dump(mode="json"),
            checks=check_inputs(self.spec, self.summary),
            status=self.status, error=self.error, stop_reason=self.stop_reason, valid=self.valid,
            started_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
            timings={"phases": self.phases, "history_origin_s": self.history_origin_s,
                     # where the SUT's wall-clock log times meet the history's clock (checkers/invariants.py)
                     "history_origin_unix": (None if self.history_origin_s is None
                                             else round(self.started + self.history_origin_s, 3)),
                     "total_s": round(time.time() - self.started, 3)},
            plan=self.summary, inventory=self.inventory, cluster=self.cluster,
            heal=self.heal, notes=self.notes,
            versions={**self._versions, **({"rocketmq": self.spec.rocketmq_version}
                                           if self.spec.rocketmq_version else {})},
        ).as_json()

    def save(self) -> None:
        write_json(self.run.run_json, self.as_json())

    def phase_start(self, name: str) -> None:
        self.phases[name] = {"start_s": round(time.time() - self.started, 3)}
        self.save()

    def phase_end(self, name: str) -> None:
        """Close a phase once (later calls keep the first end)."""
        if name in self.phases and "end_s" not in self.phases[name]:
            self.phases[name]["end_s"] = round(time.time() - self.started, 3)
            self.save()

    @contextlib.contextmanager
    def phase(self, name: str, progress: LiveStatus | None = None) -> Iterator[None]:
        if progress is not None:
            progress.phase = name
        self.phase_start(name)
        try:
            yield
        finally:
            self.phase_end(name)


@dataclass
class RunOutcome:
    run: RunDir
    status: str          # complete | interrupted | error
    valid: Any           # True | False | "unknown" | None (no verdict)
    error: str | None


# -- the cluster --------------------------------------------------------------------------

@contextlib.contextmanager
def cluster_for(spec: RunSpec, record: RunRecord, console: Any) -> Iterator[Inventory]:
    """The nodes of the run: --inventory, else the local default cluster if it is up,
    else a local cluster brought up for this run and taken down after it."""
    if spec.inventory is not None:
        record.cluster = {"source": "inventory", "file": str(spec.inventory)}
        yield load(spec.inventory)
        return
    provider = docker if spec.provider == "docker" else netns
    existing = provider.inventory_path(provider.DEFAULT_NAME)
    if existing.is_file():
        inventory = load(existing)
        if spec.nodes is None or spec.nodes == len(inventory.nodes):
            record.cluster = {"source": "existing", "name": provider.DEFAULT_NAME, "file": str(existing)}
            yield inventory
            return
    size = spec.nodes or provider.DEFAULT_NODES
    name = f"run-{secrets.token_hex(3)}"
    console.print(f"bringing up a local {spec.provider} cluster {name} of {size} nodes (taken down after the run)")
    record.cluster = {"source": "provisioned", "provider": spec.provider, "name": name, "nodes": size}
    with record.phase("cluster"):
        inventory = provider.up(name, size, persistent=False)
    try:
        yield inventory
    finally:
        with deferred_sigint(console):
            provider.down(name)


def mount_crash_fs(pool: Pool, deployer: Deployer, journal: nuclei.Journal,
                   fault_specs: list[FaultSpec]) -> None:
    """With crash faults, every SUT node gets a crash file system (nuclei.lazyfs)
    on its data root, mounted by the deployer before the SUT starts, with the page-cache
    model the crash faults ask for (`dirty_expire`; the spec checked they agree)."""
    if not needs_crash_fs(spec.name for spec in fault_specs):
        return
    dirty_expire = run_dirty_expire(fault_specs)
    deployer.prepare_node = lambda node: nuclei.lazyfs.mount(
        pool, journal, node.name, node.workdir, deployer.data_root(node), dirty_expire=dirty_expire)


def preload_clocks(pool: Pool, deployer: Deployer, journal: nuclei.Journal,
                   fault_specs: list[FaultSpec]) -> None:
    """With clock faults, every SUT process starts under libfaketime, following a timestamp
    file of its own (nuclei.clock) that the deployer writes before each start; without
    one, processes start exactly as they always do."""
    if not needs_clock_preload(spec.name for spec in fault_specs):
        return
    nodes = {node.name: node for node in deployer.used_nodes}
    try:
        libraries = {name: clock.find_library(pool, name) for name in nodes}
        for name, node in nodes.items():
            clock.prepare(pool, journal, name, node.workdir)
    except nuclei.NucleusError as error:
        raise RunError(str(error)) from None
    deployer.add_env(lambda ref: clock.preload_env(libraries[ref.node], nodes[ref.node].workdir, ref.name,
                                                   deployer.fake_monotonic_clock))
    deployer.before_start = lambda ref: clock.before_start(pool, journal, ref.node, nodes[ref.node].workdir, ref.name)
    deployer.after_start = lambda ref, pid: clock.started(pool, ref.node, nodes[ref.node].workdir, pid)


def inventory_record(inventory: Inventory) -> dict[str, Any]:
    data = inventory.model_dump(mode="json")
    data["source"] = str(inventory.source) if inventory.source else None
    return data


# -- the run --------------------------------------------------------------------------------

class RunLifecycle:
    """Runs one spec; `execute()` returns the outcome (never raises for run failures)."""

    def __init__(self, spec: RunSpec, console: Any, show_progress: bool = True,
                 campaign_id: str | None = None, run_id: str | None = None) -> None:
        self.spec = spec
        self.console = console
        self.show_progress = show_progress
        self.store = Store(spec.store)
        self.campaign_id = campaign_id or self.store.new_campaign()
        self.run = self.store.new_run(self.campaign_id, run_id or default_run_id(spec))
        self.record = RunRecord(spec, self.run, self.campaign_id)
        self.status = LiveStatus(spec)
        self.workload = make_workload(spec)
        self.ops = operation_plan(spec, self.workload)
        self.record.summary = plan_summary(spec, self.ops)
        schedule_file.save(self.run.path / schedule_file.FILE_NAME, from_spec(spec))
        if spec.failover_warning():
            self.record.notes.append(spec.failover_warning())

    def execute(self) -> RunOutcome:
        campaign_json = self.store.campaign_dir(self.campaign_id) / "campaign.json"
        if not campaign_json.exists():  # a campaign's own campaign.json is the campaign runner's
            write_json(campaign_json, CampaignJson(campaign_id=self.campaign_id, kind="ad-hoc",
                                                   runs=[self.run.run_id]).as_json())
        self.record.save()
        lease = take_lease(self.run.path)  # found by the next `chaos run` if we are SIGKILLed
        try:
            self._run_on_cluster()
            if self.record.status == "checking":
                self._check_and_report()
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP inside stop_signals()
            self._interrupted(exc, " while checking" if self.record.status == "checking" else "")
        finally:
            self.record.save()
            release_lease(lease)
        return RunOutcome(self.run, self.record.status, self.record.valid, self.record.error)

    def _run_on_cluster(self) -> None:
        """Everything up to the checks; sets the status to `checking` or a final one."""
        try:
            with cluster_for(self.spec, self.record, self.console) as inventory:
                self.record.inventory = inventory_record(inventory)
                self._on_cluster(inventory)
            self.record.status = "checking"
        except (RunError, InventoryError, DeployError, faults.FaultError) as exc:
            self.record.status, self.record.error = "error", str(exc)
        except Exception as exc:  # noqa: BLE001 - keep what was recorded, say what broke
            self.record.status, self.record.error = "error", f"{type(exc).__name__}: {exc}"
            write_text(self.run.path / "harness-error.txt", traceback.format_exc())

    def _interrupted(self, exc: BaseException, during: str) -> None:
        self.record.status = "interrupted"
        self.record.stop_reason = stop_reason(exc)
        self.record.error = f"{self.record.stop_reason}{during}"

    # -- on the cluster ---------------------------------------------------------------------
    def _on_cluster(self, inventory: Inventory) -> None:
        needed = systems.profile(self.spec.profile).nodes_needed
        if len(inventory.nodes) < needed:
            raise RunError(f"profile {self.spec.profile} needs {needed} nodes, "
                           f"inventory {inventory.name} has {len(inventory.nodes)}")
        with Pool(inventory) as pool:
            deployer = make_deployer(pool, inventory, self.spec.profile, self.run.path, timing=self.spec.timing,
                                     bugs=self.spec.bugs, release=self.spec.rocketmq_version)
            names = [node.name for node in deployer.used_nodes]
            fault_specs = validate(self.spec.faults, names)
            # the crash file system and the clock preload serve the overlapping faults too
            every_fault = [*fault_specs, *validate(self.spec.overlap, names)]
            journal = nuclei.Journal(self.run.journal_file)
            self.run.journal_file.touch()  # part of the layout even if no fault ever applies
            mount_crash_fs(pool, deployer, journal, every_fault)
            try:
                with self.record.phase("deploy", self.status):
                    preload_clocks(pool, deployer, journal, every_fault)
                    deployer.install()
                    self.record.notes.extend(getattr(deployer, "notes", ()))
                    deployer.start()
                    deployer.wait_healthy(HEALTHY_TIMEOUT_S)
                with live_display(self.status, self.console, self.show_progress):
                    run_stoppable(self._drive(pool, inventory, deployer, journal, fault_specs),
                                  please_wait(self.console))
            finally:
                with deferred_sigint(self.console):
                    self._clean_up(pool, deployer, journal)

    def _clean_up(self, pool: Pool, deployer: Deployer, journal: nuclei.Journal) -> None:
        """Heal anything still applied, collect logs, stop the SUT: each step even if one fails."""
        steps: list[tuple[str, Callable[[], Any]]] = [
            ("heal", lambda: self._heal(pool, deployer, journal)),
            ("collect", lambda: deployer.collect_logs(self.run.nodes_dir)),
            ("stop", deployer.stop),
            ("unmount", lambda: self._unmount(pool, journal)),
        ]
        for name, step in steps:
            try:
                with self.record.phase(name, self.status):
                    step()
            except Exception as exc:  # noqa: BLE001 - the next step must still run
                self.record.notes.append(f"{name} failed: {type(exc).__name__}: {exc}")

    def _heal(self, pool: Pool, deployer: Deployer, journal: nuclei.Journal) -> None:
        if not self.run.journal_file.exists() or not journal.pending():
            return
        report = nuclei.heal(pool, journal, start=deployer.start_process)
        self.record.heal += report.done
        if not report.ok:
            raise RunError("heal incomplete, run `chaos heal --store "
                           f"{self.run.path}`: " + "; ".join(report.errors))

    def _unmount(self, pool: Pool, journal: nuclei.Journal) -> None:
        """Remove crash file systems and clock files (after the SUT stopped: it ran on them)."""
        if any(entry.action in AFTER_STOP_ACTIONS for entry in journal.pending()):
            report = nuclei.heal(pool, journal, unmount=True)
            self.record.heal += report.done
            if not report.ok:
                raise RunError("unmount incomplete, run `chaos heal --store "
                               f"{self.run.path}`: " + "; ".join(report.errors))

    async def _drive(self, pool: Pool, inventory: Inventory, deployer: Deployer, journal: nuclei.Journal,
                     fault_specs: list[FaultSpec]) -> None:
        """Workload and fault schedule together; then heal, recover, drain."""
        spec, workload = self.spec, self.workload
        endpoints = endpoints_of(deployer)
        names = {node.host: node.name for node in inventory.nodes}

        async def connect() -> Any:
            return workload.client(endpoints, names)

        clock = Clock()
        self.record.history_origin_s = round(time.time() - self.record.started, 3)
        run = WorkloadRun(workload, connect, self.run.history_dir, clock, self.status.ops)
        nemesis_log = EventLog(self.run.nemesis_file)
        lock = threading.Lock()

        def emit(event: dict[str, Any]) -> None:
            with lock:
                nemesis_log.write(event)

        def on_change(active: list[ActiveFault]) -> None:
            self.status.fault = " + ".join(map(str, active)) if active else "quiet"

        # Faults target the nodes that run the SUT: a spare node of the inventory
        # has nothing to kill and no traffic to cut.
        ctx = faults.FaultContext(
            pool=pool, nodes=list(deployer.used_nodes), rng=random.Random(f"{spec.seed}:faults"),
            journal=journal, processes=deployer.processes, start_process=deployer.start_process,
            leader=deployer.leader, target_roles=normalize_roles(list(spec.targets)),
            emit=emit, run_start_ns=clock.origin_ns, states=StateFeed())
        stop = threading.Event()
        schedule = fault_schedule(spec, fault_specs)
        recorder = ClusterRecorder(deployer.cluster_state, self.run.path / CLUSTER_FILE, clock,
                                   on_sample=ctx.states.push).start()
        runner = ScheduleRunner(ctx, schedule, on_change)
        try:
            with self.record.phase("setup", self.status):
                await run.setup()
            self.record.phase_start("main")
            self.status.phase = "main"
            fault_task = asyncio.ensure_future(asyncio.to_thread(runner.run, stop))

            main_ends = time.monotonic() + spec.time

            async def faults_then_recovery() -> None:
                # The schedule ends within --time and heals; the workload goes on
                # for --recovery seconds more, so recovery is measured, not assumed.
                await asyncio.shield(fault_task)
                await asyncio.sleep(max(0.0, main_ends - time.monotonic()))
                self.record.phase_end("main")
                self.record.phase_start("recovery")
                self.status.phase = "recovery"

            try:
                await run_together([run.main_phase(self.ops, spec.time + spec.recovery),
                                    faults_then_recovery()])
            finally:
                stop.set()
                await asyncio.shield(fault_task)  # healed, also when cut short
                self.record.phase_end("main")
                self.record.phase_end("recovery")
            with self.record.phase("final", self.status):
                await run.final_phase()
                if run.final_timed_out:
                    self.record.notes.append(f"final phase cut off after --drain-timeout {spec.drain_timeout:g}s")
        finally:
            self._record_firings(runner)
            recorder.stop()  # at most one sample (0.5 s timeout) to wait for
            await run.close()
            nemesis_log.close()

    def _record_firings(self, runner: ScheduleRunner) -> None:
        """schedule.yaml gets each state-triggered window's trigger and the instant it fired
        (a replay fires there); a trigger that never fired is a note of the run."""
        if not runner.firings:
            return
        path = self.run.path / schedule_file.FILE_NAME
        try:
            recorded = schedule_file.load(path).with_firings(runner.firings)
            schedule_file.save(path, recorded)
        except (OSError, ValueError) as exc:  # never mask how the run itself ended
            self.record.notes.append(f"could not record the triggers' instants in {path.name}: {exc}")
            return
        for window in recorded.unfired():
            self.record.notes.append(f"trigger {window.trigger} of {window.fault} (armed {window.start:g}s to "
                                     f"{window.end:g}s) never fired: the fault was not applied")

    # -- checking -----------------------------------------------------------------------------
    def _check_and_report(self) -> None:
        """Status `checking` (saved) while the checkers run; `complete` after, or
        `error` with the reason if they crash (the verdict is then unknown)."""
        self.record.save()
        if self.spec.check:
            if self.show_progress:
                self.console.print("checking the history (Spark) ...", highlight=False)
            try:
                with self.record.phase("check", self.status):
                    results = check([self.run.path], self.spec.spark_master)
                self.record.valid = results[0].get("valid", "unknown") if results else "unknown"
            except Exception as exc:  # noqa: BLE001 - ImportError included: no checkers, no verdict
                self.record.status, self.record.valid = "error", "unknown"
                self.record.error = f"checkers crashed: {type(exc).__name__}: {exc}"
                write_text(self.run.path / "harness-error.txt", traceback.format_exc())
                return
        self.record.status = "complete"
        render = report_renderer()
        if render is not None:
            try:
                with self.record.phase("report", self.status):
                    render(self.run.path)
            except Exception as exc:  # noqa: BLE001
                self.record.notes.append(f"report failed: {type(exc).__name__}: {exc}")


def check(run_dirs: list[Path], spark_master: str | None = None) -> list[dict[str, Any]]:
    """The checkers on stored runs; Spark's Python workers use this interpreter
    (the harness's virtualenv), not whatever `python3` is first on PATH."""
    from checkers.pipeline import check_runs
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return check_runs(run_dirs, spark_master=spark_master)


def report_renderer() -> Callable[[Path], Any] | None:
    """The reports package's run renderer, if that package provides one yet."""
    try:
        import reports
    except ImportError:
        return None
    for name in ("render_run", "render"):
        func = getattr(reports, name, None)
        if callable(func):
            return func
    return None


def endpoints_of(deployer: Deployer) -> Endpoints:
    """Where the workload's clients connect; the KV store is served by DLedger brokers."""
    found = deployer.endpoints()
    kv_names = {p.name for p in deployer.profile.processes if serves_kv(p)}
    return Endpoints(namesrv=found.get("namesrv", []), brokers=found.get("brokers", []),
                     kv=[ref.address for ref in deployer.refs if ref.name in kv_names],
                     system=deployer.profile.system)


def default_run_id(spec: RunSpec) -> str:
    return slug(f"{spec.profile}-{spec.workload}-{spec.fault_label}")
