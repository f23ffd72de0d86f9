"""`chaos teeth`: does a campaign catch the library's bugs? (docs/teeth.md)

For each bug of sut/bugs.py the campaign runs again with that bug switched on,
restricted to the cells that can show it: its expected-safe profiles of a mode
the bug lives in, under its fault entries of a family that exposes the bug (and
the specific faults some bugs need). The same cells also run with no bug (the
control: same plan, so the same seeds; bugs with the same cells share it).

A bug is caught only by a safety anomaly (SAFETY: lost, lost after consume,
inconsistent offsets, a consumer group's lost, skipped or reordered deliveries, a non-linearizable read, an order violation, an invariant
breach the SUT reported), never by recovery time alone, and only in a run whose
control run (same cell, same seed, no bug) is valid: a control that fails too
shows the cell, not the bug. A bug the campaign has no cell for is "not
exercisable by this campaign" and says what it needs. The mutation score is
caught over exercisable.
"""
from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.group import INVALID as GROUP_SAFETY
from checkers.message_types import DELAYED_INVALID, ORDERED_INVALID, TRANSACTIONAL_INVALID
from checkers.verdict import UNKNOWN, as_verdict, merge_valid
from harness.campaign.gates import families
from harness.campaign.model import COMBINE, Campaign, CampaignError, profile_of
from harness.campaign.plan import plan
from records import ResultsJson, read_model
from sut import bugs as bug_library
from sut import systems

CAUGHT, MISSED, NOT_EXERCISABLE, ERROR = "caught", "missed", "not exercisable", "error"
CONTROL_INVALID = "control invalid"   # the bug's runs failed, but so did the same cells without it
# results.json counts that are safety anomalies (checkers/anomalies.py names)
SAFETY_COUNTS = ("lost", "lost_after_consume", "inconsistent_offsets")


@dataclass
class BugVerdict:
    bug: str
    status: str
    needs: str | None = None            # what the campaign lacks, when not exercisable
    runs: int = 0
    caught_by: list[dict[str, Any]] = field(default_factory=list)   # {run_id, anomalies}
    campaign_dir: str | None = None
    error: str | None = None
    wall_s: float = 0.0
    control_valid: Any = None           # True | False | "unknown"; None when nothing ran
    control_dir: str | None = None
    unsafe_without_control: list[dict[str, Any]] = field(default_factory=list)  # safety found, control not valid

    def as_json(self) -> dict[str, Any]:
        return {"bug": self.bug, "status": self.status, "needs": self.needs, "runs": self.runs,
                "caught_by": self.caught_by, "control_valid": self.control_valid,
                "unsafe_without_control": self.unsafe_without_control, "campaign_dir": self.campaign_dir,
                "control_dir": self.control_dir, "error": self.error, "wall_s": round(self.wall_s, 1),
                **_facts(self.bug)}


def _positive_counts(section: dict[str, Any] | None, names: Any, label: str) -> list[str]:
    counts = (section or {}).get("counts") or {}
    return [f"{label}: {count} {name}" for name in names
            if isinstance(count := counts.get(name), int) and not isinstance(count, bool) and count > 0]


def safety_anomalies(results: dict[str, Any]) -> list[str]:
    """The safety anomalies of one run's results.json checkers (what can catch a bug): never
    recovery time, availability, duplicates or a verdict that is only unknown."""
    found = _positive_counts(results.get("queue"), SAFETY_COUNTS, "queue")
    # a consumer group's lost, skipped or reordered deliveries
    found += _positive_counts(results.get("group"), GROUP_SAFETY, "group")
    # RocketMQ's message types: order per key, transactions' fates, timer deliveries
    for name, invalid in (("ordered", ORDERED_INVALID), ("transactional", TRANSACTIONAL_INVALID),
                          ("delayed", DELAYED_INVALID)):
        found += _positive_counts(results.get(name), invalid, name)
    for name in ("linearizable", "order"):
        if (results.get(name) or {}).get("valid") is False:
            found.append(f"{name}: invalid")
    breaches = (results.get("invariants") or {}).get("safety_breaches")
    if isinstance(breaches, int) and not isinstance(breaches, bool) and breaches > 0:
        kinds = sorted({a.get("kind") for a in results["invariants"].get("anomalies") or [] if a.get("safety")})
        found.append(f"invariants: {breaches} breach(es) {', '.join(map(str, kinds))}".rstrip())
    return found


@dataclass(frozen=True)
class RunResult:
    """What teeth reads of one run of a campaign: its verdict and safety anomalies."""

    run_id: str
    status: str          # complete | error | missing
    valid: Any
    safety: tuple[str, ...] = ()


def campaign_results(campaign_dir: Path, run_ids: list[str]) -> dict[str, RunResult]:
    """Each planned run's verdict and safety anomalies from its results.json."""
    out = {}
    for run_id in run_ids:
        path = Path(campaign_dir) / "runs" / run_id / "results.json"
        try:
            results = read_model(ResultsJson, path)
        except Exception as exc:  # a run that did not complete or whose results are unusable
            out[run_id] = RunResult(run_id, f"missing results ({type(exc).__name__})", UNKNOWN)
            continue
        out[run_id] = RunResult(run_id, "complete", as_verdict(results.valid),
                                tuple(safety_anomalies(results.checkers)))
    return out


def _facts(name: str) -> dict[str, Any]:
    bug = bug_library.get(name)
    return {"source": bug.source, "anomaly": bug.anomaly, "families": list(bug.families), "modes": list(bug.modes)}


def _fault_names(entry: str) -> set[str]:
    return {part.strip().split(":")[0] for part in entry.split(COMBINE)}


def cells(campaign: Campaign, name: str) -> tuple[list[str], list[str], str | None]:
    """The campaign's profiles and fault entries that can expose bug `name`, or what is missing."""
    bug = bug_library.get(name)
    profiles = [p for p in campaign.profiles if systems.profile(profile_of(p)).mode in bug.modes
                and set(bug.families).isdisjoint(systems.profile(profile_of(p)).unsafe_under)]
    faults = [f for f in campaign.faults if families(f) & set(bug.families)
              and (not bug.needs_faults or _fault_names(f) & set(bug.needs_faults))]
    missing = []
    if not _workloads(campaign, bug):
        missing.append(f"the workload {' or '.join(bug.workloads)}")
    if not profiles:
        missing.append(f"an expected-safe profile of mode {' or '.join(bug.modes)}")
    if not faults:
        missing.append(f"a fault of {' or '.join(bug.needs_faults)}" if bug.needs_faults
                       else f"a fault of family {' or '.join(bug.families)}")
    return profiles, faults, (" and ".join(missing) or None)


def _workloads(campaign: Campaign, bug: bug_library.Bug) -> tuple[str, ...]:
    """The campaign's workloads that can see the bug."""
    return tuple(w for w in campaign.workloads if not bug.workloads or w in bug.workloads)


def teeth_name(campaign: str, bug: str) -> str:
    """The bug campaign's name, at most 64 characters: the campaign's name is shortened,
    never the bug's, so two bugs' campaigns never share a name (nor their stores' runs)."""
    suffix = f"-teeth-{bug}"
    return campaign[:max(1, 64 - len(suffix))].rstrip("-.") + suffix


def bug_campaign(campaign: Campaign, name: str) -> Campaign | None:
    """The campaign restricted to the cells that can expose `name`, with the bug switched on."""
    profiles, faults, missing = cells(campaign, name)
    if missing:
        return None
    return campaign.model_copy(update={"name": teeth_name(campaign.name, name), "profiles": tuple(profiles),
                                       "faults": tuple(faults), "bugs": (name,),
                                       "workloads": _workloads(campaign, bug_library.get(name))})


def verdict_of(name: str, bug_runs: dict[str, RunResult], controls: dict[str, RunResult],
               campaign_dir: Path | None = None, control_dir: Path | None = None) -> BugVerdict:
    """Caught when a run with the bug shows a safety anomaly and its control run is valid."""
    caught, uncontrolled, broken = [], [], []
    for run_id, run in bug_runs.items():
        if run.status != "complete":
            broken.append(f"{run_id}: {run.status}")
        if not run.safety:
            continue
        control = controls.get(run_id)
        found = {"run_id": run_id, "anomalies": list(run.safety),
                 "control_valid": control.valid if control else None}
        (caught if control is not None and control.valid is True else uncontrolled).append(found)
    control_broken = [f"control {r}: {c.status}" for r, c in controls.items() if c.status != "complete"]
    control_valid = merge_valid(c.valid for c in controls.values()) if controls else None
    if caught:
        status = CAUGHT
    elif uncontrolled:
        status = CONTROL_INVALID
    elif broken or control_broken:
        status = ERROR
    else:
        status = MISSED
    return BugVerdict(name, status, runs=len(bug_runs), caught_by=caught, unsafe_without_control=uncontrolled,
                      campaign_dir=str(campaign_dir) if campaign_dir else None,
                      control_dir=str(control_dir) if control_dir else None,
                      error="; ".join(broken + control_broken) or None, control_valid=control_valid)


@dataclass
class BugCells:
    """What `chaos teeth --dry-run` shows for one bug: the runs it would make, or what is missing."""
    bug: str
    runs: list[str]
    needs: str | None = None
    profiles: tuple[str, ...] = ()
    faults: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {"bug": self.bug, "exercisable": self.needs is None, "runs": self.runs, "needs": self.needs,
                "profiles": list(self.profiles), "faults": list(self.faults), **_facts(self.bug)}


def dry_run(campaign: Campaign, names: list[str], store: Path) -> list[BugCells]:
    """Per bug the run ids its restricted campaign would make (nothing starts)."""
    shown = []
    for name in names:
        restricted = bug_campaign(campaign, name)
        if restricted is None:
            shown.append(BugCells(name, [], needs=cells(campaign, name)[2]))
            continue
        runs = [run.run_id for run in plan(restricted, store=store).runs]
        shown.append(BugCells(name, runs, needs=None if runs else "a runnable cell (every cell is skipped)",
                              profiles=restricted.profiles, faults=restricted.faults))
    return shown


def control_campaign(restricted: Campaign) -> Campaign:
    """The bug's cells with no bug: the same plan, so the same run ids and seeds."""
    cells = "|".join(restricted.profiles + ("x",) + restricted.faults)
    digest = hashlib.sha1(cells.encode()).hexdigest()[:8]
    return restricted.model_copy(update={"name": f"{restricted.name.split('-teeth-')[0][:46]}-control-{digest}",
                                         "bugs": ()})


def execute_campaign(spec: Campaign, source: Path, store: Path, console: Any,
                     show_progress: bool = True) -> tuple[Path, dict[str, RunResult], str | None]:
    """Run one campaign: (its directory, each planned run's result, its error or None);
    KeyboardInterrupt when it was stopped."""
    from harness.campaign.runner import CampaignRunner
    planned = plan(spec, store=store)
    outcome = CampaignRunner(spec, planned, source, store, console, show_progress=show_progress).execute()
    if outcome.status == "interrupted":
        raise KeyboardInterrupt(outcome.error or "stopped")
    results = campaign_results(outcome.path, [run.run_id for run in planned.runs])
    return outcome.path, results, outcome.error if outcome.status == "error" else None


def run_teeth(campaign: Campaign, source: Path, store: Path, names: list[str], console: Any,
              show_progress: bool = True) -> list[BugVerdict]:
    """One restricted campaign per bug and one control per set of cells; a stop signal
    ends the whole thing (KeyboardInterrupt)."""
    def execute(spec: Campaign, what: str) -> tuple[Path, dict[str, RunResult], str | None]:
        console.print(f"chaos teeth: {what} on {', '.join(spec.profiles)} x {', '.join(spec.faults)}",
                      highlight=False, soft_wrap=True)
        return execute_campaign(spec, source, store, console, show_progress)

    verdicts = []
    controls: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[Path, dict[str, RunResult], str | None]] = {}
    for name in names:
        restricted = bug_campaign(campaign, name)
        if restricted is None:
            verdicts.append(BugVerdict(name, NOT_EXERCISABLE, needs=cells(campaign, name)[2]))
            continue
        began = time.monotonic()
        path, runs, error = execute(restricted, f"bug {name}")
        key = (restricted.profiles, restricted.faults)
        if key not in controls:
            controls[key] = execute(control_campaign(restricted), "control (no bug)")
        control_path, control_runs, control_error = controls[key]
        verdict = verdict_of(name, runs, control_runs, path, control_path)
        if (error or control_error) and verdict.status != CAUGHT:
            verdict.status = ERROR
            verdict.error = "; ".join(e for e in (error, control_error, verdict.error) if e)
        verdict.wall_s = time.monotonic() - began
        verdicts.append(verdict)
    return verdicts


def exercisable_by(campaign: Campaign, names: list[str]) -> list[str]:
    """The bugs of `names` the campaign has cells for."""
    return [name for name in names if bug_campaign(campaign, name) is not None]


def score(verdicts: list[BugVerdict]) -> tuple[int, int]:
    """(caught, exercisable)."""
    exercisable = [v for v in verdicts if v.status != NOT_EXERCISABLE]
    return sum(v.status == CAUGHT for v in exercisable), len(exercisable)


def check_names(names: list[str]) -> list[str]:
    """The --bug names (all of the library when none), CampaignError for an unknown one."""
    try:
        return bug_library.check(names) if names else bug_library.known()
    except bug_library.UnknownBug as exc:
        raise CampaignError(f"--bug: {exc}") from None
