"""`chaos shrink RUN`: turn a failing run into a minimal replayable schedule (docs/shrink.md)."""
from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from harness.cli import EXIT_INTERRUPTED, UserError
from harness.shrink.search import Settings

DEFAULTS = Settings()


def register(cli: click.Group) -> None:
    cli.add_command(shrink)


@contextlib.contextmanager
def on_its_nodes(original: Any) -> Iterator[Any]:
    """The run with an inventory: its own, or a throwaway local cluster of the run's provider
    and size, brought up now and taken down after the shrink (also after a stop)."""
    if original.provision is None:
        yield original
        return
    from harness.shrink.campaign import nodes_for
    provider, nodes = original.provision
    with nodes_for(None, nodes, provider, click.echo) as inventory:
        yield dataclasses.replace(original, inventory=inventory)


@click.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--anomaly", help="Anomaly class to keep (lost, lost-after-consume, inconsistent-offsets, "
                                "non-linearizable, ...) [default: the run's first, in that order].")
@click.option("--tries", type=click.IntRange(1, 20), default=DEFAULTS.tries, show_default=True,
              help="Tries per candidate at most.")
@click.option("--share", type=click.FloatRange(0, 1, min_open=True), default=DEFAULTS.share, show_default=True,
              help="Share of tries that must fail with the anomaly for a candidate to count as failing.")
@click.option("--max-runs", type=click.IntRange(1), default=DEFAULTS.max_runs, show_default=True,
              help="Runs the search may make in all.")
@click.option("--max-minutes", type=click.FloatRange(0, min_open=True), default=DEFAULTS.max_seconds / 60,
              show_default=True, help="Minutes after which no new try starts.")
@click.option("--confirm", type=click.IntRange(0, 20), default=DEFAULTS.confirm, show_default=True,
              help="Tries of the minimal schedule in all, for its reproduction rate (within the budget).")
@click.option("--inventory", type=click.Path(path_type=Path, dir_okay=False),
              help="Nodes to run the candidates on [default: the run's, if they are still there; for a "
                   "run on a throwaway local cluster, a new one of its provider and size].")
@click.option("--rocketmq-version", metavar="V",
              help="Run the candidates on this real RocketMQ release instead of the run's own (rmq-* runs) "
                   "[default: the run's].")
def shrink(run_dir: Path, anomaly: str | None, tries: int, share: float, max_runs: int, max_minutes: float,
           confirm: int, inventory: Path | None, rocketmq_version: str | None) -> None:
    """Shrink a failing run: fewer fault windows, shorter, fewer clients, lower rate,
    fewer queues or keys, while it still fails with the same anomaly class.

    Prints the minimal schedule, how often it failed, the command that replays
    it and the page that shows it beside the original (RUN/shrink/index.html).
    Ctrl-C heals the nodes and keeps what was found so far.
    """
    from harness.shrink import original as original_run
    from harness.shrink.session import choose_target, shrink as search
    from harness.signals import stop_signals
    from harness.stale import clean_up_first
    console = Console(stderr=True)
    try:
        original = original_run.load(run_dir, inventory)
        if rocketmq_version is not None:
            original = original_run.on_release(original, rocketmq_version)
        choose_target(original, anomaly)
    except original_run.ShrinkRefused as exc:
        raise UserError(str(exc)) from None
    if original.provision is not None:  # refused now, not after the search has begun
        from inventory import InventoryError, docker, netns
        provider, nodes = original.provision
        try:
            (docker if provider == "docker" else netns).check_can_provision("shr-check", nodes)
        except InventoryError as exc:
            raise UserError(f"{original.run.path}: its nodes were a throwaway {provider} cluster, and a new one "
                            f"cannot be brought up: {exc}") from None
    settings = Settings(tries=tries, share=share, max_runs=max_runs, max_seconds=max_minutes * 60,
                        confirm=confirm)
    click.echo(f"shrinking {original.run.path} ({', '.join(sorted(original.classes))}); "
               f"{len(original.schedule.windows)} fault windows, {original.schedule.shape.time:g}s")
    with stop_signals(lambda: console.print("[yellow]stopping: healing, keeping what was found[/]")):
        clean_up_first(console)
        with on_its_nodes(original) as candidate_run:
            result = search(candidate_run, settings, console, anomaly, log=click.echo)
    outcome = result.outcome
    minimal = outcome.minimal
    click.echo(f"shrink {outcome.status} after {outcome.runs} runs in {outcome.seconds:.0f}s")
    click.echo("minimal: " + "; ".join(f"{w.fault}{' on ' + ','.join(w.targets) if w.targets else ''} "
                                       f"at {w.start:g}s for {w.length:g}s" for w in minimal.windows))
    click.echo(f"  shape: {minimal.shape.time:g}s + {minimal.shape.recovery:g}s recovery, rate "
               f"{minimal.shape.rate:g}, concurrency {minimal.shape.concurrency}, queues {minimal.shape.queues}")
    click.echo(f"reproduction: {outcome.minimal_failed}/{outcome.minimal_tries} tries failed with the anomaly")
    click.echo(f"replay: {result.command}")
    click.echo(f"page: {result.page}")
    if outcome.status == "interrupted":
        sys.exit(EXIT_INTERRUPTED)
