"""`chaos faults` (list the nemeses) and `chaos heal` (repair what a run left behind)."""
from __future__ import annotations

import json
from pathlib import Path

import click

import nuclei
from faults import registry
from faults.options import describe as describe_option
from harness.cli import UserError
from inventory import Inventory, InventoryError, Pool, load
from nuclei.heal import AFTER_STOP_ACTIONS, HealReport
from nuclei.journal import JournalError
from nuclei.net import clear
from nuclei.process import resume_stopped_under

JOURNAL = "journal.jsonl"
# Keys of run.json that may point at the inventory a run used.
_INVENTORY_KEYS = ("inventory", "inventory_file", "inventory_path")


def register(cli: click.Group) -> None:
    cli.add_command(faults_command)
    cli.add_command(heal)


@click.command("faults")
def faults_command() -> None:
    """List every fault (nemesis) name with a one-line description, plugins included.

    Options go after the name: `fixed-kill:targets=n1,n2`,
    `random-loss:probability=0.3`. Plugins register through the entry-point
    group `chaos.faults` (see docs/nemeses.md).
    """
    known = registry.known()
    width = max(map(len, known))
    for name, registration in known.items():
        origin = "" if registration.origin == "builtin" else f"  [{registration.origin}]"
        options = registration.option_types()
        shown = "; ".join(f"{key}=<{describe_option(p.annotation)}>" for key, p in options.items())
        shown = f" (options: {shown})" if shown else ""
        click.echo(f"{name:<{width}}  {registration.description}{shown}{origin}")
    for problem in registry.plugin_errors():
        click.echo(f"warning: plugin not loaded: {problem}", err=True)


@click.command()
@click.option("--store", "store_dir", type=click.Path(path_type=Path, file_okay=False),
              help="A run directory whose journal to undo (a campaign directory: every run in it; "
                   "a store: its latest campaign).")
@click.option("--inventory", "inventory_file", type=click.Path(path_type=Path, dir_okay=False),
              help="Inventory file of the nodes (default: the one the run's run.json names).")
def heal(store_dir: Path | None, inventory_file: Path | None) -> None:
    """Undo whatever a crashed run left on the nodes.

    With --store: every action in the run's journal.jsonl that was not undone
    is undone and verified (partitions and loss removed, paused processes
    resumed, killed processes started again). On every node of the inventory
    our iptables chain is removed and any stopped process under the node's
    workdir is resumed. Safe to repeat: a healed cluster stays as it is.
    """
    if store_dir is None and inventory_file is None:
        raise UserError("give --store RUN_DIR (heals that run) or --inventory FILE (heals those nodes)")
    runs = _run_dirs(store_dir) if store_dir is not None else []
    inventory = _inventory(inventory_file, runs)
    problems: list[str] = []
    with Pool(inventory) as pool:
        for run in runs:
            journal_path = run / JOURNAL
            if not journal_path.exists():
                click.echo(f"{run}: no {JOURNAL}: nothing was applied")
                continue
            try:
                journal = nuclei.Journal(journal_path)
                _stop_sut_on_crash_fs(pool, inventory, run, journal, problems)
                report = nuclei.heal(pool, journal, unmount=True)
            except JournalError as error:
                raise UserError(str(error)) from None
            _show(report, problems)
        _sweep(pool, inventory, problems)
    if problems:
        raise click.ClickException(f"heal incomplete ({len(problems)} problem(s)); first: {problems[0]}")
    click.echo(f"healed: {len(inventory.nodes)} nodes clean")


def _stop_sut_on_crash_fs(pool: Pool, inventory: Inventory, run: Path, journal: nuclei.Journal,
                          problems: list[str]) -> None:
    """A crash file system is about to be unmounted (or clock files removed): the run's SUT,
    which keeps its data on it (or follows those files), is stopped first (the heal restarts
    no killed process on a crash file system either)."""
    from harness.stale import stop_run_sut
    from sut.deploy import DeployError

    if not any(entry.action in AFTER_STOP_ACTIONS for entry in journal.pending()):
        return
    record_file = run / "run.json"
    if not record_file.is_file():
        click.echo(f"{run}: no run.json: no SUT known to stop before the unmount")
        return
    try:  # plain JSON, not records.RunJson: healing must work on a run of any version
        record = json.loads(record_file.read_text())
        stop_run_sut(pool, inventory, run, record if isinstance(record, dict) else {})
    except (OSError, ValueError, DeployError, InventoryError) as error:
        click.echo(f"error: {run}: could not stop its SUT before the unmount: {error}", err=True)
        problems.append(str(error))
        return
    click.echo(f"{run}: stopped its SUT (it ran on the crash file system or the clock files)")


def _show(report: HealReport, problems: list[str]) -> None:
    for line in report.done:
        click.echo(line)
    for line in report.errors:
        click.echo(f"error: {line}", err=True)
    problems.extend(report.errors)


def _sweep(pool: Pool, inventory: Inventory, problems: list[str]) -> None:
    """What a journal cannot know about: our chain and stopped processes on every node."""
    def sweep(node_name: str) -> list[str]:
        node = pool.node(node_name)
        clear(pool, node_name, unhook=True)
        resumed = resume_stopped_under(pool, node_name, node.workdir)
        unmounted = nuclei.lazyfs.sweep(pool, node_name, node.workdir)
        return [f"{node_name}: resumed stopped process {line}" for line in resumed] + unmounted

    for node in inventory.nodes:
        try:
            for line in sweep(node.name):
                click.echo(line)
        except (nuclei.NucleusError, InventoryError) as error:
            click.echo(f"error: {error}", err=True)
            problems.append(str(error))


def _run_dirs(path: Path) -> list[Path]:
    """A run directory, or every run of a campaign directory (a store: its latest campaign)."""
    if not path.is_dir():
        raise UserError(f"--store {path}: no such directory")
    if (path / "latest").is_symlink():
        path = (path / "latest").resolve()
    if (path / "run.json").is_file() or (path / JOURNAL).is_file():
        return [path]
    runs = sorted(p for p in (path / "runs").glob("*") if p.is_dir()) if (path / "runs").is_dir() else []
    if not runs:
        raise UserError(f"--store {path}: not a run directory (no run.json or {JOURNAL}) "
                        f"and no runs/ under it")
    return runs


def _inventory(inventory_file: Path | None, runs: list[Path]) -> Inventory:
    try:
        if inventory_file is not None:
            return load(inventory_file)
        for run in runs:
            found = _inventory_of_run(run)
            if found is not None:
                return found
    except InventoryError as error:
        raise UserError(str(error)) from None
    raise UserError(f"{runs[0] / 'run.json'} does not name the inventory the run used; "
                    f"pass --inventory FILE")


def _inventory_of_run(run: Path) -> Inventory | None:
    """The inventory run.json points at: a file path, or an inventory written inline."""
    try:
        data = json.loads((run / "run.json").read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise UserError(f"{run / 'run.json'}: cannot read: {error}") from None
    for value in _values_named(data, _INVENTORY_KEYS):
        if isinstance(value, dict):
            path = value.get("source") or value.get("path") or value.get("file")
            if path and Path(path).is_file():
                return load(path)
            try:
                return Inventory.model_validate({k: v for k, v in value.items() if k != "source"})
            except ValueError:
                continue
        if isinstance(value, str) and Path(value).is_file():
            return load(value)
    return None


def _values_named(data: object, keys: tuple[str, ...]) -> list[object]:
    """Values of the given keys anywhere in nested JSON, shallowest first."""
    found: list[object] = []
    level = [data]
    while level:
        deeper: list[object] = []
        for item in level:
            if isinstance(item, dict):
                found += [item[k] for k in keys if k in item and item[k]]
                deeper += list(item.values())
            elif isinstance(item, list):
                deeper += item
        level = deeper
    return found
