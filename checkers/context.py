"""What every checker gets: the history of all runs and small per-run facts.

Checkers work on all runs at once (Spark groups by `run`) and return one
section per run, in run order. The facts below are small and live on the
driver; they come from one aggregation over the reconstructed history.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from records import CheckInputs

from .reconstruct import Reconstruction
from .routes import infer_workload
from .spark.staging import Staging
from .windows import FaultWindow


@dataclass
class RunFacts:
    """Per-run facts the checkers share."""

    index: int
    run_dir: Path
    spec: CheckInputs  # run.json's `checks`
    spec_problem: str | None = None  # run.json could not be used: defaults were
    windows: list[FaultWindow] = field(default_factory=list)
    fault_problems: list[str] = field(default_factory=list)
    malformed: int = 0
    malformed_examples: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, dict[str, int]] = field(default_factory=dict)  # f -> type -> n
    dangling: int = 0
    start: int = 0  # ns: first invoke
    end: int = 0  # ns: last event of any kind (operation or fault)

    @property
    def workload(self) -> str | None:
        """The workload named in run.json, else the one its operations suggest."""
        return self.spec.workload or infer_workload(self.counts)

    @property
    def operations(self) -> int:
        return sum(n for by_type in self.counts.values() for n in by_type.values())


@dataclass
class CheckContext:
    """The inputs of all checkers for one `check_runs` call."""

    spark: SparkSession
    history: DataFrame  # checkers.schema.HISTORY + `run`
    runs: list[RunFacts]
    staging: Staging

    def runs_where(self, predicate) -> list[int]:
        return [r.index for r in self.runs if predicate(r)]

    def with_operation(self, runs: list[int], function: str) -> list[int]:
        """Those of `runs` whose history has operations of `function`."""
        return [run for run in runs if function in self.runs[run].counts]

    def history_of(self, runs: list[int]) -> DataFrame:
        return self.history.filter(F.col("run").isin(runs))


def gather_facts(rec: Reconstruction, run_dirs: list[Path],
                 specs: list[tuple[CheckInputs, str | None]]) -> list[RunFacts]:
    """Counts by f and outcome, dangling operations and time span of every run (from the
    reconstruction's census: no Spark job)."""
    runs = []
    for i, (d, (spec, problem)) in enumerate(zip(run_dirs, specs)):
        run = RunFacts(index=i, run_dir=Path(d), spec=spec, spec_problem=problem,
                       windows=rec.windows[i], fault_problems=rec.fault_problems[i],
                       malformed=rec.malformed_counts[i], malformed_examples=rec.malformed_examples[i],
                       counts=rec.census.counts[i], dangling=rec.census.dangling[i])
        run.start, end = rec.census.spans[i]
        fault_times = [t for w in run.windows for t in (w.start, w.stop) if t is not None]
        run.end = max([end, *fault_times])
        runs.append(run)
    return runs
