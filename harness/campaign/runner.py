"""Running a campaign: one cluster, one run at a time, one Spark session.

    cluster up once -> for each planned run: verify the nodes clean, run it
    (RunLifecycle: deploy with clean data dirs, workload + faults, heal, drain,
    stop, check, run report), record it in campaign.json -> gates -> pages

campaign.json is rewritten after every run, so a campaign stopped at any
point (Ctrl-C, SIGTERM, SIGHUP, a crash) says which runs are done; `--resume`
moves the unfinished run's partial directory aside (kept under interrupted/
as evidence) and runs what is left. Pages are rendered from the store only,
so a resumed campaign's pages equal those of an uninterrupted one.
"""
from __future__ import annotations

import contextlib
import math
import os
import secrets
import shlex
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from harness.campaign.gates import GateResult, evaluate
from harness.campaign.model import Campaign, CampaignError, profile_of
from harness.campaign.plan import Plan, PlannedRun, estimated_seconds, run_spec
from harness.console import deferred_sigint
from harness.run import RunLifecycle
from harness.signals import stop_reason, stop_signals
from harness.store import Store, write_json
from inventory import Inventory, InventoryError, Pool, docker, load, netns
from nuclei import net
from nuclei.remote import NucleusError
from records import SCHEMA_VERSION, CampaignJson, RunJson, StoreFormatError, read_model
from reports.campaign import load_campaign_view, render_campaign, render_trend
from sut import systems

FINISHED = ("complete", "error")
EXIT_PASSED, EXIT_GATE_FAILED, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 3, 130


@dataclass
class CampaignOutcome:
    path: Path
    status: str                     # complete | interrupted | error
    gates: list[GateResult] = field(default_factory=list)
    error: str | None = None

    @property
    def exit_code(self) -> int:
        if self.status == "interrupted":
            return EXIT_INTERRUPTED
        if self.status != "complete":
            return EXIT_ERROR
        return EXIT_PASSED if all(g.passed for g in self.gates) else EXIT_GATE_FAILED


def profile_facts(names: list[str]) -> dict[str, dict[str, Any]]:
    """What the pages and gates need to know of each profile (sut/profiles.py is the source)."""
    facts = {}
    for name in names:
        profile = systems.profile(profile_of(name))
        facts[name] = {"mode": profile.mode, "expected_safe": profile.expected_safe,
                       "unsafe_under": list(profile.unsafe_under)}
    return facts


def find_resumable(store: Store, name: str) -> Path | None:
    """The newest campaign of this name in the store that did not finish."""
    if not store.root.is_dir():
        return None
    for path in sorted(store.root.iterdir(), reverse=True):
        meta = path / "campaign.json"
        if path.is_symlink() or not meta.is_file():
            continue
        try:
            data = read_model(CampaignJson, meta)
        except (OSError, StoreFormatError):  # an unreadable or older campaign is not resumable
            continue
        if data.kind == "campaign" and getattr(data, "name", None) == name:
            return path if data.status != "complete" else None
    return None


class CampaignRunner:
    """Runs (or resumes) one campaign; `execute()` never raises for run failures."""

    def __init__(self, campaign: Campaign, plan: Plan, source: Path, store: Path, console: Any,
                 resume: bool = False, show_progress: bool = True) -> None:
        self.campaign, self.plan, self.console = campaign, plan, console
        self.store = Store(store)
        self.show_progress = show_progress
        self.state: dict[str, Any] = {}
        self.path = self._open(source, resume)
        self.started = time.monotonic()
        self.current: RunLifecycle | None = None
        self.faults_done = 0
        self.finished_here = 0

    # -- campaign.json ----------------------------------------------------------------------
    def _open(self, source: Path, resume: bool) -> Path:
        if resume:
            found = find_resumable(self.store, self.campaign.name)
            if found is None:
                raise CampaignError(f"--resume: no unfinished campaign {self.campaign.name!r} in {self.store.root}")
            self.state = read_model(CampaignJson, found / "campaign.json").as_json()
            if self.state.get("digest") != self.plan.digest():
                raise CampaignError(f"--resume: {found.name} was planned from a different file or --only "
                                    f"(plan digest {self.state.get('digest')} != {self.plan.digest()})")
            return found
        path = self.path = self.store.campaign_dir(self.store.new_campaign(f"-{self.campaign.name}"))
        self.state = {
            "schema_version": SCHEMA_VERSION, "kind": "campaign", "campaign_id": path.name, "name": self.campaign.name,
            "file": str(source), "seed": self.campaign.seed, "digest": self.plan.digest(),
            "status": "planned", "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "plan": [run.as_json() for run in self.plan.runs], "runs": [run.run_id for run in self.plan.runs],
            "done": {}, "skipped": self.plan.skipped, "profiles": profile_facts(list(self.campaign.profiles)),
            "thresholds": self.campaign.thresholds.model_dump(), "trend": self.campaign.trend.model_dump(),
            "reference": self.campaign.reference.model_dump() if self.campaign.reference else None,
            "settings": self.campaign.model_dump(mode="json"), "gates": [], "notes": [], "timings": {},
        }
        self.save()
        return path

    def save(self) -> None:
        write_json(self.path / "campaign.json", CampaignJson.model_validate(self.state).as_json())
        self.store.set_latest(self.path.name)

    @property
    def todo(self) -> list[PlannedRun]:
        done = self.state.get("done", {})
        return [run for run in self.plan.runs if done.get(run.run_id, {}).get("status") not in FINISHED]

    # -- the campaign -------------------------------------------------------------------------
    def execute(self) -> CampaignOutcome:
        status, error = "complete", None
        self.state["status"] = "running"
        self.save()
        try:
            with stop_signals():
                try:
                    if self.todo:
                        status, error = self._run_all()
                    if status == "complete":
                        self._check_pending()
                except KeyboardInterrupt as exc:
                    status, error = "interrupted", stop_reason(exc)
                except (CampaignError, InventoryError, OSError) as exc:
                    status, error = "error", str(exc)
        except KeyboardInterrupt as exc:  # a stop signal between the handlers
            status, error = "interrupted", stop_reason(exc)
        return self._finish(status, error)

    def _run_all(self) -> tuple[str, str | None]:
        """Every run not done yet, on one cluster; stops at the first interrupted run."""
        with self._cluster() as inventory, Pool(inventory) as pool:
            for run in self.todo:
                try:
                    self._verify_clean(pool, inventory)
                except (CampaignError, InventoryError, NucleusError) as exc:
                    # An unreachable or dirty node costs this run, not the campaign.
                    self._record_error(run, f"nodes not verified clean before the run: {exc}")
                    continue
                if self._one_run(run, inventory) == "interrupted":
                    return "interrupted", self.state["done"][run.run_id].get("error")
        return "complete", None

    def _finish(self, status: str, error: str | None) -> CampaignOutcome:
        with deferred_sigint(self.console):
            self.state["status"] = status
            if error:
                self.state["notes"].append(f"{status}: {error}")
            gates = self._gates() if status == "complete" else []
            self.state["gates"] = [g.as_json() for g in gates]
            self.state["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            self.state["timings"].update(self._timings())
            self.state["timings"].setdefault("sessions_s", []).append(round(time.monotonic() - self.started, 3))
            self.save()
            began = time.monotonic()
            render_campaign(self.path)
            render_trend(self.store.root)
            self.state["timings"]["render_s"] = round(time.monotonic() - began, 3)
            self.save()
        return CampaignOutcome(self.path, status, gates, error)

    def _gates(self) -> list[GateResult]:
        view = load_campaign_view(self.path)
        return evaluate(self.campaign.gates, view.runs, self.state["profiles"])

    def _start_spark(self, batches: int) -> None:
        """One Spark session for every check of the campaign (the checkers reuse the active
        one). For at most QUICK_SESSION_CHECKS batches its JVM starts quick, as that of
        `chaos check` does; a batch too large for that JVM gets a fully compiling one
        (checkers.spark.session.session_for)."""
        from checkers.spark.session import QUICK_SESSION_CHECKS, get_spark
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        began = time.monotonic()
        get_spark(self.campaign.spark.master, self.campaign.spark.conf, log_file=self.path / "spark.log",
                  quick=batches <= QUICK_SESSION_CHECKS)
        self.state["timings"]["spark_start_s"] = round(time.monotonic() - began, 3)

    @contextlib.contextmanager
    def _cluster(self) -> Iterator[Inventory]:
        """The inventory file of the campaign, or a local cluster brought up once for it."""
        if self.campaign.inventory.file is not None:
            yield load(self.campaign.inventory.file)
            return
        choice = self.campaign.inventory
        provider = docker if choice.provider == "docker" else netns
        name = f"cmp-{secrets.token_hex(3)}"
        self.console.print(f"bringing up a local {choice.provider} cluster {name} of {choice.nodes} nodes "
                           "(taken down after the campaign)", highlight=False)
        began = time.monotonic()
        try:
            inventory = provider.up(name, choice.nodes or provider.DEFAULT_NODES, persistent=False)
        finally:
            self.state["timings"]["cluster_up_s"] = round(time.monotonic() - began, 3)
        try:
            yield inventory
        finally:
            with deferred_sigint(self.console):
                provider.down(name)

    def _one_run(self, run: PlannedRun, inventory: Inventory) -> str:
        self._set_aside(run)
        # Checked later, all together: one Spark job over many runs costs far less than one per run.
        spec = run_spec(self.campaign, run, self.store.root, inventory.source).model_copy(update={"check": False})
        lifecycle = RunLifecycle(spec, self.console, show_progress=False, campaign_id=self.path.name,
                                 run_id=run.run_id)
        self.current = lifecycle
        self.state["done"][run.run_id] = {"status": "running"}
        self.save()
        index = self.plan.runs.index(run) + 1
        with self._progress(run, index):
            outcome = lifecycle.execute()
        self.current = None
        self.faults_done += _faults_started(lifecycle.run.nemesis_file)
        self.finished_here += 1
        self.state["done"][run.run_id] = {"status": outcome.status, "valid": None, "error": outcome.error}
        self.save()
        self.console.print(f"[{index}/{len(self.plan.runs)}] {run.run_id}: {outcome.status}"
                           + (f" ({outcome.error})" if outcome.error else "")
                           + f" · so far {self.tally()} · ~{self.eta_s(index + 1) / 60:.0f} min left",
                           highlight=False, soft_wrap=True)
        return outcome.status

    def unchecked(self) -> list[Path]:
        """Finished runs without a verdict yet (also those of an earlier, interrupted session)."""
        done = self.state.get("done", {})
        return [self.path / "runs" / run.run_id for run in self.plan.runs
                if done.get(run.run_id, {}).get("status") == "complete"
                and not (self.path / "runs" / run.run_id / "results.json").is_file()]

    def _check_pending(self) -> None:
        """The checkers over every unchecked run, in batches, on the campaign's Spark session;
        then each run's verdict goes into run.json and campaign.json and its report is rendered."""
        from harness.run import check, report_renderer
        pending, size = self.unchecked(), self.campaign.spark.batch
        if pending:
            self._start_spark(batches=math.ceil(len(pending) / size))
        render = report_renderer()
        for start in range(0, len(pending), size):
            batch = pending[start:start + size]
            self.console.print(f"checking {len(batch)} run(s) with Spark "
                               f"({start + len(batch)} of {len(pending)}) ...", highlight=False)
            began = time.monotonic()
            results = check(batch, self.campaign.spark.master)
            self._add_timing("check_s", time.monotonic() - began)
            began = time.monotonic()
            for run_dir, result in zip(batch, results):
                self._record_verdict(run_dir, result.get("valid", "unknown"))
                if render is not None:
                    try:
                        render(run_dir)
                    except Exception as exc:  # noqa: BLE001 - a page must not cost the verdicts
                        self.state["notes"].append(f"{run_dir.name}: report failed: {type(exc).__name__}: {exc}")
            self._add_timing("run_reports_s", time.monotonic() - began)
            self.save()
            self.console.print(f"checked {start + len(batch)} of {len(pending)}: {self.tally()}", highlight=False)

    def _record_verdict(self, run_dir: Path, valid: Any) -> None:
        record = read_model(RunJson, run_dir / "run.json")
        record.valid = valid
        write_json(run_dir / "run.json", record.as_json())
        self.state["done"][run_dir.name]["valid"] = valid

    def _add_timing(self, name: str, seconds: float) -> None:
        timings = self.state["timings"]
        timings[name] = round(timings.get(name, 0.0) + seconds, 3)

    def _record_error(self, run: PlannedRun, reason: str) -> None:
        self.state["done"][run.run_id] = {"status": "error", "valid": None, "error": reason}
        self.save()
        self.console.print(f"{run.run_id}: error: {reason}", highlight=False, soft_wrap=True)

    def _set_aside(self, run: PlannedRun) -> None:
        """A run directory left by an interrupted attempt goes to interrupted/ (kept as evidence)."""
        partial = self.path / "runs" / run.run_id
        if not partial.exists():
            return
        aside = self.path / "interrupted"
        aside.mkdir(exist_ok=True)
        n = 1
        while (aside / f"{run.run_id}.{n}").exists():
            n += 1
        shutil.move(str(partial), str(aside / f"{run.run_id}.{n}"))
        self.state["notes"].append(f"{run.run_id}: unfinished attempt moved to interrupted/{run.run_id}.{n}")

    def _verify_clean(self, pool: Pool, inventory: Inventory) -> None:
        """Between runs: no rule in our iptables chain and no SUT process left on any node.
        Leftovers are removed once; if they persist the campaign stops (after healing)."""
        for node in inventory.nodes:
            leftovers = _leftovers(pool, node)
            if not leftovers:
                continue
            self.state["notes"].append(f"{node.name}: cleaned leftovers before the next run: {'; '.join(leftovers)}")
            net.clear(pool, node.name)
            pool.run(node, _KILL_LEFTOVERS % {"workdir": shlex.quote(node.workdir.rstrip("/"))}, check=False)
            still = _leftovers(pool, node)
            if still:
                raise CampaignError(f"node {node.name} is not clean after healing: {'; '.join(still)}")

    # -- progress ----------------------------------------------------------------------------
    @contextlib.contextmanager
    def _progress(self, run: PlannedRun, index: int) -> Iterator[None]:
        if not self.show_progress or not getattr(self.console, "is_terminal", False):
            self.console.print(f"[{index}/{len(self.plan.runs)}] {run.run_id} (seed {run.seed}) ...",
                               highlight=False, soft_wrap=True)
            yield
            return
        from rich.live import Live
        with Live(_Status(self, run, index), console=self.console, refresh_per_second=2, transient=True):
            yield

    def tally(self) -> str:
        """Runs so far by outcome, and verdicts once checked: "2 complete, 1 error; 1 invalid"."""
        done = [d for d in self.state.get("done", {}).values() if d.get("status") != "running"]
        statuses: dict[str, int] = {}
        verdicts: dict[str, int] = {}
        for entry in done:
            statuses[entry.get("status")] = statuses.get(entry.get("status"), 0) + 1
            valid = entry.get("valid")
            if valid is not None:
                name = {True: "valid", False: "invalid"}.get(valid, "unknown")
                verdicts[name] = verdicts.get(name, 0) + 1
        text = ", ".join(f"{n} {s}" for s, n in statuses.items()) or "none finished yet"
        return text + ("; verdicts " + ", ".join(f"{n} {v}" for v, n in verdicts.items()) if verdicts
                       else "; verdicts after the checks")

    def eta_s(self, index: int) -> float:
        """Time left: the mean wall time of this session's runs so far, times the runs left."""
        left = len(self.plan.runs) - index + 1
        if self.finished_here == 0:
            return estimated_seconds(self.campaign, left)
        return (time.monotonic() - self.started) / self.finished_here * left

    def _timings(self) -> dict[str, Any]:
        """Where the campaign's time went (for docs/benchmarks.md): the runs' phases summed."""
        totals: dict[str, float] = {}
        for run in self.plan.runs:
            try:
                phases = read_model(RunJson, self.path / "runs" / run.run_id / "run.json").timings["phases"]
            except Exception:  # noqa: BLE001 - a run that never started has no timings
                continue
            for name, phase in phases.items():
                if "end_s" in phase:
                    totals[name] = totals.get(name, 0.0) + phase["end_s"] - phase["start_s"]
        timings = {}
        timings["phases_s"] = {k: round(v, 3) for k, v in totals.items()}
        return timings


class _Status:
    """The live line: current run and phase, runs done / total, faults so far, time left."""

    def __init__(self, runner: CampaignRunner, run: PlannedRun, index: int) -> None:
        self.runner, self.run, self.index = runner, run, index

    def __rich__(self) -> Any:
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        runner = self.runner
        current = runner.current
        faults = runner.faults_done + (_faults_started(current.run.nemesis_file) if current else 0)
        line = current.status.line() if current else ""
        total = len(runner.plan.runs)
        bar = Table.grid(padding=(0, 1))
        bar.add_row(ProgressBar(total=total, completed=self.index - 1, width=30),
                    f"{self.index - 1}/{total} runs done  ~{runner.eta_s(self.index) / 60:.0f} min left  "
                    f"{runner.tally()}")
        return Group(bar, f"run {self.index}/{total} {self.run.run_id}  faults so far {faults}", line)


# PIDs are shared by every local node: a pidfile is trusted only if its pid runs the SUT
# (`-m sut`) with a config of this node's workdir, as the process nuclei check the argv.
_LEFTOVERS = r"""wd=%(workdir)s
for f in "$wd"/data/*/*.pid; do
  [ -e "$f" ] || continue; pid=$(head -c 32 "$f" 2>/dev/null | tr -dc 0-9)
  [ -n "$pid" ] || continue
  argv=$(tr '\0' '\n' 2>/dev/null </proc/"$pid"/cmdline) || continue
  printf '%%s\n' "$argv" | grep -qxF sut || continue
  printf '%%s\n' "$argv" | grep -qF -- "$wd/conf/" || continue
  echo "process $pid ($f)"
done"""
_KILL_LEFTOVERS = _LEFTOVERS.replace('echo "process $pid ($f)"', 'kill -9 "$pid"')


def _leftovers(pool: Pool, node: Any) -> list[str]:
    found = [f"iptables rule {rule}" for rule in net.chain_rules(pool, node.name)]
    result = pool.run(node, _LEFTOVERS % {"workdir": shlex.quote(node.workdir.rstrip("/"))}, check=False)
    return found + [line for line in result.stdout.splitlines() if line.strip()]


def _faults_started(nemesis_file: Path) -> int:
    try:
        text = nemesis_file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return 0
    return text.count('"phase": "start"') + text.count('"phase":"start"')
