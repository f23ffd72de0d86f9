"""`chaos report PATH...`: render the HTML reports of runs, campaigns or whole stores again."""
from __future__ import annotations

import shlex
from pathlib import Path

import click

from harness.cli import UserError


def register(cli: click.Group) -> None:
    cli.add_command(report)


def serve_hint(path: Path) -> str:
    """The `chaos serve` command that browses the store holding `path`."""
    return f"browse: {shlex.join(['chaos', 'serve', str(store_root_of(path))])}"


def store_root_of(path: Path) -> Path:
    """The store a run, campaign or store path belongs to (the path itself if unsure)."""
    path = Path(path)
    if path.parent.name == "runs":
        return path.parent.parent.parent
    if (path / "runs").is_dir() or (path / "campaign.json").is_file():
        return path.parent
    return path


@click.command("report")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
def report(paths: tuple[Path, ...]) -> None:
    """Render HTML reports for runs, campaigns or whole stores (PATH may be any of them).

    Writes each run's report/index.html and report/timeline.html, and a
    campaign's pages; prints the path of every page written. Exit 3 when a
    PATH is not a run, campaign or store.

    Example: chaos report store/latest
    """
    import reports
    for path in paths:
        try:
            pages = reports.render_path(path)
        except reports.ReportError as exc:
            raise UserError(str(exc)) from None
        for page in pages:
            click.echo(str(page))
    click.echo(serve_hint(paths[-1]))


def render_after_check(run_dirs: list[Path], say=click.echo) -> list[Path]:
    """Render each checked run's report and say where it is; a report that fails
    is one line, never a lost verdict (the checkers' results.json is already written)."""
    from harness.run import report_renderer
    render = report_renderer()
    pages: list[Path] = []
    if render is None:
        return pages
    for run in run_dirs:
        try:
            pages.append(Path(render(Path(run))))
        except Exception as exc:  # noqa: BLE001 - the verdict stands without its page
            say(f"{run}: report failed: {type(exc).__name__}: {exc}")
    for page in pages:
        say(f"report: {page}")
    if pages:
        say(serve_hint(Path(run_dirs[-1])))
    return pages
