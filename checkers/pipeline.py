"""Checking stored runs: one Spark session, shared jobs, one results.json per run.

    from checkers.pipeline import check_runs
    results = check_runs(["store/c1/runs/r1", "store/c1/runs/r2"])

All runs go through the same Spark jobs (each table carries a `run` column),
so checking a campaign costs a few jobs, not a few jobs per run. Every run
still gets its own `checked/` tables and `results.json` (docs/history-format.md).
"""
from __future__ import annotations

import datetime as dt
import json
import logging
import os
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from records import CheckInputs, ResultsJson, StoreFormatError, read_check_inputs

from . import registry
from .context import CheckContext, RunFacts, gather_facts
from .parse import run_files
from .reconstruct import reconstruct
from .schema import HISTORY, MALFORMED, QUEUE_ANOMALIES
from .spark.session import input_settings, session_for
from .spark.staging import CHECKED_DIR, Staging
from .verdict import UNKNOWN, crashed, guarded, merge_results

RESULTS_FILE = "results.json"
# Inputs up to this many raw bytes (all runs of a call together; ~300,000 events)
# keep their intermediate tables in Spark's cache instead of staged Parquet
# (checkers/spark/staging.py) and run with fewer shuffle partitions and no adaptive
# execution (checkers.spark.session.SMALL_INPUT_CONF): fewer jobs for small checks,
# flat memory and parallel shuffles for big ones.
SMALL_INPUT_BYTES = 64 * 2**20
# Inputs up to this many raw bytes (~25,000 events) also run without generated
# code (checkers.spark.session.TINY_INPUT_CONF).
TINY_INPUT_BYTES = 4 * 2**20
SPARK_LOG = "spark.log"

Progress = Callable[[str], None]
log = logging.getLogger(__name__)


class CheckError(ValueError):
    """The paths given to check do not hold runs."""


def _is_run(path: Path) -> bool:
    return (path / "history").is_dir() or (path / "nemesis.jsonl").is_file()


def find_runs(paths: Iterable[Path | str]) -> list[Path]:
    """Run directories under `paths` (a run, a campaign, or a whole store), each once."""
    found: dict[Path, None] = {}
    for given in paths:
        path = Path(given)
        if not path.is_dir():
            raise CheckError(f"{path}: no such directory")
        candidates = [path] if _is_run(path) else sorted(
            p.parent for p in path.glob("**/history") if p.is_dir() and not p.is_symlink())
        if not candidates:
            raise CheckError(f"{path}: no runs found (a run directory holds history/*.jsonl)")
        for run in candidates:
            found.setdefault(run.resolve(), None)
    return list(found)


def raw_bytes(run_dirs: list[Path]) -> int:
    """The size of the raw event files of `run_dirs`."""
    return sum(os.path.getsize(f.path) for run, d in enumerate(run_dirs) for f in run_files(run, d))


def input_size(run_dirs: list[Path]) -> tuple[bool, bool]:
    """Whether one check of `run_dirs` is small (SMALL_INPUT_BYTES) and whether it is
    also tiny (TINY_INPUT_BYTES)."""
    raw = raw_bytes(run_dirs)
    return raw <= SMALL_INPUT_BYTES, raw <= min(TINY_INPUT_BYTES, SMALL_INPUT_BYTES)


def _spec(run_dir: Path) -> tuple[CheckInputs, str | None]:
    try:
        return read_check_inputs(run_dir), None
    except StoreFormatError as exc:
        return CheckInputs(), f"{exc}; checked with default settings"


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str, allow_nan=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _write_faults(run: RunFacts) -> None:
    """checked/faults.parquet: the run's fault windows (a handful of rows: no Spark job)."""
    schema = pa.schema([("id", pa.int32()), ("fault", pa.string()), ("start", pa.int64()),
                        ("stop", pa.int64()), ("targets", pa.string()), ("details", pa.string())])
    rows = [{"id": w.id, "fault": w.fault, "start": w.start, "stop": w.stop,
             "targets": json.dumps(w.targets), "details": json.dumps(w.details, default=str)}
            for w in run.windows]
    pq.write_table(pa.Table.from_pylist(rows, schema=schema),
                   run.run_dir / CHECKED_DIR / "faults.parquet")


def _result(run: RunFacts | None, run_dir: Path, sections: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "valid": merge_results(sections) if sections else UNKNOWN,
        "run": run_dir.name,
        "workload": None if run is None else run.workload,
        "checked_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "checkers": sections,
    }


def steps() -> tuple[str, ...]:
    """The steps `progress` is told of, in order: one per registered checker."""
    return ("reconstructing histories", "run facts", *(c.name for c in registry.known()), "writing results")


def checker_sections(checker: registry.Checker, ctx: CheckContext) -> list[registry.Sections]:
    """One checker's sections of every run: its check for the runs it applies to, its
    not-applicable sections for the others; if it raises, all of them `unknown`."""
    def sections() -> list[registry.Sections]:
        runs = [run for run in ctx.runs if checker.applies_to(run)]
        found = checker.check(ctx, runs) if runs else []
        if len(found) != len(runs):
            raise RuntimeError(f"checker returned {len(found)} result(s) for {len(runs)} run(s)")
        mine = dict(zip((run.index for run in runs), found))
        return [mine[run.index] if run.index in mine else registry.not_applicable(checker, run)
                for run in ctx.runs]

    return guarded(tuple(checker.sections), sections, len(ctx.runs))


def _run_checkers(ctx: CheckContext, step: Progress) -> list[dict[str, dict[str, Any]]]:
    """Every checker over all runs; per run, its sections by name."""
    per_run: list[dict[str, dict[str, Any]]] = [{} for _ in ctx.runs]
    for entry in registry.known():
        step(entry.name)
        for mine, found in zip(per_run, checker_sections(entry.checker, ctx)):
            mine.update(found)
    return per_run


def _check(spark: Any, run_dirs: list[Path], staging: Staging, step: Progress) -> list[dict[str, Any]]:
    specs = [_spec(d) for d in run_dirs]
    step("reconstructing histories")
    rec = reconstruct(spark, run_dirs, staging)
    step("run facts")
    runs = gather_facts(rec, run_dirs, specs)
    ctx = CheckContext(spark=spark, history=rec.history, runs=runs, staging=staging)
    per_run = _run_checkers(ctx, step)
    step("writing results")
    for table, schema in (("history", HISTORY), ("malformed", MALFORMED), ("queue", QUEUE_ANOMALIES)):
        staging.publish(table, run_dirs, schema)
    for run in runs:
        _write_faults(run)
    return [_result(run, run.run_dir, sections) for run, sections in zip(runs, per_run)]


def check_runs(run_dirs: Iterable[Path | str], spark_master: str | None = None,
               spark_conf: Mapping[str, str] | None = None, *, log_file: Path | None = None,
               progress: Progress | None = None) -> list[dict[str, Any]]:
    """Check stored runs; writes each run's checked/ and results.json; returns the results.

    `spark_master` defaults to local[*]; `spark_conf` adds Spark settings;
    Spark's own output goes to `log_file` (default: spark.log in the
    directory that holds all the runs). `progress(step)` is called as each of
    steps() begins.
    """
    dirs = [Path(d).resolve() for d in run_dirs]
    if not dirs:
        return []
    parent = Path(os.path.commonpath(dirs))
    step = progress or (lambda _name: None)
    small, tiny = input_size(dirs)
    spark = session_for(spark_master, spark_conf, log_file or parent / SPARK_LOG, small)
    with Staging(spark, parent, in_memory=small) as staging, input_settings(spark, small, tiny):
        try:
            results = _check(spark, dirs, staging, step)
        except Exception as exc:  # Spark or a reconstruction bug: report, do not lose the runs
            log.debug("checking %d run(s) failed", len(dirs), exc_info=True)
            error = crashed(exc)
            results = [{**_result(None, d, {}), "error": error["error"]} for d in dirs]
    for run_dir, result in zip(dirs, results):
        _write_json(run_dir / RESULTS_FILE, ResultsJson.model_validate(result).as_json())
    return results
