"""Gates (pure): does the campaign pass? Each gate is a name, a verdict and a reason.

- safe-valid: every run held safe (its profile is safe under its faults' families
  and no library bug switched on for it is exposed by them) is valid by every
  checker: an inconsistent offset or a non-linearizable read fails the campaign
  as surely as a lost message;
- no-lost-on-safe: no acknowledged message missing from the final log of a run
  held safe (never consumed, or consumed and then taken back);
- unsafe-found: each expected-unsafe profile, and each library bug switched on,
  is found invalid at least once in the runs whose faults belong to its
  families. A campaign that lists an unsafe profile but never runs it under such
  a fault FAILS this gate: it cannot show that it would catch the loss
  (docs/campaigns.md);
- rto-p99: RTO p99 per expected-safe profile and fault under the bound;
- no-unknown: no checked run ended with an unknown verdict;
- no-error: no run ended in error (unreachable node, failed deploy...).
Runs not finished (an interrupted campaign) count for nothing yet.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from checkers.verdict import has_verdict
from harness.campaign.model import COMBINE, Gates
from reports.campaign import RunRow, anomaly_text
from reports.stats import quantile
from sut import bugs as bug_library
from sut.profiles import FAULT_FAMILIES


@dataclass(frozen=True)
class GateResult:
    name: str
    title: str
    passed: bool
    detail: str

    def as_json(self) -> dict[str, Any]:
        # "ok", not "passed": the store redacts keys that look like pass(words).
        return {"name": self.name, "title": self.title, "ok": self.passed, "detail": self.detail}


# Partitions whose name does not end in their family's word.
PARTITION_SHAPES = {"partition-majorities-ring": "partition", "bridge": "partition"}


def families(fault_entry: str) -> set[str]:
    """The fault families of a campaign fault entry: `leader-kill+random-partition` -> kill, partition."""
    found = set()
    for text in fault_entry.split(COMBINE):
        name = text.strip().split(":")[0]
        name = PARTITION_SHAPES.get(name, name)
        found.update(f for f in FAULT_FAMILIES if name == f or name.endswith(f"-{f}"))
    return found


def evaluate(gates: Gates, runs: Iterable[RunRow], profiles: Mapping[str, Mapping[str, Any]]) -> list[GateResult]:
    """Every enabled gate over the finished runs; `profiles` holds each profile's
    expected_safe and unsafe_under (from sut/profiles.py, via campaign.json)."""
    done = [r for r in runs if r.status != "pending"]
    results = []
    if gates.safe_valid:
        results.append(_safe_valid(done, profiles))
    if gates.no_lost_on_safe:
        results.append(_no_lost_on_safe(done, profiles))
    if gates.unsafe_found:
        results.append(_unsafe_found(done, profiles))
    if gates.rto_p99_s is not None:
        results.append(_rto_bound(done, profiles, gates.rto_p99_s))
    if gates.no_unknown:
        unknown = [r.run_id for r in done if r.status == "complete" and not has_verdict(r.valid)]
        results.append(GateResult("no-unknown", "no run unknown", not unknown,
                                  f"unknown: {', '.join(unknown)}" if unknown else f"{len(done)} runs have a verdict"))
    if gates.no_error:
        broken = [f"{r.run_id} ({r.error or r.status})" for r in done if r.status not in ("complete",)]
        results.append(GateResult("no-error", "no run in error", not broken,
                                  "; ".join(broken) if broken else "every run completed"))
    return results


def _safe(profile: str, profiles: Mapping[str, Mapping[str, Any]]) -> bool:
    return bool(profiles.get(profile, {}).get("expected_safe", True))


def _unsafe_families(profile: str, profiles: Mapping[str, Mapping[str, Any]]) -> set[str]:
    """The fault families under which `profile` may lose acknowledged messages (none if safe)."""
    if _safe(profile, profiles):
        return set()
    return set(profiles.get(profile, {}).get("unsafe_under") or FAULT_FAMILIES)


def _exposes(run: RunRow, bug: str, profiles: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether `bug` is switched on for `run`, lives in its profile's mode and is exposed
    by its faults: such a run is expected unsafe."""
    mode = str(profiles.get(run.profile, {}).get("mode") or "")
    return bug in run.bugs and bug in bug_library.BUGS and bug_library.exposed_by(bug, mode, families(run.fault))


def _held_safe(run: RunRow, profiles: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether `run` must be valid: its profile is safe under every family of its faults
    (master-slave-async, unsafe only under crash, still must not lose under kill) and no
    bug switched on for it is exposed by them."""
    return (not (families(run.fault) & _unsafe_families(run.profile, profiles))
            and not any(_exposes(run, bug, profiles) for bug in run.bugs))


def _safe_valid(runs: list[RunRow], profiles: Mapping[str, Mapping[str, Any]]) -> GateResult:
    safe_runs = [r for r in runs if _held_safe(r, profiles) and r.status == "complete"]
    broken = []
    for run in safe_runs:
        if run.valid is False:
            found = "; ".join(anomaly_text(a) for a in run.anomalies) or "invalid"
            broken.append(f"{run.run_id}: {found}")
    return GateResult("safe-valid", "every run of a safe profile valid by every checker", not broken,
                      " | ".join(broken) if broken else f"{len(safe_runs)} runs of safe profiles valid")


def _no_lost_on_safe(runs: list[RunRow], profiles: Mapping[str, Mapping[str, Any]]) -> GateResult:
    safe_runs = [r for r in runs if _held_safe(r, profiles)]
    losing = [f"{r.run_id}: {r.lost} lost" for r in safe_runs if r.lost]
    return GateResult("no-lost-on-safe", "no acknowledged message lost on safe profiles", not losing,
                      "; ".join(losing) if losing else f"{len(safe_runs)} runs of safe profiles lost nothing")


def _unsafe_found(runs: list[RunRow], profiles: Mapping[str, Mapping[str, Any]]) -> GateResult:
    """Each expected-unsafe profile and each switched-on bug: caught in a run that exercises it."""
    subjects: list[tuple[str, str, list[RunRow]]] = []   # (what, its families, the runs exercising it)
    for profile in dict.fromkeys(r.profile for r in runs if not _safe(r.profile, profiles)):
        under = _unsafe_families(profile, profiles)
        subjects.append((profile, "/".join(sorted(under)),
                         [r for r in runs if r.profile == profile and families(r.fault) & under]))
    for name in dict.fromkeys(b for r in runs for b in r.bugs if b in bug_library.BUGS):
        subjects.append((f"bug {name}", "/".join(sorted(bug_library.get(name).families)),
                         [r for r in runs if _exposes(r, name, profiles)]))
    if not subjects:
        return GateResult("unsafe-found", "each expected-unsafe profile found invalid", True,
                          "no expected-unsafe profile in this campaign")
    problems, found = [], []
    for label, under, exercising in subjects:
        caught = [r for r in exercising if r.valid is False]
        if not exercising:
            problems.append(f"{label} never ran under {under}, so it could not be caught")
        elif not caught:
            problems.append(f"{label} passed all {len(exercising)} runs under {under}: "
                            "the campaign has lost its teeth")
        else:
            found.append(f"{label} invalid in {len(caught)} of {len(exercising)}")
    return GateResult("unsafe-found", "each expected-unsafe profile found invalid", not problems,
                      "; ".join(problems + found))


def _rto_bound(runs: list[RunRow], profiles: Mapping[str, Mapping[str, Any]], bound: float) -> GateResult:
    samples: dict[tuple[str, str], list[float]] = {}
    for r in runs:
        if _safe(r.profile, profiles) and r.status == "complete":
            samples.setdefault((r.profile, r.fault), []).extend(r.rto)
    over = []
    for (profile, fault), values in samples.items():
        p99 = quantile(values, 0.99)
        if p99 is not None and p99 > bound:
            over.append(f"{profile} x {fault}: p99 {p99:.2f}s")
    return GateResult("rto-p99", f"RTO p99 per safe profile and fault under {bound:g}s", not over,
                      "; ".join(over) if over else f"{len(samples)} profile x fault cells within {bound:g}s")
