"""The parts of a run's `run.json` that the checkers read, with defaults.

run.json is written by the harness; the checkers must also work on a stored
run without it (an imported Jepsen history, a hand-made test case), so every
value has a default and lookups are tolerant about where a value is nested:
top level first, then the `spec`, `workload` (when it is an object),
`thresholds` and `checker` sub-objects.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from .ops import WRITE_FUNCTIONS

_NESTED = ("spec", "workload", "thresholds", "checker")


class RunSpecError(ValueError):
    """run.json exists but cannot be used."""


@dataclass(frozen=True)
class RunSpec:
    """What the checkers need to know about a run."""

    workload: str | None = None
    profile: str | None = None
    seed: int | None = None
    ordered: bool = False
    delivery: str = "at-least-once"
    rto_threshold_s: float | None = None
    min_availability: float | None = None
    linearizable_time_limit_s: float = 30.0
    timing: str = "default"           # the SUT's timing scale (sut.profiles.TIMINGS)
    write_rate: float | None = None   # writes per second the run asked for (rate x share of writes)

    @property
    def tolerates_duplicates(self) -> bool:
        """RocketMQ delivers at least once, so duplicates alone are not a failure."""
        return self.delivery != "exactly-once"


def _scopes(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The objects searched for a value, nearest first."""
    yield doc
    for section in _NESTED:
        sub = doc.get(section)
        if isinstance(sub, dict):
            yield sub
            if section == "spec":
                yield from (sub[s] for s in _NESTED if isinstance(sub.get(s), dict))


def lookup(doc: dict[str, Any], name: str) -> Any:
    """`name` from the top level of `doc` or from one of its known sub-objects."""
    for scope in _scopes(doc):
        if name in scope:
            return scope[name]
    return None


def _workload_name(doc: dict[str, Any]) -> str | None:
    value = lookup(doc, "workload")
    if isinstance(value, dict):
        value = value.get("name")
    return value if isinstance(value, str) else None


def _number(doc: dict[str, Any], name: str, source: str) -> float | None:
    value = lookup(doc, name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RunSpecError(f"{source}: `{name}` must be a number, got {value!r}")
    return float(value)


def parse_spec(doc: dict[str, Any], source: str = "run.json") -> RunSpec:
    """Build a RunSpec from the decoded run.json `doc` (errors name `source`)."""
    if not isinstance(doc, dict):
        raise RunSpecError(f"{source}: expected a JSON object")
    delivery = lookup(doc, "delivery") or "at-least-once"
    if delivery not in ("at-least-once", "exactly-once"):
        raise RunSpecError(
            f"{source}: `delivery` must be 'at-least-once' or 'exactly-once', got {delivery!r}")
    seed, profile, timing = lookup(doc, "seed"), lookup(doc, "profile"), lookup(doc, "timing")
    time_limit = _number(doc, "linearizable_time_limit_s", source)
    return RunSpec(
        workload=_workload_name(doc),
        profile=profile if isinstance(profile, str) else None,
        seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
        ordered=bool(lookup(doc, "ordered")),
        delivery=delivery,
        rto_threshold_s=_number(doc, "rto_threshold_s", source),
        min_availability=_number(doc, "min_availability", source),
        linearizable_time_limit_s=time_limit if time_limit is not None else 30.0,
        timing=timing if isinstance(timing, str) else "default",
        write_rate=_write_rate(doc),
    )


def _write_rate(doc: dict[str, Any]) -> float | None:
    """The requested rate times the share of writes in the planned operations (run.json `plan`)."""
    rate, plan = lookup(doc, "rate"), doc.get("plan")
    if not isinstance(rate, (int, float)) or isinstance(rate, bool) or not isinstance(plan, dict):
        return None
    by_f, total = plan.get("by_f"), plan.get("operations")
    if not isinstance(by_f, dict) or not isinstance(total, int) or total <= 0:
        return None
    writes = sum(n for f, n in by_f.items() if f in WRITE_FUNCTIONS and isinstance(n, int))
    return float(rate) * writes / total


def load_spec(run_dir: Path) -> RunSpec:
    """The RunSpec of a stored run; defaults when run.json is missing."""
    path = Path(run_dir) / "run.json"
    if not path.exists():
        return RunSpec()
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RunSpecError(f"{path}: not readable JSON ({exc})") from exc
    return parse_spec(doc, str(path))
