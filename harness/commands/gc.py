"""`chaos gc --keep-nights N`: store retention for nightly campaigns.

Removes the run directories of old campaigns, keeping for each campaign name the
newest N, every campaign that failed a gate or did not finish (their evidence),
every ad-hoc or shrink campaign with a run that failed, stopped or is still
running, and, of every pruned campaign, campaign.json plus its pages: the trend
page reads campaign.json and the runs' verdict files, so trends survive gc.
Reproducers survive too: each pruned run keeps its schedule.yaml and its shrink
records (`shrink/`, `shrink-N/`), and a run that did not complete is kept whole.
Ad-hoc `chaos run` campaigns are only touched with --include-runs. Nothing is
written or removed outside the store.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from harness.cli import UserError
from harness.store import LATEST, write_text
from records import CampaignJson, ResultsJson, RunJson, StoreFormatError, read_model

# What a pruned run keeps: enough for trend.html and index.html, and its reproducers.
KEPT_FILES = ("run.json", "results.json", "schedule.yaml")
RUN_PARENTS = ("runs", "interrupted")
GC_MARKER = "gc.txt"


@dataclass(frozen=True)
class Decision:
    path: Path
    keep: bool
    reason: str


def register(cli: click.Group) -> None:
    cli.add_command(gc)


def _meta(path: Path) -> dict[str, Any] | None:
    try:
        return read_model(CampaignJson, path / "campaign.json").as_json()
    except (OSError, StoreFormatError):
        return None


def failed_a_gate(meta: dict[str, Any]) -> bool:
    return any(isinstance(g, dict) and not g.get("ok") for g in meta.get("gates") or [])


def decide(store: Path, keep_nights: int, include_runs: bool = False) -> list[Decision]:
    """Which campaigns lose their bulk (pure over the store's campaign.json files)."""
    decisions, seen = [], {}
    campaigns = sorted((p for p in store.iterdir() if p.is_dir() and not p.is_symlink() and p.name != LATEST),
                       key=lambda p: p.name, reverse=True)
    for path in campaigns:
        meta = _meta(path)
        if meta is None:
            continue
        kind = meta.get("kind")
        if kind != "campaign" and not include_runs:
            decisions.append(Decision(path, True, "ad-hoc run (use --include-runs)"))
            continue
        name = str(meta.get("name") or "ad-hoc")
        seen[name] = seen.get(name, 0) + 1
        if seen[name] <= keep_nights:
            decisions.append(Decision(path, True, f"one of the newest {keep_nights} of {name}"))
        elif kind == "campaign" and meta.get("status") != "complete":
            decisions.append(Decision(path, True, f"unfinished ({meta.get('status')}): resumable"))
        elif failed_a_gate(meta):
            decisions.append(Decision(path, True, "failed a gate: kept as evidence"))
        elif kind != "campaign" and (unsettled := _unsettled_run(path)):
            decisions.append(Decision(path, True, f"run {unsettled}: kept as evidence"))
        else:
            decisions.append(Decision(path, False, f"older than the newest {keep_nights} of {name}"))
    return decisions


def run_state(run: Path) -> str | None:
    """Why a run directory must stay whole (`interrupted`, `running`, `invalid`, ...), or None
    for a run that completed with a valid verdict. Unreadable records count as unsettled."""
    try:
        status = read_model(RunJson, run / "run.json").status
    except (OSError, StoreFormatError):
        return "without a readable run.json"
    if status != "complete":
        return str(status or "without a status")
    try:
        valid = read_model(ResultsJson, run / "results.json").valid
    except (OSError, StoreFormatError):
        return "without a verdict"
    return None if valid is True else ("invalid" if valid is False else "of unknown validity")


def _unsettled_run(campaign: Path) -> str | None:
    for parent in RUN_PARENTS:
        for run in _run_dirs(campaign / parent):
            if (state := run_state(run)) is not None:
                return f"{run.name} is {state}"
    return None


def _kept(child: Path) -> bool:
    return child.name in KEPT_FILES or (child.name == "shrink" or child.name.startswith("shrink-"))


def prune(path: Path, store: Path) -> int:
    """Remove a campaign's bulk (histories, logs, Parquet, run reports), keeping
    campaign.json, its pages and each run's run.json/results.json and reproducers
    (schedule.yaml, shrink records). A run that did not complete stays whole. Bytes freed.

    Symlinked directories are never entered and every path removed must lie
    inside the store: a link to elsewhere loses at most the link itself."""
    freed = 0
    root = store.resolve()
    for run in (run for parent in RUN_PARENTS for run in _run_dirs(path / parent)):
        state = run_state(run)
        if state is not None and state not in ("invalid", "of unknown validity"):
            continue
        for child in run.iterdir():
            if _kept(child) or not _inside(child, root):
                continue
            freed += _size(child)
            shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
    # write_text renames a new file over the name: a planted link is replaced, never followed
    write_text(path / GC_MARKER, "histories, logs and run reports removed by `chaos gc`; "
                                 "verdicts, timings and reproducers kept\n")
    return freed


def already_pruned(path: Path) -> bool:
    marker = path / GC_MARKER
    return marker.is_file() and not marker.is_symlink()


def _run_dirs(parent: Path) -> list[Path]:
    """Real directories under a real directory; symlinks (to anywhere) are skipped."""
    if parent.is_symlink() or not parent.is_dir():
        return []
    return sorted(p for p in parent.iterdir() if p.is_dir() and not p.is_symlink())


def _inside(path: Path, root: Path) -> bool:
    """Whether `path` (not followed if it is a link itself) lies under `root`."""
    return (path.parent.resolve() / path.name).is_relative_to(root)


def _size(path: Path) -> int:
    if path.is_file() or path.is_symlink():
        return path.lstat().st_size
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file())


@click.command()
@click.option("--keep-nights", type=click.IntRange(min=1), required=True,
              help="How many of the newest campaigns of each name keep everything.")
@click.option("--store", "-s", type=click.Path(path_type=Path, file_okay=False), default=Path("store"),
              show_default=True)
@click.option("--include-runs", is_flag=True, help="Also prune ad-hoc `chaos run` campaigns.")
@click.option("--dry-run", is_flag=True, help="Say what would be pruned; remove nothing.")
def gc(keep_nights: int, store: Path, include_runs: bool, dry_run: bool) -> None:
    """Free space in the store: old campaigns lose their histories, logs and run
    reports. Kept whole: the newest N campaigns of each name, every campaign that
    failed a gate (its evidence), every unfinished one, and (with --include-runs)
    every ad-hoc or shrink campaign with a failed, stopped or running run. Kept
    always: each campaign's campaign.json and pages, each run's verdicts and
    reproducers (schedule.yaml, shrink records), and every run that did not
    complete, so trend.html, index.html and the reproducer links still work."""
    if not store.is_dir():
        raise UserError(f"--store {store}: no such directory")
    freed = 0
    for decision in decide(store, keep_nights, include_runs):
        if decision.keep:
            click.echo(f"keep   {decision.path.name}: {decision.reason}")
            continue
        if already_pruned(decision.path):
            click.echo(f"pruned {decision.path.name}: already")
            continue
        click.echo(f"prune  {decision.path.name}: {decision.reason}")
        if not dry_run:
            freed += prune(decision.path, store)
    click.echo("dry run: nothing removed" if dry_run else f"freed {freed / 1e6:.1f} MB")
