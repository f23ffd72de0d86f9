"""Gates (pure): does the campaign pass? Each gate is a name, a verdict and a reason.

- no-lost-on-safe: no acknowledged message lost on an expected-safe profile;
- unsafe-found: each expected-unsafe profile is found invalid at least once in
  the runs whose faults belong to its `unsafe_under` families. A campaign that
  lists an unsafe profile but never runs it under such a fault FAILS this gate:
  it cannot show that it would catch the loss (docs/campaigns.md);
- rto-p99: RTO p99 per expected-safe profile and fault under the bound;
- no-unknown: no checked run ended with an unknown verdict;
- no-error: no run ended in error (unreachable node, failed deploy...).
Runs not finished (an interrupted campaign) count for nothing yet.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from harness.campaign.model import COMBINE, Gates
from reports.campaign import RunRow
from reports.stats import quantile
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


def families(fault_entry: str) -> set[str]:
    """The fault families of a campaign fault entry: `leader-kill+random-partition` -> kill, partition."""
    found = set()
    for text in fault_entry.split(COMBINE):
        name = text.strip().split(":")[0]
        found.update(f for f in FAULT_FAMILIES if name == f or name.endswith(f"-{f}"))
    return found


def evaluate(gates: Gates, runs: Iterable[RunRow], profiles: Mapping[str, Mapping[str, Any]]) -> list[GateResult]:
    """Every enabled gate over the finished runs; `profiles` holds each profile's
    expected_safe and unsafe_under (from sut/profiles.py, via campaign.json)."""
    done = [r for r in runs if r.status != "pending"]
    results = []
    if gates.no_lost_on_safe:
        results.append(_no_lost_on_safe(done, profiles))
    if gates.unsafe_found:
        results.append(_unsafe_found(done, profiles))
    if gates.rto_p99_s is not None:
        results.append(_rto_bound(done, profiles, gates.rto_p99_s))
    if gates.no_unknown:
        unknown = [r.run_id for r in done if r.status == "complete" and r.valid not in (True, False)]
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


def _held_safe(run: RunRow, profiles: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether `run` must lose nothing: its profile is safe under every family of its faults
    (master-slave-async, unsafe only under crash, still must not lose under kill)."""
    return not (families(run.fault) & _unsafe_families(run.profile, profiles))


def _no_lost_on_safe(runs: list[RunRow], profiles: Mapping[str, Mapping[str, Any]]) -> GateResult:
    safe_runs = [r for r in runs if _held_safe(r, profiles)]
    losing = [f"{r.run_id}: {r.lost} lost" for r in safe_runs if r.lost]
    return GateResult("no-lost-on-safe", "no acknowledged message lost on safe profiles", not losing,
                      "; ".join(losing) if losing else f"{len(safe_runs)} runs of safe profiles lost nothing")


def _unsafe_found(runs: list[RunRow], profiles: Mapping[str, Mapping[str, Any]]) -> GateResult:
    unsafe = list(dict.fromkeys(r.profile for r in runs if not _safe(r.profile, profiles)))
    if not unsafe:
        return GateResult("unsafe-found", "each expected-unsafe profile found invalid", True,
                          "no expected-unsafe profile in this campaign")
    problems, found = [], []
    for profile in unsafe:
        under = _unsafe_families(profile, profiles)
        exercising = [r for r in runs if r.profile == profile and families(r.fault) & under]
        caught = [r for r in exercising if r.valid is False]
        if not exercising:
            problems.append(f"{profile} never ran under {'/'.join(sorted(under))}, so it could not be caught")
        elif not caught:
            problems.append(f"{profile} passed all {len(exercising)} runs under {'/'.join(sorted(under))}: "
                            "the campaign has lost its teeth")
        else:
            found.append(f"{profile} invalid in {len(caught)} of {len(exercising)}")
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
