"""`chaos teeth`: does a campaign catch the library's bugs? (docs/teeth.md)

For each bug of sut/bugs.py the campaign runs again with that bug switched on,
restricted to the cells that can show it: its expected-safe profiles of a mode
the bug lives in, under its fault entries of a family that exposes the bug (and
the specific faults some bugs need). A bug is caught when a checker finds any of
those runs invalid; a bug the campaign has no such cell for is "not exercisable
by this campaign" and says what it needs. The mutation score is caught over
exercisable.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.campaign.gates import families
from harness.campaign.model import COMBINE, Campaign, CampaignError, profile_of
from harness.campaign.plan import plan
from reports.campaign import anomaly_text, load_campaign_view
from sut import bugs as bug_library
from sut import systems

CAUGHT, MISSED, NOT_EXERCISABLE, ERROR = "caught", "missed", "not exercisable", "error"


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

    def as_json(self) -> dict[str, Any]:
        return {"bug": self.bug, "status": self.status, "needs": self.needs, "runs": self.runs,
                "caught_by": self.caught_by, "campaign_dir": self.campaign_dir, "error": self.error,
                "wall_s": round(self.wall_s, 1), **_facts(self.bug)}


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
    if not profiles:
        missing.append(f"an expected-safe profile of mode {' or '.join(bug.modes)}")
    if not faults:
        missing.append(f"a fault of {' or '.join(bug.needs_faults)}" if bug.needs_faults
                       else f"a fault of family {' or '.join(bug.families)}")
    return profiles, faults, (" and ".join(missing) or None)


def bug_campaign(campaign: Campaign, name: str) -> Campaign | None:
    """The campaign restricted to the cells that can expose `name`, with the bug switched on."""
    profiles, faults, missing = cells(campaign, name)
    if missing:
        return None
    return campaign.model_copy(update={"name": f"{campaign.name}-teeth-{name}"[:64], "profiles": tuple(profiles),
                                       "faults": tuple(faults), "bugs": (name,)})


def verdict_of(campaign_dir: Path, name: str) -> BugVerdict:
    """Caught when a checker found any run of the bug's campaign invalid."""
    runs = load_campaign_view(campaign_dir).runs
    caught = [{"run_id": r.run_id, "anomalies": [anomaly_text(a) for a in r.anomalies]}
              for r in runs if r.valid is False]
    broken = [f"{r.run_id}: {r.error or r.status}" for r in runs if r.status != "complete"]
    status = CAUGHT if caught else ERROR if broken else MISSED
    return BugVerdict(name, status, runs=len(runs), caught_by=caught, campaign_dir=str(campaign_dir),
                      error="; ".join(broken) or None)


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


def run_teeth(campaign: Campaign, source: Path, store: Path, names: list[str], console: Any,
              show_progress: bool = True) -> list[BugVerdict]:
    """One restricted campaign per bug; a stop signal ends the whole thing (KeyboardInterrupt)."""
    from harness.campaign.runner import CampaignRunner
    verdicts = []
    for name in names:
        restricted = bug_campaign(campaign, name)
        if restricted is None:
            verdicts.append(BugVerdict(name, NOT_EXERCISABLE, needs=cells(campaign, name)[2]))
            continue
        began = time.monotonic()
        console.print(f"chaos teeth: bug {name} on {', '.join(restricted.profiles)} x "
                      f"{', '.join(restricted.faults)}", highlight=False, soft_wrap=True)
        runner = CampaignRunner(restricted, plan(restricted, store=store), source, store, console,
                                show_progress=show_progress)
        outcome = runner.execute()
        if outcome.status == "interrupted":
            raise KeyboardInterrupt(outcome.error or "stopped")
        verdict = verdict_of(outcome.path, name)
        if outcome.status == "error" and verdict.status != CAUGHT:
            verdict.status, verdict.error = ERROR, outcome.error or verdict.error
        verdict.wall_s = time.monotonic() - began
        verdicts.append(verdict)
    return verdicts


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
