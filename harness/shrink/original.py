"""The run to shrink, read from the store and refused early when it cannot be shrunk.

Refused, each with one line (ShrinkRefused): a path that is not a run, a run
that is valid or has no verdict, a run recorded by an older harness (no
schedule.yaml), a run whose profile no longer exists, or one whose nodes are
gone (an inventory file that no longer exists, or a throwaway cluster of an
older harness that did not record its provider and size) unless other nodes
are given. A run on a throwaway local cluster is shrunk on a new throwaway
cluster of the same provider and size (`provision`), taken down after.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness import schedule as schedule_file
from harness.shrink import failure
from harness.spec import known_profiles
from harness.store import RunDir, StoreError, find_run_dir
from records import ResultsJson, RunJson, StoreFormatError, read_model

# Settings of the original run that a candidate keeps (the schedule carries the rest).
KEPT = ("op_timeout", "drain_timeout", "route_refresh", "targets", "spark_master",
        "rto_threshold_s", "min_availability", "provider")


class ShrinkRefused(ValueError):
    """The run cannot be shrunk: one line saying why."""


@dataclass(frozen=True)
class OriginalRun:
    """A failing run: where it is, what it ran, how it failed, where its nodes are."""

    run: RunDir
    schedule: schedule_file.Schedule
    classes: frozenset[str]
    spec: dict[str, Any]
    inventory: Path | None
    provision: tuple[str, int] | None = None   # (provider, nodes): a throwaway cluster like the run's

    @property
    def store(self) -> Path:
        return self.run.path.parent.parent.parent

    def base_values(self) -> dict[str, Any]:
        """RunSpec values every candidate shares (the schedule supplies the others)."""
        kept = {key: self.spec[key] for key in KEPT if self.spec.get(key) is not None}
        return {**kept, "inventory": self.inventory, "store": self.store, "check": False}


def load(path: Path, inventory: Path | None = None) -> OriginalRun:
    """The run at `path`, or ShrinkRefused."""
    try:
        run = find_run_dir(path)
        record = read_model(RunJson, run.run_json)
    except (StoreError, StoreFormatError) as exc:
        raise ShrinkRefused(str(exc)) from None
    except FileNotFoundError:
        record = None
    schedule_path = run.path / schedule_file.FILE_NAME
    if record is None or not record.spec or not schedule_path.is_file():
        raise ShrinkRefused(f"{run.path}: recorded by an older harness (no {schedule_file.FILE_NAME}); "
                            f"replay it with `chaos run` and its seed, then shrink the new run")
    try:
        schedule = schedule_file.load(schedule_path)
    except schedule_file.ScheduleFileError as exc:
        raise ShrinkRefused(f"{exc} (recorded by an older harness?)") from None
    if schedule.profile not in known_profiles():
        raise ShrinkRefused(f"{run.path}: profile {schedule.profile!r} no longer exists "
                            f"(known: {', '.join(known_profiles())})")
    classes = _classes(run)
    provision = None if inventory is not None else _throwaway(record)
    nodes = None if provision else _nodes(run, record, inventory)
    return OriginalRun(run, schedule, classes, record.spec, nodes, provision)


def _throwaway(record: RunJson) -> tuple[str, int] | None:
    """The provider and size of the throwaway local cluster the run brought up, if recorded."""
    cluster = record.cluster
    provider, nodes = cluster.get("provider"), cluster.get("nodes")
    if cluster.get("source") != "provisioned" or provider not in ("netns", "docker"):
        return None
    if not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 1:
        return None
    return provider, nodes


def on_release(original: OriginalRun, version: str) -> OriginalRun:
    """The run with its candidates on another RocketMQ release (`--rocketmq-version`), or ShrinkRefused."""
    from harness.spec import release_problem
    problem = release_problem(original.schedule.profile, version)
    if problem:
        raise ShrinkRefused(f"--rocketmq-version: {problem}")
    return replace(original, schedule=original.schedule.replace(rocketmq_version=version))


def _classes(run: RunDir) -> frozenset[str]:
    if not run.results_file.is_file():
        raise ShrinkRefused(f"{run.path}: not checked (no results.json); run `chaos check {run.path}` first")
    try:
        results = read_model(ResultsJson, run.results_file).as_json()
    except StoreFormatError as exc:
        raise ShrinkRefused(str(exc)) from None
    valid = results["valid"]
    if valid is True:
        raise ShrinkRefused(f"{run.path}: the run is valid; only a failing (INVALID) run can be shrunk")
    found = failure.classes(results)
    if valid is not False or not found:
        raise ShrinkRefused(f"{run.path}: no named anomaly (verdict {valid!r}); only an INVALID run can be shrunk")
    return found


def _nodes(run: RunDir, record: RunJson, inventory: Path | None) -> Path:
    """The inventory the candidates run on: the given one, else the run's if it still exists."""
    if inventory is not None:
        if not inventory.is_file():
            raise ShrinkRefused(f"--inventory {inventory}: no such file")
        return inventory
    cluster = record.cluster
    source = cluster.get("file") or (record.inventory or {}).get("source")
    if cluster.get("source") == "provisioned" or not source:
        raise ShrinkRefused(f"{run.path}: its nodes are gone (a cluster brought up for the run and taken "
                            f"down after it, its provider and size not recorded); bring nodes up "
                            f"(`chaos up`) and pass --inventory FILE")
    if not Path(source).is_file():
        raise ShrinkRefused(f"{run.path}: its nodes are gone (inventory {source} no longer exists); "
                            f"pass --inventory FILE")
    return Path(source)
