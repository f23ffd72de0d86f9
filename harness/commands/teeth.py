"""`chaos teeth CAMPAIGN`: the campaign's mutation score over the bug library."""
from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from harness.cli import UserError
from harness.store import StoreError, check_writable

EXIT_MISSED = 1


def register(cli: click.Group) -> None:
    cli.add_command(teeth)


@click.command()
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--bug", "bugs", multiple=True, help="Only this library bug, repeatable [default: every bug].")
@click.option("--store", "-s", type=click.Path(path_type=Path), default=Path("store"), show_default=True,
              help="Store directory (one campaign per bug goes there).")
@click.option("--rocketmq-version", metavar="V",
              help="Real RocketMQ release of every rmq-* profile without an @V of its own; replaces the "
                   "file's rocketmq_version (docs/rocketmq.md, \"Releases\").")
@click.option("--json", "as_json", is_flag=True, help="Print the verdicts as JSON on stdout.")
@click.option("--quiet", "-q", is_flag=True, help="No live progress display.")
@click.option("--dry-run", is_flag=True,
              help="Print per bug the runs it would make, or what the campaign lacks; start nothing.")
def teeth(file: Path, bugs: tuple[str, ...], store: Path, rocketmq_version: str | None, as_json: bool, quiet: bool,
          dry_run: bool) -> None:
    """Run the campaign in FILE once per library bug (sut/bugs.py), each time only on
    the cells that can expose the bug (its expected-safe profiles of the bug's mode,
    its faults of the bug's families), and print per bug: caught (by which run and
    anomaly), missed, or not exercisable by this campaign (and what it needs); then
    the mutation score.

    Every bug's cells also run once with no bug (the control, same seeds); a bug is
    caught only by a safety anomaly (lost, lost after consume, inconsistent offsets,
    a non-linearizable read, an order violation, an invariant breach) in a run whose
    control is valid.

    Exit 0 when every exercisable bug was caught, 1 when one was missed (or its runs
    or its control failed), 3 on bad input or when the campaign can exercise none of
    the bugs, 130 when stopped. With --dry-run: exit 0 when every bug is exercisable
    by the campaign, 1 when one is not.
    """
    from harness.campaign import CampaignError, load_campaign
    from harness.campaign import regressions
    from harness.campaign.teeth import check_names, exercisable_by, run_teeth
    console = Console(stderr=True)
    if regressions.is_regressions(file):
        historic_teeth(file, bugs, store, rocketmq_version, as_json, quiet, dry_run, console)
        return
    try:
        spec = load_campaign(file, rocketmq_version)
        names = check_names(list(bugs))
        if not dry_run:
            check_writable(store)
            if not exercisable_by(spec, names):
                raise CampaignError(f"{file}: campaign {spec.name} can exercise none of the "
                                    f"{len(names)} bug(s) {', '.join(names)}: nothing to measure "
                                    "(chaos teeth --dry-run says what each needs)")
    except CampaignError as exc:
        raise UserError(str(exc)) from None
    except StoreError as exc:
        raise UserError(f"--store: {exc}") from None
    if dry_run:
        print_dry_run(spec, names, store, as_json)
        return
    from harness.stale import clean_up_first
    clean_up_first(console)
    began = time.monotonic()
    verdicts = run_teeth_stoppable(lambda: run_teeth(spec, file.resolve(), store, names, console,
                                                     show_progress=not quiet))
    wall = time.monotonic() - began
    if as_json:
        from harness.campaign.teeth import score
        caught, exercisable = score(verdicts)
        click.echo(json.dumps({"campaign": spec.name, "bugs": [v.as_json() for v in verdicts],
                               "caught": caught, "exercisable": exercisable, "wall_s": round(wall, 1)}, indent=2))
    else:
        print_table(spec.name, verdicts, wall)
    sys.exit(exit_code(verdicts))


def historic_teeth(file: Path, bugs: tuple[str, ...], store: Path, rocketmq_version: str | None, as_json: bool,
                   quiet: bool, dry_run: bool, console: Console) -> None:
    """A regressions file: each historic RocketMQ bug's recipe on its buggy and its fixed release."""
    from harness.campaign import CampaignError
    from harness.campaign import regressions
    try:
        if rocketmq_version:
            raise CampaignError(f"--rocketmq-version: {file} names each bug's releases itself (sut/rocketmq/bugs.yaml)")
        spec = regressions.load(file, bugs)
        if not dry_run:
            check_writable(store)
    except CampaignError as exc:
        raise UserError(str(exc)) from None
    except StoreError as exc:
        raise UserError(f"--store: {exc}") from None
    if dry_run:
        print_historic_dry_run(spec, store, as_json)
        return
    began = time.monotonic()
    verdicts = run_teeth_stoppable(lambda: regressions.run_regressions(spec, file.resolve(), store, console,
                                                                       show_progress=not quiet))
    wall = time.monotonic() - began
    if as_json:
        from harness.campaign.teeth import score
        caught, exercisable = score(verdicts)
        click.echo(json.dumps({"campaign": spec.name, "kind": regressions.KIND, "bugs": [v.as_json() for v in verdicts],
                               "caught": caught, "exercisable": exercisable, "wall_s": round(wall, 1)}, indent=2))
    else:
        print_historic_table(spec.name, verdicts, wall)
    sys.exit(exit_code(verdicts))


def run_teeth_stoppable(run: Callable[[], list]) -> list:
    """The whole teeth command under the stop handlers, not only each campaign's runs: a
    SIGTERM or SIGHUP between two campaigns (a cluster coming up, checks, pages) unwinds
    through the same clean-up as Ctrl-C and exits 130."""
    from harness.signals import stop_signals
    with stop_signals():
        return run()


def print_historic_dry_run(spec: Any, store: Path, as_json: bool) -> None:
    """Per bug the runs on both releases, or why it cannot run; exit 1 when one cannot."""
    from harness.campaign.plan import plan
    from harness.campaign.regressions import bug_campaign
    shown = []
    for bug in spec.selected():
        runs = [r.run_id for r in plan(bug_campaign(spec, bug), store=store).runs] if bug.reachable else []
        shown.append({"bug": bug.id, "issue": bug.issue, "buggy_version": bug.buggy_version,
                      "fixed_version": bug.fixed_version, "exercisable": bug.reachable, "runs": runs,
                      "needs": None if bug.reachable else bug.needs})
    missing = [s["bug"] for s in shown if not s["exercisable"]]
    if as_json:
        click.echo(json.dumps({"campaign": spec.name, "bugs": shown, "exercisable": len(shown) - len(missing),
                               "total": len(shown)}, indent=2))
    else:
        for s in shown:
            what = (f"{len(s['runs'])} runs on {s['buggy_version']} and {s['fixed_version']}" if s["exercisable"]
                    else f"not exercisable (needs {s['needs']})")
            click.echo(f"#{s['issue']} {s['bug']}: {what}")
        click.echo(f"{len(shown) - len(missing)} of {len(shown)} bugs exercisable by {spec.name}")
    sys.exit(EXIT_MISSED if missing else 0)


def print_historic_table(name: str, verdicts: list, wall_s: float) -> None:
    from harness.campaign.teeth import CAUGHT, NOT_EXERCISABLE, score
    console = Console(width=max(140, Console().width))
    table = Table(title=f"teeth of {name}: historic RocketMQ bugs")
    for column in ("bug", "buggy release: caught", "fixed release: valid", "verdict", "detail"):
        table.add_column(column)
    for v in verdicts:
        if v.status == NOT_EXERCISABLE:
            table.add_row(f"#{v.issue} {v.bug}", v.buggy_version, v.fixed_version, "–", f"needs {v.needs}")
            continue
        first = next((r for r in v.buggy if r["seed"] in v.caught_seeds), None)
        detail = (f"seed {first['seed']}: {'; '.join(first['safety'])}" if first
                  else v.error or f"no safety anomaly in {v.seeds} runs")
        table.add_row(f"#{v.issue} {v.bug}", f"{v.buggy_version}: {len(v.caught_seeds)} of {v.seeds} seeds",
                      f"{v.fixed_version}: {len(v.valid_controls)} of {v.seeds}",
                      {CAUGHT: "caught"}.get(v.status, v.status.upper()), detail)
    console.print(table)
    caught, exercisable = score(verdicts)
    console.print(f"{caught} of {exercisable} exercisable historic bugs caught with valid controls "
                  f"({len(verdicts) - exercisable} not exercisable); {wall_s / 60:.1f} min",
                  highlight=False, soft_wrap=True)


def print_dry_run(spec: Any, names: list[str], store: Path, as_json: bool) -> None:
    """Per bug the runs teeth would make; exit 1 when a bug is not exercisable."""
    from harness.campaign.teeth import dry_run
    shown = dry_run(spec, names, store)
    missing = [s.bug for s in shown if s.needs]
    if as_json:
        click.echo(json.dumps({"campaign": spec.name, "bugs": [s.as_json() for s in shown],
                               "exercisable": len(shown) - len(missing), "total": len(shown)}, indent=2))
    else:
        for s in shown:
            what = f"not exercisable (needs {s.needs})" if s.needs else (f"{len(s.runs)} run{'s' * (len(s.runs) != 1)} on "
                                                                        f"{', '.join(s.profiles)} x {', '.join(s.faults)}")
            click.echo(f"{s.bug}: {what}")
        click.echo(f"{len(shown) - len(missing)} of {len(shown)} bugs exercisable by campaign {spec.name}"
                   + (f"; not: {', '.join(missing)}" if missing else ""))
    sys.exit(EXIT_MISSED if missing else 0)


def exit_code(verdicts: list) -> int:
    """0 only when some bug was exercised and every exercised one was caught."""
    from harness.campaign.teeth import CAUGHT, NOT_EXERCISABLE
    exercised = [v for v in verdicts if v.status != NOT_EXERCISABLE]
    return 0 if exercised and all(v.status == CAUGHT for v in exercised) else EXIT_MISSED


def print_table(name: str, verdicts: list, wall_s: float) -> None:
    from harness.campaign.teeth import CAUGHT, NOT_EXERCISABLE, score
    console = Console(width=max(140, Console().width))
    table = Table(title=f"teeth of campaign {name}")
    for column in ("bug", "families", "verdict", "runs", "control", "caught by (run: safety anomaly)"):
        table.add_column(column)
    from sut.bugs import get
    for v in verdicts:
        if v.status == CAUGHT:
            first = v.caught_by[0]
            detail = f"{first['run_id']}: {'; '.join(first['anomalies']) or 'invalid'}"
            if len(v.caught_by) > 1:
                detail += f" (+{len(v.caught_by) - 1} more runs)"
        elif v.status == NOT_EXERCISABLE:
            detail = f"not exercisable by this campaign (needs {v.needs})"
        elif v.unsafe_without_control:
            first = v.unsafe_without_control[0]
            detail = f"{first['run_id']}: {'; '.join(first['anomalies'])}, but its control is not valid"
        else:
            detail = v.error or f"all {v.runs} runs valid"
        verdict = {CAUGHT: "caught", NOT_EXERCISABLE: "–"}.get(v.status, v.status.upper())
        control = {True: "valid", False: "INVALID", None: "–"}.get(v.control_valid, str(v.control_valid))
        table.add_row(v.bug, "/".join(get(v.bug).families), verdict, str(v.runs), control, detail)
    console.print(table)
    caught, exercisable = score(verdicts)
    share = f" = {caught / exercisable:.0%}" if exercisable else ""
    console.print(f"mutation score: {caught} of {exercisable} exercisable bugs caught{share} "
                  f"({len(verdicts) - exercisable} not exercisable by this campaign); {wall_s / 60:.1f} min",
                  highlight=False, soft_wrap=True)
