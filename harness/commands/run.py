"""`chaos run` (one chaos run end to end), `chaos import` / `chaos export` (Jepsen EDN)."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from checkers.verdict import UNKNOWN, as_verdict
from harness import plan, schedule
from harness.cli import UserError
from harness.edn import EdnError, export_run, import_history, load_history
from harness.signals import stop_signals
from harness.stale import clean_up_first
from harness.spec import (RunSpec, SpecError, build_spec, check_can_run_here, check_store_writable,
                          known_profiles, known_workloads)
from harness.store import Store, StoreError, check_writable, find_run_dir

VERDICTS = {True: "valid", False: "INVALID", "unknown": "unknown"}


def verdict_word(valid: Any) -> str:
    """How the CLI prints a verdict; anything but true or false is unknown."""
    return VERDICTS[as_verdict(valid)]


def exit_code(status: str, valid: Any) -> int:
    """0 valid, 1 invalid, 2 unknown; a run that errored or was interrupted has no verdict."""
    from harness import cli  # its exit codes are defined after the commands are registered
    if status == "interrupted":
        return cli.EXIT_INTERRUPTED
    if status != "complete":
        return cli.EXIT_ERROR
    return {True: 0, False: 1, UNKNOWN: 2}[as_verdict(valid)]


def register(cli: click.Group) -> None:
    cli.add_command(run)
    cli.add_command(import_command)
    cli.add_command(export)


def _default(name: str) -> Any:
    return RunSpec.model_fields[name].default


def _parse_mix(text: str | None) -> dict[str, float] | None:
    """`read=2,write=1` -> {"read": 2.0, "write": 1.0}."""
    if not text:
        return None
    mix = {}
    for part in text.split(","):
        name, sep, weight = part.partition("=")
        try:
            mix[name.strip()] = float(weight)
        except ValueError:
            raise UserError(f"--mix {text}: expected op=weight pairs like read=2,write=1, got {part!r}") from None
        if not sep or not name.strip():
            raise UserError(f"--mix {text}: expected op=weight pairs like read=2,write=1, got {part!r}")
    return mix


@click.command()
@click.option("--profile", "-p", help=f"SUT profile: {', '.join(known_profiles())} "
                                      f"[default: {_default('profile')}].")
@click.option("--workload", "-w", help=f"Workload: {', '.join(known_workloads())} "
                                       f"[default: {_default('workload')}].")
@click.option("--fault", "-f", "faults", multiple=True,
              help="Fault to inject, repeatable; options after the name, e.g. random-loss:probability=0.3 "
                   f"(list: chaos faults) [default: {', '.join(_default('faults'))}].")
@click.option("--overlap", multiple=True,
              help="Fault started inside every window of the --fault ones and stopped before that window "
                   "ends, repeatable (a kill during a partition: -f random-partition --overlap random-kill).")
@click.option("--time", "-t", "time_s", type=float,
              help=f"Seconds of workload with the fault schedule [default: {_default('time'):g}].")
@click.option("--rate", type=float, help=f"Operations per second, all clients [default: {_default('rate'):g}].")
@click.option("--concurrency", "-c", type=int,
              help=f"Logical client processes [default: {_default('concurrency')}].")
@click.option("--interval", "-i", type=float,
              help="Seconds of quiet before each fault (and of each fault, without --fault-duration) "
                   "[default: the profile's failure detection plus a margin].")
@click.option("--fault-duration", "duration", type=float,
              help="Seconds each fault lasts [default: --interval if given, else the profile's failure "
                   "detection plus a margin, so that every fault window exercises a failover].")
@click.option("--recovery", type=float,
              help="Seconds the workload goes on after the faults are healed, before the final phase "
                   "[default: the profile's failure detection plus a margin].")
@click.option("--seed", type=int, help="Seed of the operation and fault schedules [default: random, recorded].")
@click.option("--nodes", "-n", type=int, help="Size of the local cluster [default: the running one, else 5].")
@click.option("--inventory", type=click.Path(path_type=Path), help="Inventory file (ssh, docker, netns).")
@click.option("--provider", type=click.Choice(["netns", "docker"]),
              help="Local cluster without --inventory: netns (namespaces) or docker (containers) [default: netns].")
@click.option("--store", "-s", type=click.Path(path_type=Path),
              help=f"Store directory [default: {_default('store')}].")
@click.option("--queues", type=int, help=f"Queues of the topic (queue, log) [default: {_default('queues')}].")
@click.option("--keys", type=int, help=f"Registers (register) [default: {_default('keys')}].")
@click.option("--ordered", is_flag=True, default=None,
              help="queue: one producer per shard key and one queue per key; order is checked.")
@click.option("--mix", help="Operation weights, e.g. read=2,write=1,cas=1 [default: the workload's].")
@click.option("--op-timeout", type=float,
              help=f"Seconds before a call counts as indeterminate [default: {_default('op_timeout'):g}].")
@click.option("--drain-timeout", type=float,
              help=f"Longest final phase, seconds [default: {_default('drain_timeout'):g}].")
@click.option("--target", "targets", multiple=True,
              help="Roles faults may hit, repeatable: brokers, controllers, nameservers [default: all].")
@click.option("--timing", help="SUT timing: default (RocketMQ's intervals and timeouts) or fast (a tenth) "
                               f"[default: {_default('timing')}].")
@click.option("--bug", "bugs", multiple=True,
              help="Switch a library bug on in the SUT, repeatable (docs/teeth.md) [default: none].")
@click.option("--rocketmq-version", metavar="V",
              help="Real RocketMQ release for rmq-* profiles, fetched from Maven Central on first use "
                   "(docs/rocketmq.md, \"Releases\") [default: the pinned one].")
@click.option("--no-check", is_flag=True, help="Skip the checkers (the verdict is then unknown).")
@click.option("--spark-master", help="Spark master URL for the checkers [default: local[*]].")
@click.option("--rto-threshold", "rto_threshold_s", type=float,
              help="Seconds each fault window's recovery time may take; longer is invalid [default: none].")
@click.option("--min-availability", type=float,
              help="Share (0 to 1) of writes inside fault windows that must succeed [default: none].")
@click.option("--schedule", "schedule_path", type=click.Path(path_type=Path, dir_okay=False),
              help="Replay a schedule file (a run's schedule.yaml, or `chaos shrink`'s minimal one): its "
                   "profile, seed, workload shape and fault windows; other options given here override it.")
@click.option("--dry-run", is_flag=True, help="Validate and print the schedules; start nothing.")
@click.option("--quiet", "-q", is_flag=True, help="No live progress line.")
def run(faults: tuple[str, ...], overlap: tuple[str, ...], time_s: float | None, targets: tuple[str, ...],
        no_check: bool, mix: str | None, dry_run: bool, quiet: bool, schedule_path: Path | None,
        **options: Any) -> None:
    """Run one chaos test: deploy the SUT, drive the workload while faults are
    injected, heal, drain, check, and exit 0 (valid), 1 (invalid) or 2 (unknown).

    Without --inventory the run uses the local cluster of `chaos up`, or brings
    one up (root needed) and takes it down afterwards. Everything is recorded
    under STORE/<campaign>/runs/<run>/ (STORE/latest points at the newest).
    """
    console = Console(stderr=True)
    bugs = options.pop("bugs") or None
    values = dict(options, faults=faults or None, overlap=overlap or None, time=time_s, targets=targets or None,
                  bugs=bugs, mix=_parse_mix(mix), check=False if no_check else None)
    if schedule_path is not None:
        values = with_schedule(schedule_path, values)
    try:
        spec = build_spec(values, check_store=False)
        if not dry_run:  # what a real run needs, still before anything exists
            check_can_run_here(spec)
            check_store_writable(spec)
    except SpecError as exc:
        raise UserError(str(exc)) from None
    from harness.run import RunLifecycle  # the lifecycle's imports only when a run starts
    if dry_run:
        _show_plan(spec, plan.plan_summary(spec))
        return
    console.print(f"chaos run: {spec.summary()}", soft_wrap=True, highlight=False)
    if spec.bugs:
        console.print(f"[yellow]library bugs switched on: {', '.join(spec.bugs)} (a mutant run, docs/teeth.md)[/]",
                      soft_wrap=True, highlight=False)
    warning = spec.failover_warning()
    if warning:
        console.print(f"[yellow]{warning}[/]", soft_wrap=True, highlight=False)
    with stop_signals(lambda: console.print("[yellow]stopping: please wait[/]")):  # SIGTERM, SIGHUP = Ctrl-C
        clean_up_first(console)
        outcome = RunLifecycle(spec, console, show_progress=not quiet).execute()
    if outcome.error:
        console.print(f"[red]run {outcome.status}:[/] {outcome.error}", highlight=False, soft_wrap=True)
    code = exit_code(outcome.status, outcome.valid)
    verdict = verdict_word(outcome.valid) if outcome.status == "complete" else outcome.status
    findings = run_findings(outcome.run.path)
    if findings:
        click.echo(findings)
    click.echo(f"verdict: {verdict} (exit {code})")
    click.echo(f"store: {outcome.run.path}")
    _show_report(outcome.run.report_dir / "index.html")
    sys.exit(code)


def with_schedule(path: Path, values: dict[str, Any]) -> dict[str, Any]:
    """The schedule file's values under the options given on the command line."""
    for clash in ("faults", "overlap", "interval", "duration", "targets"):
        if values.get(clash) is not None:
            option = {"faults": "--fault", "duration": "--fault-duration",
                      "targets": "--target"}.get(clash, f"--{clash}")
            raise UserError(f"--schedule {path}: give the fault windows in the file, not {option}")
    try:
        replay = plan.spec_values(schedule.load(path))
    except schedule.ScheduleFileError as exc:
        raise UserError(str(exc)) from None
    return {**replay, **{key: value for key, value in values.items() if value is not None}}


def _show_report(page: Path) -> None:
    """Where the run's report is, and how to browse the store it is in."""
    if page.is_file():
        from harness.commands.report import serve_hint
        click.echo(f"report: {page}")
        click.echo(serve_hint(page.parent.parent))


def run_findings(run_dir: Path) -> str | None:
    """One line from results.json: failovers seen, windows that exercised one, anomaly counts."""
    try:
        checkers = json.loads((run_dir / "results.json").read_text())["checkers"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    rto, counts = checkers.get("rto", {}), checkers.get("queue", {}).get("counts", {})
    parts = []
    if "failovers" in rto:
        windows = rto.get("windows", [])
        exercised = sum(1 for w in windows if w.get("exercises_failover"))
        parts.append(f"failovers: {rto['failovers']} ({exercised}/{len(windows)} fault windows outlasted "
                     f"failure detection)")
    anomalies = [f"{name.replace('_', ' ')} {counts[name]}" for name in (
        "lost", "lost_after_consume", "inconsistent_offsets", "poll_skip", "nonmonotonic_poll", "duplicated")
        if name in counts]
    if anomalies:
        parts.append(", ".join(anomalies))
    return "; ".join(parts) or None


def _show_plan(spec: RunSpec, summary: dict[str, Any]) -> None:
    click.echo(f"run: {spec.summary()}")
    if spec.windows is not None:
        click.echo(f"fault windows: {len(spec.windows)} from the schedule file")
    click.echo(spec.failover_warning() or f"fault windows: {spec.duration:g}s after {spec.interval:g}s quiet "
               f"(failure detection {spec.detection_s:g}s), recovery {spec.recovery:g}s")
    ops = ", ".join(f"{f} {n}" for f, n in sorted(summary["by_f"].items()))
    click.echo(f"operations: {summary['operations']} ({ops}), digest {summary['operations_digest']}")
    click.echo(f"faults: {len(summary['faults'])} events, digest {summary['faults_digest']}")
    for event in summary["faults"]:
        click.echo(f"  {event['offset_s']:8.3f}s  {event['phase']:<5}  {event['fault']}  "
                   f"(window {event['window']}, target seed {event['seed']})")


@click.command("import")
@click.argument("edn_file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--store", "-s", type=click.Path(path_type=Path), default=Path("store"), show_default=True)
@click.option("--workload", "-w", type=click.Choice(known_workloads()),
              help="Which workload's checks apply [default: guessed from the operation names].")
@click.option("--check", is_flag=True, help="Run the checkers on the imported history and exit with the verdict.")
def import_command(edn_file: Path, store: Path, workload: str | None, check: bool) -> None:
    """Import a Jepsen EDN history as a run (a campaign of one run) in the store.

    Client ops go to history/imported.jsonl and nemesis ops to nemesis.jsonl,
    so every checker works on it as on a recorded run. Prints the run directory.
    """
    try:
        events = load_history(edn_file)  # a bad file is refused before the store is touched
        check_writable(store)
        run_dir = import_history(edn_file, Store(store), workload, events)
    except (EdnError, StoreError) as exc:
        raise UserError(str(exc)) from None
    click.echo(str(run_dir.path))
    if check:
        from harness.run import check
        results = check([run_dir.path])
        valid = results[0].get("valid", "unknown") if results else "unknown"
        click.echo(f"verdict: {verdict_word(valid)}")
        from harness.commands.report import render_after_check
        render_after_check([run_dir.path])
        sys.exit(exit_code("complete", valid))


@click.command()
@click.argument("run_dir", type=click.Path(path_type=Path, file_okay=False))
@click.option("--output", "-o", type=click.Path(path_type=Path, dir_okay=False),
              help="EDN file to write [default: RUN_DIR/history.edn].")
def export(run_dir: Path, output: Path | None) -> None:
    """Export a run's history (client and nemesis events) as a Jepsen EDN history.

    RUN_DIR is a run directory, a campaign with one run, or a store (its latest).
    """
    try:
        run = find_run_dir(run_dir)
        out = output or run.path / "history.edn"
        count = export_run(run.path, out)
    except (StoreError, ValueError, OSError) as exc:
        raise UserError(str(exc)) from None
    click.echo(f"{count} ops -> {out}")
