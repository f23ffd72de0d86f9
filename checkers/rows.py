"""What the checkers of small histories share (group, ordered, transactional, delayed):
their rows are collected once and judged in Python on the driver, and their sections
have one shape: `valid`, `counts`, a few `examples` per name, and the `problems` a
report shows ("<count> <what>") for every invalid finding."""
from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from pyspark.sql import functions as F

from .context import CheckContext, RunFacts
from .registry import Sections

EXAMPLES = 5
COLUMNS = ("index", "process", "f", "key", "type", "invoke_time", "complete_time", "invoke_value", "value")


def json_value(text: Any) -> Any:
    """A history value as JSON text, parsed (None if it is not JSON); anything else as it is."""
    if text is None or not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


@dataclass
class Findings:
    """Counts and a few examples per name; `invalid` names the findings that make a run
    invalid, each with the problem line a report shows."""

    invalid: dict[str, str]
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    examples: dict[str, list[Any]] = field(default_factory=lambda: defaultdict(list))

    def add(self, name: str, example: Any, n: int = 1) -> None:
        self.counts[name] += n
        if len(self.examples[name]) < EXAMPLES:
            self.examples[name].append(example)

    def section(self, names: Iterable[str], checked: bool, unchecked_reason: str, **extra: Any) -> dict[str, Any]:
        """The section: counts of `names` (and of every invalid finding), valid unless an
        invalid finding counts, `unknown` with the reason when nothing could be `checked`."""
        counts = {k: self.counts.get(k, 0) for k in dict.fromkeys((*names, *self.invalid))}
        valid: Any = (not any(counts[k] for k in self.invalid)) if checked else "unknown"
        out = {"valid": valid, "counts": counts, "examples": {k: v for k, v in self.examples.items() if v},
               "problems": [f"{counts[k]} {text}" for k, text in self.invalid.items() if counts[k]], **extra}
        if not checked:
            out["reason"] = unchecked_reason
        return out


class RowsChecker:
    """A checker of one workload's runs: `check_rows(rows)` judges one run's operations
    (COLUMNS, JSON values as text, `key` parsed) into its section, named as the checker."""

    name = ""
    workload = ""
    check_rows: Callable[[Iterable[dict[str, Any]]], dict[str, Any]]

    @property
    def sections(self) -> tuple[str, ...]:
        return (self.name,)

    def applies_to(self, run: RunFacts) -> bool:
        return run.workload == self.workload

    def check(self, ctx: CheckContext, runs: list[RunFacts]) -> list[Sections]:
        rows = ctx.history_of([r.index for r in runs]).select("run", *COLUMNS).filter(
            F.col("f").isNotNull()).collect()
        by_run: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for row in rows:
            d = row.asDict()
            d["key"] = None if d["key"] in (None, "null") else json_value(d["key"])
            by_run[d.pop("run")].append(d)
        check = type(self).check_rows
        return [{self.name: check(by_run[r.index])} for r in runs]
