"""The `stats` checker: what the history contains, and whether it is complete.

It is `unknown` when the evidence is incomplete (malformed lines, fault
events that do not pair up) or absent (no operations): the other verdicts were
then reached on partial data.
"""
from __future__ import annotations

from typing import Any

from .context import CheckContext, RunFacts
from .ops import OUTCOMES
from .verdict import UNKNOWN


def stats_section(run: RunFacts) -> dict[str, Any]:
    """The stats section of one run (pure: facts in, JSON out)."""
    by_f = {f: {t: by_type.get(t, 0) for t in OUTCOMES} for f, by_type in sorted(run.counts.items())}
    totals = {t: sum(c[t] for c in by_f.values()) for t in OUTCOMES}
    problems = [run.spec_problem] if run.spec_problem else []
    if run.operations == 0:
        problems.append("the history has no client operations")
    if run.malformed:
        problems.append(f"{run.malformed} malformed line(s) or protocol error(s) in the history")
    problems += run.fault_problems
    return {
        "valid": UNKNOWN if problems else True,
        "problems": problems,
        "workload": run.workload,
        "operations": run.operations,
        "by_outcome": totals,
        "by_f": by_f,
        "dangling": run.dangling,
        "duration_s": max(0, run.end - run.start) / 1e9,
        "fault_windows": len(run.windows),
        "malformed": {"count": run.malformed, "examples": run.malformed_examples},
    }


def check(ctx: CheckContext) -> list[dict[str, Any]]:
    return [{"stats": stats_section(run)} for run in ctx.runs]
