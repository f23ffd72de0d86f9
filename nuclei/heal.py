"""Heal: undo every journaled action that is still applied, verified, node by node.

Used at the end of every run (also after errors and Ctrl-C) and by `chaos heal`
for a run that crashed. Idempotent: healing a healed run changes nothing.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from nuclei import clock, degrade, diskfault, lazyfs, net, process, shape
from nuclei.journal import Journal, JournalEntry
from nuclei.remote import NucleusError, in_parallel

NETWORK_ACTIONS = ("drop", "loss", "bandwidth", "degrade")
IPTABLES_ACTIONS = ("drop", "loss")
# A crash file system stays mounted while the SUT runs on it: only the heal at
# the very end (`unmount=True`, after the SUT stopped) and `chaos heal` remove it.
MOUNT_ACTIONS = ("mount",)
# Undone only after the SUT stopped, like a mount: the clock faults' timestamp files, which
# the preloaded SUT processes read as long as they run.
AFTER_STOP_ACTIONS = MOUNT_ACTIONS + (clock.FILES_ACTION,)
NO_RESTART_ON_MOUNT = "its data directory is on the crash file system this heal unmounts"


@dataclass
class HealReport:
    """What a heal did (one line per action) and what it could not do."""

    done: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def undo(pool: Any, journal: Journal, entry: JournalEntry,
         start: Callable[[Any], Any] | None = None, proc: Any = None, skip_restart: str = "") -> str:
    """Undo one journaled action and verify it; returns a line saying what was done.

    With `skip_restart` (why), a kill is marked undone without starting the process again."""
    name = entry.params.get("name", "")
    if entry.action == "bandwidth":
        shape.remove(pool, journal, entry)
        return f"{entry.node}: removed the {entry.params.get('rate')} bandwidth limit to {', '.join(entry.params.get('peers', []))}"
    if entry.action == "degrade":
        degrade.remove(pool, journal, entry)
        return f"{entry.node}: removed the {entry.params.get('kind')} degradation ({entry.params.get('mechanism')})"
    if entry.action in IPTABLES_ACTIONS:
        net.remove(pool, journal, entry)
        return f"{entry.node}: removed {entry.action} rules for {', '.join(entry.params.get('peers', []))}"
    if entry.action == "pause":
        process.resume(pool, journal, entry)
        return f"{entry.node}: resumed {name} (pid {entry.params.get('pid')})"
    if entry.action == "kill" and skip_restart:
        journal.mark_undone(entry, restarted=False, reason=skip_restart)
        return f"{entry.node}: {name} not restarted: {skip_restart}"
    if entry.action == "kill":
        state = process.restart(pool, journal, entry, start=start, proc=proc)
        if state is None:
            return f"{entry.node}: {name} was killed and cannot be restarted here (no start command known)"
        return f"{entry.node}: {name} running again (pid {state.pid})"
    if entry.action == diskfault.ACTION:
        counts = diskfault.undo(pool, journal, entry)
        return f"{entry.node}: cleared the disk faults at {entry.params.get('mountpoint')} (hits {counts or 'none'})"
    if entry.action == clock.ACTION:
        reset = clock.undo(pool, journal, entry)
        return f"{entry.node}: the clocks of {len(reset)} process(es) back to true time ({entry.params.get('kind')})"
    if entry.action == clock.FILES_ACTION:
        clock.remove(pool, journal, entry)
        return f"{entry.node}: removed the clock faults' timestamp files in {entry.params.get('directory')}"
    if entry.action == "mount":
        lazyfs.unmount(pool, journal, entry)
        return f"{entry.node}: unmounted the crash file system at {entry.params.get('mountpoint')}"
    raise NucleusError(f"journal entry {entry.id}: unknown action {entry.action!r}")


def heal(pool: Any, journal: Journal, nodes: Iterable[str] = (),
         start: Callable[[Any], Any] | None = None, unmount: bool = False) -> HealReport:
    """Undo everything still applied, then remove our chain on every node that had
    network actions (plus `nodes`). Nodes are healed in parallel; a failure on
    one node does not stop the others and leaves its entries pending for a retry.
    Crash file systems are unmounted, and clock files removed, only with `unmount` (last,
    after processes)."""
    report = HealReport()
    by_node: dict[str, list[JournalEntry]] = defaultdict(list)
    for entry in journal.pending():
        if unmount or entry.action not in AFTER_STOP_ACTIONS:
            by_node[entry.node].append(entry)
    chain_nodes = {entry.node for entry in journal.entries() if entry.action in IPTABLES_ACTIONS}
    chain_nodes.update(nodes)

    def heal_node(node: str) -> None:
        # Network first so the node can talk again, then processes newest first.
        entries = by_node.get(node, [])
        ordered = [e for e in entries if e.action in NETWORK_ACTIONS]
        ordered += [e for e in reversed(entries) if e.action not in NETWORK_ACTIONS + AFTER_STOP_ACTIONS]
        ordered += [e for e in entries if e.action in AFTER_STOP_ACTIONS]
        # A process restarted on a crash file system this heal removes would lose its data
        # under it: on such a node the killed processes stay down.
        doomed = NO_RESTART_ON_MOUNT if any(e.action in MOUNT_ACTIONS for e in entries) else ""
        for entry in ordered:
            try:
                report.done.append(undo(pool, journal, entry, start=start, skip_restart=doomed))
            except Exception as error:  # noqa: BLE001 - collect, heal the rest, report all
                report.errors.append(f"{node}: could not undo {entry.action} ({entry.id}): {error}")
        if node in chain_nodes:
            try:
                net.clear(pool, node, unhook=True)
            except Exception as error:  # noqa: BLE001
                report.errors.append(str(error))

    in_parallel(heal_node, sorted(set(by_node) | chain_nodes))
    return report
