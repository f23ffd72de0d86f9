"""The teeth of real RocketMQ: historic bugs on the release that has them and on the one that fixed them.

A regressions file (`kind: rocketmq-regressions`, campaigns/rocketmq-regressions.yaml)
names bugs of the registry (sut/rocketmq/bugs.yaml) and how many seeds each gets. Per
bug it becomes one campaign of two cells, the bug's recipe on `buggy_version` and on
`fixed_version` (`rmq-controller-3@5.1.4`, `rmq-controller-3@5.2.0`): the seeds derive
from the file's seed, the workload and the fault entry, not the profile entry, so seed i
is the same on both releases and the fixed release's run is that seed's control.

A bug is caught when a run on the buggy release shows a safety anomaly (what `chaos
teeth` counts, harness/campaign/teeth.py: never recovery time alone) and every run on
the fixed release is valid (`control_valid`). A run that did not complete catches
nothing and is not a valid control.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from checkers.verdict import UNKNOWN
from harness.campaign.historic import HistoricBug, RegistryError, load as load_registry
from harness.campaign.model import COMBINE, AT_RELEASE, Campaign, CampaignError, Client, InventoryChoice, Strict
from harness.campaign.plan import plan
from harness.campaign.teeth import CAUGHT, CONTROL_INVALID, ERROR, MISSED, NOT_EXERCISABLE, RunResult, execute_campaign

KIND = "rocketmq-regressions"


class Shape(Strict):
    """Quiet time before each fault, each fault's length and the recovery, for a recipe
    that does not give its own (seconds)."""

    between: float = Field(20.0, gt=0)
    fault: float = Field(10.0, gt=0)
    recovery: float = Field(30.0, ge=0)
    drain_timeout: float = Field(60.0, gt=0)


class Regressions(Strict):
    kind: Literal["rocketmq-regressions"]
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,40}$")
    description: str = ""
    bugs: tuple[str, ...] = Field((), description="registry ids; none: every bug of the registry")
    seeds: int = Field(3, ge=1, le=100, description="runs per release and bug")
    seed: int = Field(ge=0, lt=2**63)
    inventory: InventoryChoice = InventoryChoice(nodes=4)
    defaults: Shape = Shape()
    rate: float = Field(20.0, gt=0)
    concurrency: int = Field(4, ge=1, le=512)
    client: Client = Client(route_refresh="periodic", route_refresh_s=1.0)

    @field_validator("bugs")
    @classmethod
    def _known(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError("a bug is listed twice")
        registry = load_registry()
        for bug_id in value:
            registry.get(bug_id)
        return value

    @model_validator(mode="after")
    def _campaigns_valid(self) -> "Regressions":
        for bug in self.selected():
            if bug.reachable:
                try:
                    plan(bug_campaign(self, bug))
                except (CampaignError, ValidationError, ValueError) as exc:
                    raise ValueError(f"bug {bug.id}: its recipe is not a runnable campaign: "
                                     f"{str(exc).splitlines()[0]}") from None
        return self

    def selected(self) -> list[HistoricBug]:
        registry = load_registry()
        return [registry.get(b) for b in self.bugs] if self.bugs else list(registry.bugs)


def is_regressions(path: Path) -> bool:
    """Whether FILE is a regressions file rather than a campaign (its `kind:`)."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return False   # load_campaign says what is wrong with it
    return isinstance(data, dict) and data.get("kind") == KIND


def load(path: Path, only: tuple[str, ...] = ()) -> Regressions:
    """Read and validate a regressions file; CampaignError (one line) on any problem.
    `only` (`--bug`) narrows the file's bugs."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        if only:
            data = {**data, "bugs": list(only)}
        return Regressions.model_validate(data)
    except OSError as exc:
        raise CampaignError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except RegistryError as exc:
        raise CampaignError(f"{path}: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "file"
        raise CampaignError(f"{path}: {where}: {first['msg'].removeprefix('Value error, ')}") from None


def bug_campaign(regressions: Regressions, bug: HistoricBug) -> Campaign:
    """The bug's recipe as a campaign of two cells: the buggy release, then the fixed one."""
    r, d = bug.recipe, regressions.defaults
    return Campaign.model_validate({
        "name": f"{regressions.name}-{bug.issue}", "description": bug.title,
        "inventory": regressions.inventory.model_dump(exclude_none=True),
        "profiles": [f"{r.profile}{AT_RELEASE}{bug.buggy_version}", f"{r.profile}{AT_RELEASE}{bug.fixed_version}"],
        "workloads": [r.workload], "faults": [COMBINE.join(r.faults)], "targets": list(r.targets),
        "timing": r.timing, "repeats": regressions.seeds, "seed": regressions.seed,
        "durations": {"run": r.time, "between": r.interval or d.between, "fault": r.duration or d.fault,
                      "recovery": d.recovery if r.recovery is None else r.recovery,
                      "drain_timeout": d.drain_timeout},
        "rate": r.rate or regressions.rate, "concurrency": r.concurrency or regressions.concurrency,
        "client": regressions.client.model_dump(),
        # the verdicts are this module's; the campaign's gates only decide its own exit
        "gates": {"unsafe_found": False},
    })


@dataclass
class RegressionVerdict:
    bug: str
    issue: int
    status: str
    buggy_version: str
    fixed_version: str
    anomalies: tuple[str, ...]
    seeds: int = 0
    caught_seeds: list[int] = field(default_factory=list)      # buggy release, safety anomaly
    valid_controls: list[int] = field(default_factory=list)    # fixed release, valid
    buggy: list[dict[str, Any]] = field(default_factory=list)  # per seed: run_id, status, valid, safety
    fixed: list[dict[str, Any]] = field(default_factory=list)
    control_valid: Any = None
    needs: str | None = None
    campaign_dir: str | None = None
    error: str | None = None
    wall_s: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return {"bug": self.bug, "issue": self.issue, "status": self.status, "buggy_version": self.buggy_version,
                "fixed_version": self.fixed_version, "expected_anomalies": list(self.anomalies), "seeds": self.seeds,
                "caught_in": len(self.caught_seeds), "caught_seeds": self.caught_seeds,
                "control_valid_in": len(self.valid_controls), "control_valid": self.control_valid,
                "buggy_runs": self.buggy, "fixed_runs": self.fixed, "needs": self.needs,
                "campaign_dir": self.campaign_dir, "error": self.error, "wall_s": round(self.wall_s, 1)}


def _row(seed: int, run: RunResult) -> dict[str, Any]:
    return {"seed": seed, "run_id": run.run_id, "status": run.status, "valid": run.valid, "safety": list(run.safety)}


def verdict_of(bug: HistoricBug, seeds: list[int], buggy: list[RunResult], fixed: list[RunResult]) -> RegressionVerdict:
    """Per seed i, buggy[i] and fixed[i] ran the same recipe and seed on the two releases."""
    v = RegressionVerdict(bug.id, bug.issue, MISSED, bug.buggy_version, bug.fixed_version, bug.anomalies,
                          seeds=len(seeds))
    v.buggy = [_row(s, r) for s, r in zip(seeds, buggy)]
    v.fixed = [_row(s, r) for s, r in zip(seeds, fixed)]
    v.caught_seeds = [s for s, r in zip(seeds, buggy) if r.status == "complete" and r.safety]
    v.valid_controls = [s for s, r in zip(seeds, fixed) if r.status == "complete" and r.valid is True]
    if any(r.status == "complete" and r.valid is False for r in fixed):
        v.control_valid = False
    else:
        v.control_valid = True if len(v.valid_controls) == len(seeds) and seeds else UNKNOWN
    broken = [f"{r.run_id}: {r.status}" for r in buggy + fixed if r.status != "complete"]
    v.error = "; ".join(broken) or None
    if v.caught_seeds:
        v.status = CAUGHT if v.control_valid is True else CONTROL_INVALID
    elif broken:
        v.status = ERROR
    return v


def run_regressions(regressions: Regressions, source: Path, store: Path, console: Any,
                    show_progress: bool = True) -> list[RegressionVerdict]:
    """Each selected bug's two-cell campaign, one after the other; a stop signal ends all
    of it (KeyboardInterrupt)."""
    verdicts = []
    for bug in regressions.selected():
        if not bug.reachable:
            verdicts.append(RegressionVerdict(bug.id, bug.issue, NOT_EXERCISABLE, bug.buggy_version,
                                              bug.fixed_version, bug.anomalies, needs=bug.needs))
            continue
        began = time.monotonic()
        spec = bug_campaign(regressions, bug)
        console.print(f"chaos teeth: #{bug.issue} {bug.id}: {bug.recipe.profile} on {bug.buggy_version} "
                      f"and {bug.fixed_version} x {spec.faults[0]}, {regressions.seeds} seed(s)",
                      highlight=False, soft_wrap=True)
        path, results, error = execute_campaign(spec, source, store, console, show_progress)
        cell = {version: [run for run in plan(spec, store=store).runs if run.profile.endswith(f"{AT_RELEASE}{version}")]
                for version in (bug.buggy_version, bug.fixed_version)}
        seeds = [run.seed for run in cell[bug.buggy_version]]
        verdict = verdict_of(bug, seeds, [results[run.run_id] for run in cell[bug.buggy_version]],
                             [results[run.run_id] for run in cell[bug.fixed_version]])
        verdict.campaign_dir = str(path)
        if error and verdict.status != CAUGHT:
            verdict.status = ERROR
            verdict.error = "; ".join(e for e in (error, verdict.error) if e)
        verdict.wall_s = time.monotonic() - began
        verdicts.append(verdict)
    return verdicts
