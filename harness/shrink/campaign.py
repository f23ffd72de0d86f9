"""Shrinking after a campaign: the first failing run of each failing cell, within a budget.

A cell is (profile, workload, fault); its first failing run in plan order is the
one shrunk. The campaign's time budget is shared out: each shrink may use what is
left divided by the cells still to shrink. The runs go on the campaign's inventory
file, or on a local cluster brought up for the shrinks and taken down after.
"""
from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

from harness.shrink import original as original_run
from harness.shrink.search import Settings
from harness.shrink.session import ShrinkResult, shrink
from records import ResultsJson, RunJson, StoreFormatError, read_model


def first_failing_runs(campaign_dir: Path) -> list[Path]:
    """The first INVALID run (by run id) of every cell that has one."""
    chosen: dict[tuple[str, str, str], Path] = {}
    for run_dir in sorted(p for p in (campaign_dir / "runs").glob("*") if p.is_dir()):
        try:
            record = read_model(RunJson, run_dir / "run.json")
            valid = read_model(ResultsJson, run_dir / "results.json").valid
        except (OSError, StoreFormatError):
            continue
        cell = (record.profile, record.workload, "+".join(record.faults))
        if valid is False and cell not in chosen:
            chosen[cell] = run_dir
    return list(chosen.values())


@contextlib.contextmanager
def nodes_for(inventory_file: Path | None, nodes: int, provider_name: str,
              say: Callable[[str], None]) -> Iterator[Path]:
    """The campaign's inventory file, or a local cluster for the shrinks (taken down after)."""
    if inventory_file is not None:
        yield inventory_file
        return
    from inventory import docker, netns
    provider = docker if provider_name == "docker" else netns
    name = f"shr-{secrets.token_hex(3)}"
    say(f"bringing up a local {provider_name} cluster {name} of {nodes} nodes for the shrinks")
    inventory = provider.up(name, nodes, persistent=False)
    try:
        yield Path(inventory.source)
    finally:
        provider.down(name)


def shrink_failing(campaign_dir: Path, settings: Settings, budget_s: float, inventory: Path, console: Any,
                   say: Callable[[str], None] = print) -> list[ShrinkResult]:
    """Shrink the first failing run of each failing cell; stops at a stop signal."""
    runs = first_failing_runs(campaign_dir)
    results: list[ShrinkResult] = []
    deadline = time.monotonic() + budget_s
    for index, run_dir in enumerate(runs):
        left = deadline - time.monotonic()
        if left <= 0:
            say(f"shrink budget spent; not shrunk: {', '.join(p.name for p in runs[index:])}")
            break
        try:
            original = original_run.load(run_dir, inventory)
        except original_run.ShrinkRefused as exc:
            say(f"not shrunk: {exc}")
            continue
        share = Settings(**{**vars(settings), "max_seconds": min(settings.max_seconds, left / (len(runs) - index))})
        say(f"shrinking {run_dir.name} ({', '.join(sorted(original.classes))})")
        result = shrink(original, share, console, log=say)
        results.append(result)
        say(f"  {result.outcome.status}: {len(result.outcome.minimal.windows)} windows, "
            f"reproduced {result.outcome.minimal_failed}/{result.outcome.minimal_tries}; {result.page}")
        if result.outcome.status == "interrupted":
            raise KeyboardInterrupt("stopped while shrinking")
    return results
