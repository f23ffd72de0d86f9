"""`chaos campaign FILE`: run a campaign matrix, print its summary, exit by its gates."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from harness.commands.report import serve_hint
from harness.cli import UserError
from harness.store import StoreError, check_writable


def register(cli: click.Group) -> None:
    cli.add_command(campaign)


@click.command()
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--rocketmq-version", metavar="V",
              help="Real RocketMQ release of every rmq-* profile without an @V of its own; replaces the "
                   "file's rocketmq_version (docs/rocketmq.md, \"Releases\").")
@click.option("--resume", is_flag=True, help="Continue the newest unfinished campaign of this file's name.")
@click.option("--only", metavar="PATTERN",
              help="Run only the runs whose id matches this glob or contains it (e.g. 'dledger-3-*').")
@click.option("--dry-run", is_flag=True, help="Validate, print the runs, seeds, fault count and time; start nothing.")
@click.option("--store", "-s", type=click.Path(path_type=Path), default=Path("store"), show_default=True,
              help="Store directory.")
@click.option("--quiet", "-q", is_flag=True, help="No live progress display.")
@click.option("--shrink", "shrink_failing", is_flag=True,
              help="Afterwards shrink the first failing run of each failing cell (as `shrink: true`; "
                   "budget `shrink_minutes`); index.html links the reproducers.")
def campaign(file: Path, rocketmq_version: str | None, resume: bool, only: str | None, dry_run: bool, store: Path, quiet: bool,
             shrink_failing: bool) -> None:
    """Run the campaign in FILE: every profile x workload x fault x repeat on one
    cluster, one run at a time, checked with one Spark session; then the gates,
    the pages (index.html, compare.html, the store's trend.html) and a summary.

    Exit 0 when every gate passes, 1 when a gate fails, 3 on bad input or an
    error, 130 when stopped (Ctrl-C, SIGTERM, SIGHUP): the nodes are healed and
    `--resume` continues with the runs not yet finished.
    """
    from harness.campaign import CampaignError, load_campaign, plan
    console = Console(stderr=True)
    try:
        spec = load_campaign(file, rocketmq_version)
        the_plan = plan(spec, only=only, store=store)
    except CampaignError as exc:
        raise UserError(str(exc)) from None
    if dry_run:
        _show_plan(spec, the_plan, store)
        return
    try:
        check_writable(store)
    except StoreError as exc:
        raise UserError(f"--store: {exc}") from None
    from harness.campaign.model import profile_of, release_of
    from harness.spec import SpecError, check_release
    try:
        for entry in spec.profiles:
            check_release(profile_of(entry), release_of(entry, spec.rocketmq_version))
    except SpecError as exc:
        raise UserError(str(exc)) from None
    from harness.campaign.runner import CampaignRunner
    from harness.stale import clean_up_first
    clean_up_first(console)  # before a --resume moves a killed run's directory aside
    try:
        runner = CampaignRunner(spec, the_plan, file.resolve(), store, console, resume=resume,
                                show_progress=not quiet)
    except CampaignError as exc:
        raise UserError(str(exc)) from None
    left = len(runner.todo)
    console.print(f"chaos campaign {spec.name}: {left} of {len(the_plan.runs)} runs to go, "
                  f"store {runner.path}", highlight=False, soft_wrap=True)
    outcome = runner.execute()
    if (shrink_failing or spec.shrink) and outcome.status == "complete":
        shrink_after(runner.path, spec, console)
    print_summary(runner.path)
    if outcome.error:
        console.print(f"[red]campaign {outcome.status}:[/] {outcome.error}", highlight=False, soft_wrap=True)
    if outcome.status == "interrupted":
        click.echo(f"resume with: chaos campaign {file} --resume --store {store}")
    click.echo(f"index: {outcome.path / 'index.html'}")
    click.echo(serve_hint(outcome.path))
    sys.exit(outcome.exit_code)


def shrink_after(campaign_dir: Path, spec: Any, console: Console) -> None:
    """Shrink the failing cells' first failing runs, then render index.html again with the links."""
    from harness.shrink.campaign import nodes_for, shrink_failing
    from harness.shrink.search import Settings
    from harness.signals import stop_signals
    from reports.campaign import render_campaign
    choice = spec.inventory
    try:
        with stop_signals(), nodes_for(choice.file, choice.nodes or 5, choice.provider, click.echo) as inventory:
            shrink_failing(campaign_dir, Settings(), spec.shrink_minutes * 60, inventory, console, click.echo)
    except KeyboardInterrupt:
        click.echo("shrinking stopped: the nodes are healed, the reproducers found so far are kept")
    render_campaign(campaign_dir)


def _show_plan(spec: Any, the_plan: Any, store: Path) -> None:
    from harness.campaign.plan import estimated_seconds, fault_count
    d = spec.durations
    click.echo(f"campaign {spec.name}: {len(the_plan.runs)} runs ({len(spec.profiles)} profiles x "
               f"{len(spec.workloads)} workloads x {len(spec.faults)} faults x {spec.repeats} repeats"
               f"{', some skipped' if the_plan.skipped else ''}), base seed {spec.seed}, plan {the_plan.digest()}")
    click.echo(f"each run: {d.run:g}s with faults ({d.between:g}s quiet, {d.fault:g}s fault), "
               f"{d.recovery:g}s recovery; timing {spec.timing}")
    click.echo(f"faults injected: {fault_count(spec, the_plan, store)}")
    click.echo(f"estimated time: {estimated_seconds(spec, len(the_plan.runs)) / 3600:.1f} h")
    for run in the_plan.runs:
        click.echo(f"  {run.run_id}  seed {run.seed}")
    for line in the_plan.skipped:
        click.echo(f"  skipped: {line}")


VERDICT_TEXT = {True: "valid", False: "INVALID", None: "not run"}


def print_summary(campaign_dir: Path) -> None:
    """The summary table on stdout: profile x fault (x workload) with verdict, lost,
    every invalid checker's anomaly, failovers and RTO p50/p99, then the gates."""
    from reports.campaign import anomaly_text, load_campaign_view
    view = load_campaign_view(campaign_dir)
    console = Console(width=max(140, Console().width))
    table = Table(title=f"campaign {view.name}")
    for column in ("profile", "workload", "fault", "verdict", "lost", "anomalies", "failovers", "RTO p50",
                   "RTO p99", "runs"):
        table.add_column(column, justify="right" if column.startswith(("lost", "fail", "RTO", "runs")) else "left")
    for cell in view.cells():
        verdict = VERDICT_TEXT.get(cell.verdict, str(cell.verdict))
        table.add_row(cell.profile, cell.workload, cell.fault, verdict, _text(cell.lost),
                      _anomaly_counts(cell.runs), _text(cell.failovers),
                      _seconds(cell.rto_quantile(0.5)), _seconds(cell.rto_quantile(0.99)), str(len(cell.runs)))
    console.print(table)
    for run in view.runs:
        if run.anomalies:
            safe = view.profiles.get(run.profile, {}).get("expected_safe", True)
            held = "expected safe" if safe else "expected unsafe"
            bug = f", bug {'+'.join(run.bugs)}" if run.bugs else ""
            console.print(f"anomalies  {run.run_id} ({held}{bug}): "
                          + "; ".join(anomaly_text(a) for a in run.anomalies), highlight=False, soft_wrap=True)
    bugs = sorted({b for r in view.runs for b in r.bugs})
    if bugs:
        console.print(f"library bugs switched on: {', '.join(bugs)} (docs/teeth.md)", highlight=False)
    for gate in view.gates:
        mark = "PASS" if gate.get("ok") else "FAIL"
        console.print(f"gate {mark}  {gate.get('title')}: {gate.get('detail')}", highlight=False, soft_wrap=True)


def _anomaly_counts(runs: list[Any]) -> str:
    """`queue 17, linearizable 1`: how many anomalies each invalid checker found in a cell."""
    totals: dict[str, int] = {}
    for run in runs:
        for anomaly in run.anomalies:
            totals[anomaly["checker"]] = totals.get(anomaly["checker"], 0) + int(anomaly.get("count") or 1)
    return ", ".join(f"{name} {count}" for name, count in totals.items()) or "–"


def _text(value: Any) -> str:
    return "–" if value is None else str(value)


def _seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}s"
