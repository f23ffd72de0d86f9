"""`chaos check`: re-run the checkers on stored runs, many at once in one Spark session."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from checkers.verdict import as_verdict
from harness.cli import UserError
from records import version_problem_of

VERDICTS = {True: "[green]ok[/]", False: "[red bold]FAIL[/]", "unknown": "[yellow]?[/]"}
SECTIONS = ("stats", "queue", "order", "linearizable", "rto", "perf", "invariants")
HEADERS = {"linearizable": "lin", "invariants": "inv"}
LEGEND = "ok = valid, FAIL = invalid, ? = unknown, lin = linearizable, inv = invariants; details in each run's results.json"
MALFORMED_SHOWN = 5


def register(cli: click.Group) -> None:
    cli.add_command(check)


def parse_conf(pairs: tuple[str, ...]) -> dict[str, str]:
    """`spark.x=1` pairs -> {"spark.x": "1"}; a pair without '=' is a user error."""
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UserError(f"--conf {pair!r}: expected KEY=VALUE, e.g. spark.driver.memory=4g")
        conf[key.strip()] = value.strip()
    return conf


def _verdict(section: dict[str, Any] | None) -> str:
    if section is None:
        return "-"
    return VERDICTS[as_verdict(section.get("valid"))]


def shown(run: Path) -> str:
    """A run as the user knows it: relative to the current directory when inside it."""
    try:
        return str(run.relative_to(Path.cwd()))
    except ValueError:
        return str(run)


def sections_of(results: list[dict[str, Any]]) -> tuple[str, ...]:
    """The built-in sections, then those of other registered checkers found in `results`."""
    others = {name for result in results for name in result.get("checkers", {}) if name not in SECTIONS}
    return (*SECTIONS, *sorted(others))


def _summary(results: list[dict[str, Any]], runs: list[Path]) -> Table:
    parent = Path(os.path.commonpath(runs)) if len(runs) > 1 else runs[0].parent
    table = Table(title=f"runs in {shown(parent)}", title_justify="left")
    table.add_column("run", overflow="fold")
    names = sections_of(results)
    for column in ("workload", "verdict", *(HEADERS.get(s, s) for s in names)):
        table.add_column(column, no_wrap=True)
    for run, result in zip(runs, results):
        sections = result.get("checkers", {})
        table.add_row(str(run.relative_to(parent)), str(result.get("workload")), _verdict(result),
                      *(_verdict(sections.get(name)) for name in names))
    return table


def _details(console: Console, run: Path, result: dict[str, Any]) -> None:
    """The lines a user acts on: errors, malformed input, checker problems (never wrapped)."""
    def say(text: str) -> None:
        console.print(text, markup=False, highlight=False, soft_wrap=True)

    if result.get("error"):
        say(f"{run}: checking failed: {result['error']}")
    sections = result.get("checkers", {})
    malformed = sections.get("stats", {}).get("malformed", {})
    for bad in malformed.get("examples", [])[:MALFORMED_SHOWN]:
        say(f"{run / bad['file']}:{bad['line']}: {bad['reason']}")
    if malformed.get("count", 0) > MALFORMED_SHOWN:
        say(f"{run}: ... {malformed['count'] - MALFORMED_SHOWN} more malformed line(s) "
            "in checked/malformed.parquet")
    for name in sections_of([result]):
        section = sections.get(name, {})
        for problem in section.get("problems", []):
            say(f"{run}: {name}: {problem}")
        if section.get("error"):
            say(f"{run}: {name}: checker failed: {section['error']}")


@click.command("check")
@click.argument("store_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--spark-master", metavar="URL", help="Spark master, e.g. spark://host:7077 [default: local[*]].")
@click.option("--conf", "confs", multiple=True, metavar="KEY=VALUE",
              help="A Spark setting, repeatable, e.g. --conf spark.driver.memory=4g.")
@click.option("--spark-log", type=click.Path(path_type=Path),
              help="File for Spark's own log [default: spark.log in STORE_DIR].")
def check(store_dirs: tuple[Path, ...], spark_master: str | None, confs: tuple[str, ...],
          spark_log: Path | None) -> None:
    """Check stored runs again and rewrite their results.json and checked/ tables.

    STORE_DIR is a run directory, a campaign directory or a whole store; all
    runs found are checked together in one Spark session, each getting its
    own verdict. Exit code: 0 all valid, 1 any invalid, 2 any unknown.

    Example: chaos check store/latest --conf spark.driver.memory=4g
    """
    from checkers.pipeline import CheckError, check_runs, find_runs, steps
    from checkers.registry import plugin_errors
    from checkers.verdict import exit_code, merge_valid

    conf = parse_conf(confs)
    try:
        runs = find_runs(store_dirs)
    except CheckError as exc:
        raise UserError(str(exc)) from None
    for run in runs:  # a run the checkers cannot read right: refused before Spark starts
        old = version_problem_of(Path(run) / "run.json")
        if old is not None:
            raise UserError(old)
    console = Console()
    for problem in plugin_errors():
        console.print(f"checker plugin not loaded: {problem}", markup=False, highlight=False, soft_wrap=True)
    names = steps()
    with Progress(TextColumn("{task.description:<28}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=console, transient=True) as progress:
        task = progress.add_task(f"checking {len(runs)} run(s)", total=len(names))

        def step(name: str) -> None:
            progress.update(task, description=name, completed=names.index(name))

        log_file = spark_log or Path(os.path.commonpath([p.resolve() for p in store_dirs])) / "spark.log"
        try:
            results = check_runs(runs, spark_master, conf, log_file=log_file, progress=step)
        except Exception as exc:  # Spark could not start, the store is not writable ...
            raise UserError(f"checking failed: {type(exc).__name__}: {str(exc).strip().splitlines()[0]} "
                            f"(Spark's log: {log_file})") from None
        progress.update(task, completed=len(names))
    console.print(_summary(results, runs))
    console.print(LEGEND, highlight=False)
    for run, result in zip(runs, results):
        _details(console, Path(shown(run)), result)
    from harness.commands.report import render_after_check
    render_after_check(runs, lambda text: console.print(text, markup=False, highlight=False, soft_wrap=True))
    raise SystemExit(exit_code(merge_valid(r.get("valid", "unknown") for r in results)))
