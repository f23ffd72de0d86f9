"""The campaign matrix (pure): which runs, in which order, with which seeds.

Every run's seed derives from the file's base seed and the run's workload,
fault entry and repeat, but NOT its profile: DLedger and Controller mode meet
the same operations and the same fault schedule, so compare.html compares the
HA designs and nothing else. The same file always plans the same runs.
"""
from __future__ import annotations

import fnmatch
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import workloads
from harness.campaign.model import COMBINE, Campaign, CampaignError, profile_of, release_of
from harness.plan import fault_schedule
from harness.spec import RunSpec, SpecError, build_spec, refused_fault
from harness.store import slug
from sut import systems


@dataclass(frozen=True)
class PlannedRun:
    """One cell-repeat of the matrix."""

    run_id: str
    profile: str
    workload: str
    fault: str          # the campaign file's fault entry (`a+b` = a overlapped by b)
    repeat: int
    seed: int

    def as_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "profile": self.profile, "workload": self.workload,
                "fault": self.fault, "repeat": self.repeat, "seed": self.seed}


@dataclass(frozen=True)
class Plan:
    runs: list[PlannedRun]
    skipped: list[str]    # matrix cells a workload cannot run on (with the reason)

    def digest(self) -> str:
        """Same file, same digest: `--resume` refuses a campaign planned from another file."""
        text = json.dumps([run.as_json() for run in self.runs], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def derive_seed(base: int, workload: str, fault: str, repeat: int) -> int:
    digest = hashlib.sha256(f"{base}:{workload}:{fault}:{repeat}".encode()).digest()
    return int.from_bytes(digest[:4], "big") >> 1   # fits the 31 bits `chaos run --seed` takes


def run_id_of(profile: str, workload: str, fault: str, repeat: int) -> str:
    return slug(f"{profile}-{workload}-{fault}-r{repeat}")


def plan(campaign: Campaign, only: str | None = None, store: Path = Path("store")) -> Plan:
    """All runs of the matrix (profile-major, then workload, fault, repeat), each checked
    as a RunSpec now so that no bad value waits for run 17 to fail. `only` keeps the
    runs whose id matches the glob pattern (or contains it)."""
    runs, skipped = [], []
    for profile in campaign.profiles:
        for workload in campaign.workloads:
            problem = workloads.get(workload).unsupported(profile)
            if problem:
                skipped.append(f"{profile} x {workload}: {problem}")
                continue
            for fault in campaign.faults:
                problem = fault_problem(profile, fault)
                if problem:
                    skipped.append(f"{profile} x {fault}: {problem}")
                    continue
                for repeat in range(1, campaign.repeats + 1):
                    seed = derive_seed(campaign.seed, workload, fault, repeat)
                    run = PlannedRun(run_id_of(profile, workload, fault, repeat), profile, workload,
                                     fault, repeat, seed)
                    try:
                        run_spec(campaign, run, store, inventory=None)
                    except SpecError as exc:
                        raise CampaignError(f"{profile} x {workload} x {fault}: {exc}") from None
                    runs.append(run)
    skipped = list(dict.fromkeys(skipped))
    if only:
        runs = [r for r in runs if fnmatch.fnmatch(r.run_id, only) or only in r.run_id]
        if not runs:
            raise CampaignError(f"--only {only}: matches no run of the campaign")
    if not runs:
        raise CampaignError("the campaign has no runnable run: " + "; ".join(skipped))
    return Plan(runs, skipped)


def fault_problem(profile: str, fault: str) -> str | None:
    """Why a fault entry cannot run on the nodes of a profile (a ring partition on the
    two nodes of master-slave), or None. Such cells are skipped, not run into an error."""
    import faults
    from faults.validate import validate
    profile = profile_of(profile)
    nodes = [f"n{i}" for i in range(1, systems.profile(profile).nodes_needed + 1)]
    try:
        validate([part.strip() for part in fault.split(COMBINE)], nodes)
    except faults.FaultError as exc:
        return str(exc)
    return refused_fault(profile, [part.strip() for part in fault.split(COMBINE)])


def run_spec(campaign: Campaign, run: PlannedRun, store: Path, inventory: Path | None) -> RunSpec:
    """The `chaos run` spec of one planned run."""
    main, *overlap = [part.strip() for part in run.fault.split(COMBINE)]
    d = campaign.durations
    values = {
        "profile": profile_of(run.profile), "workload": run.workload, "faults": [main], "overlap": overlap,
        "time": d.run, "interval": d.between, "duration": d.fault, "recovery": d.recovery,
        "drain_timeout": d.drain_timeout, "rate": campaign.rate, "concurrency": campaign.concurrency,
        "queues": campaign.queues, "op_timeout": campaign.op_timeout, "seed": run.seed,
        "targets": list(campaign.targets), "timing": campaign.timing, "bugs": list(campaign.bugs), "store": store,
        "inventory": inventory, "spark_master": campaign.spark.master,
        "route_refresh": campaign.client.route_refresh_s if campaign.client.route_refresh == "periodic" else None,
        "rocketmq_version": release_of(run.profile, campaign.rocketmq_version),
        "rto_threshold_s": campaign.thresholds.rto_s, "min_availability": campaign.thresholds.min_availability,
    }
    return build_spec(values, check_store=False)


def fault_count(campaign: Campaign, the_plan: Plan, store: Path = Path("store")) -> int:
    """How many fault windows the campaign injects (what the seed article counted)."""
    total = 0
    for run in the_plan.runs:
        schedule = fault_schedule(run_spec(campaign, run, store, inventory=None))
        total += sum(1 for event in schedule if event.phase == "start")
    return total


PER_RUN_OVERHEAD_S = 15.0   # deploy, drain, stop, share of the batched check (docs/benchmarks.md)


def estimated_seconds(campaign: Campaign, runs: int) -> float:
    """Wall time of `runs` runs: their workload time plus the harness's overhead per run."""
    d = campaign.durations
    return runs * (d.run + d.recovery + PER_RUN_OVERHEAD_S)
