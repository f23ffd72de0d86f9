"""What a killed harness leaves behind, found and cleaned up by the next `chaos run` / `chaos up`.

SIGKILL (an OOM kill, `kill -9`, a CI job timeout) gives the harness no chance
to heal. Two things make the leftovers findable:

- a local cluster a run brought up is non-persistent and records its owner's
  pid and start time, so the netns stale sweep removes it (with every process,
  namespace and iptables rule in it) once that owner is gone;
- every run holds a lease, $CHAOS_HOME/runs/<id>.json, naming its run
  directory and its owner. A lease whose owner is gone belongs to a killed
  run: its journal is healed on the nodes, its SUT stopped, and its run.json
  says what happened. If that fails, the user gets the one command to run.
"""
from __future__ import annotations

import json
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nuclei
from harness.store import StoreError, read_json, write_json, write_text
from inventory import InventoryError, Pool, load, local, netns
from nuclei.journal import JournalError


def leases_dir() -> Path:
    return local.chaos_home() / "runs"


def take_lease(run_dir: Path) -> Path | None:
    """Record that this process owns the run at `run_dir`; None if $CHAOS_HOME is not writable
    (the run then goes on, without the safety net)."""
    pid = os.getpid()
    path = leases_dir() / f"{pid}-{secrets.token_hex(4)}.json"
    lease = {"pid": pid, "start": local.process_start_time(pid), "run_dir": str(Path(run_dir).resolve())}
    try:
        write_text(path, json.dumps(lease) + "\n")
    except OSError:
        return None
    return path


def release_lease(path: Path | None) -> None:
    if path is not None:
        path.unlink(missing_ok=True)


def clean_up_stale(say: Callable[[str], None]) -> list[str]:
    """Remove clusters and heal runs of harness processes that are gone; one line per item
    (each also passed to `say`).

    A dead lease naming a run directory that a live lease also names (a campaign's
    `--resume` reuses `runs/<id>`) is dropped without touching that run: the live
    harness owns it now. A lease this user may not remove (another user's) is left to
    its owner, with a line saying so."""
    done: list[str] = []
    if os.geteuid() == 0:
        done += netns.down_stale(orphans=False)
    leases = _read_leases()
    live = {str(lease.get("run_dir")): lease.get("pid") for path, lease in leases if _alive(lease)}
    for path, lease in leases:
        if _alive(lease):
            continue
        owner = live.get(str(lease.get("run_dir")))
        claimed = _claim(path, lease)
        if isinstance(claimed, str):
            done.append(claimed)
        elif claimed and owner is not None:
            done.append(f"run {lease.get('run_dir')}: the lease of its killed harness (pid {lease.get('pid')}) "
                        f"dropped; the run is live again (pid {owner}) and left alone")
        elif claimed:
            done.append(_clean_up_run(lease))
    for line in done:
        say(line)
    return done


def clean_up_first(console: Any) -> list[str]:
    """clean_up_stale, each line shown on `console` as `clean-up first: ...`."""
    return clean_up_stale(lambda line: console.print(f"clean-up first: {line}", highlight=False, soft_wrap=True))


def _read_leases() -> list[tuple[Path, dict[str, Any]]]:
    """Every readable lease, oldest name first; unreadable ones (another user's, half written) skipped."""
    try:
        paths = sorted(leases_dir().glob("*.json")) if leases_dir().is_dir() else []
    except OSError:
        return []
    leases = []
    for path in paths:
        try:
            lease = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(lease, dict):
            leases.append((path, lease))
    return leases


def _alive(lease: dict[str, Any]) -> bool:
    start, pid = lease.get("start"), lease.get("pid")
    return isinstance(start, int) and isinstance(pid, int) and local.process_alive(pid, start)


def _claim(path: Path, lease: dict[str, Any]) -> bool | str:
    """Remove a dead lease: True if this process won the race to handle it, False if another
    did, or the line saying why it cannot be removed."""
    try:
        path.unlink()  # two harnesses may find it: only the one whose unlink succeeds handles it
    except FileNotFoundError:
        return False
    except OSError as error:
        return (f"run {lease.get('run_dir')}: its harness (pid {lease.get('pid')}) is gone but its lease "
                f"{path} cannot be removed ({error.strerror or error}): run chaos as its owner to clean up")
    return True


def _clean_up_run(lease: dict[str, Any]) -> str:
    run_dir = Path(str(lease.get("run_dir")))
    try:  # plain JSON, not records.RunJson: clean-up must work on a run of any version
        record = read_json(run_dir / "run.json")
    except StoreError:
        return f"run {run_dir}: its harness (pid {lease.get('pid')}) is gone and left no run.json"
    except OSError as error:
        return (f"run {run_dir}: its harness (pid {lease.get('pid')}) is gone; its run.json cannot be read "
                f"({error.strerror or error})")
    cluster = record.get("cluster") or {}
    what = f"run {run_dir}: its harness (pid {lease.get('pid')}) was killed"
    if record.get("status") not in ("running", "checking"):
        return f"{what} after the run had ended ({record.get('status')}): nothing to clean up"
    if cluster.get("source") == "provisioned":
        outcome = f"{what}; its cluster {cluster.get('name')} was removed"
    else:
        problem = _heal_and_stop(run_dir, record, cluster)
        outcome = (f"{what}; faults healed and the SUT stopped" if problem is None else
                   f"{what}; clean-up failed ({problem}): run `chaos heal --store {run_dir}`")
    record["status"] = "error"
    record["error"] = (f"the harness was killed (pid {lease.get('pid')}) before it could clean up; "
                       "the next chaos run cleaned up")
    try:
        write_json(run_dir / "run.json", record)
    except OSError as error:
        outcome += f"; its run.json could not be updated ({error.strerror or error})"
    return outcome


def stop_run_sut(pool: Pool, inventory: Any, run_dir: Path, record: dict[str, Any]) -> None:
    """Stop the SUT processes of the run whose run.json is `record` (sut.deploy.DeployError)."""
    from sut.deploy import make_deployer
    spec = record.get("spec") or {}
    make_deployer(pool, inventory, spec.get("profile") or record.get("profile"), run_dir,
                  timing=spec.get("timing", "default")).stop()


def _heal_and_stop(run_dir: Path, record: dict[str, Any], cluster: dict[str, Any]) -> str | None:
    """Undo the run's journal on its nodes and stop its SUT; the problem, or None."""
    from sut.deploy import DeployError

    inventory_file = cluster.get("file")
    if not inventory_file or not Path(inventory_file).is_file():
        return "its inventory file is gone" if inventory_file else None
    try:
        inventory = load(inventory_file)
        with Pool(inventory) as pool:
            journal_file = run_dir / "journal.jsonl"
            if journal_file.exists():
                report = nuclei.heal(pool, nuclei.Journal(journal_file))
                if not report.ok:
                    return "; ".join(report.errors)
            stop_run_sut(pool, inventory, run_dir, record)
            # Only now, with no SUT process on it, the crash file system goes (journaled or not).
            if journal_file.exists():
                report = nuclei.heal(pool, nuclei.Journal(journal_file), unmount=True)
                if not report.ok:
                    return "; ".join(report.errors)
            for node in inventory.nodes:
                nuclei.lazyfs.sweep(pool, node.name, node.workdir)
    except (InventoryError, DeployError, nuclei.NucleusError, JournalError, OSError) as error:
        return f"{type(error).__name__}: {error}"
    return None
