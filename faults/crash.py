"""Machine-crash nemeses: kill -9 everything on the target nodes and drop what
their file system had not fsynced; start the processes again at stop. With
`torn=true` each file with unsynced writes first keeps a seeded prefix of its
last unsynced range (a torn write at the power loss).

What "not fsynced" means is the run's page-cache model, one per run because the
crash file system is mounted once, before the faults: strict by default (only an
fsync makes data durable, as LazyFS), or with `dirty_expire=S` what a Linux kernel
does, writing back on its own every file dirty for S seconds (nuclei/lazyfs_node.py).
All crash faults of a run must agree on it (`run_dirty_expire`). With
`reset_disk=true` the crash is a power cycle that also ends a transient device
fault: the node's injected disk faults are cleared once the data is dropped.

`random-crash`, `minor-crash`, `major-crash`, `fixed-crash`, `leader-crash`.
A machine has no roles: every SUT process on a chosen node dies (the target
roles only narrow which nodes may be chosen). The loss needs the crash file
system (nuclei.lazyfs) mounted under the node's data directory; the run
mounts it when a crash fault is asked for (`needs_crash_fs`).
"""
from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterable
from typing import Any

import nuclei
from faults import targets as selection
from faults.apply import Record, apply_all
from faults.context import Applied, FaultContext, FaultError
from faults.options import DirtyExpire, NodeNames
from faults.processes import _WHO, ProcessFault
from faults.registry import lookup, register
from faults.schedule import FaultSpec
from nuclei import diskfault, lazyfs


class CrashFault(ProcessFault):
    """kill -9 every SUT process on the nodes, then lose their unsynced writes."""

    action = "crash"
    needs_crash_fs = True

    def __init__(self, selector: str = "random", targets: NodeNames = (), torn: bool = False,
                 dirty_expire: DirtyExpire | None = None, reset_disk: bool = False) -> None:
        super().__init__(selector, targets)
        self.torn = torn
        # Read by the run when it mounts the crash file system (run_dirty_expire), not here.
        self.dirty_expire = dirty_expire
        self.reset_disk = reset_disk

    def start(self, ctx: FaultContext) -> Applied:
        leader = ctx.find_leader() if self.selector == "leader" else None
        chosen = selection.choose(self.selector, ctx.candidates(), ctx.rng, self.fixed, leader)
        mounts = {node: _mount_of(ctx, node) for node in chosen}
        lost: dict[str, dict[str, Any]] = {}
        disk_reset: dict[str, dict[str, Any]] = {}
        # Drawn here, in node order, so the jobs (run in parallel) keep the run's seed replayable.
        torn_seeds = {node: ctx.rng.getrandbits(32) for node in chosen} if self.torn else {}

        def job(node: str):
            def run(record: Record) -> None:
                params = mounts[node].params
                procs = ctx.processes(node)  # the whole machine, whatever the role
                frozen, tries, unsynced = freeze_with_unsynced_writes(ctx, node, procs, params)
                for proc in procs:
                    try:
                        for entry in nuclei.kill(ctx.pool, ctx.journal, proc, signal=9):
                            record(entry, proc)
                    except nuclei.ProcessNotRunning:
                        pass
                thaw(ctx, frozen)  # killed while stopped: the pause entries are settled
                lost[node] = lazyfs.lose_unsynced(ctx.pool, node, params["workdir"], params["mountpoint"],
                                                  torn_seeds.get(node))
                lost[node].update(instant_tries=tries, unsynced_bytes_at_instant=unsynced)
                if self.reset_disk:  # the power cycle ends a transient device fault
                    disk_reset[node] = diskfault.reset(ctx.pool, node, params["workdir"], params["mountpoint"])
            return run

        actions = apply_all(ctx, f"{self.name} on {', '.join(chosen) or 'no node'}",
                            {node: job(node) for node in chosen})
        details: dict[str, Any] = {"processes": sorted(f"{a.entry.node}/{a.entry.params.get('name')}" for a in actions),
                                   "lost": lost, "dirty_expire_s": _page_cache(mounts)}
        if self.reset_disk:
            details["disk_reset"] = disk_reset
        if self.selector == "leader" and leader is None:
            details["note"] = "no leader found"
        return Applied(targets=chosen, actions=actions, details=details)

    def apply(self, ctx: FaultContext, proc: Any) -> list[Any]:
        """Unused: a crash acts on the whole node at once (start)."""
        return []


# The crash instant: every SUT process of the node is frozen (SIGSTOP) at once, and
# the crash happens at that instant if the node holds writes it has not fsynced;
# otherwise the processes go on and the next try comes a moment later. An
# ASYNC_FLUSH broker flushes every few tens of milliseconds at `timing: fast`, so a
# crash at a random instant often finds its acknowledged tail already on disk and
# proves nothing; frozen first, the instant is one a real crash could hit.
INSTANT_TRIES = 8
INSTANT_PAUSE_S = (0.005, 0.05)


def freeze_with_unsynced_writes(ctx: FaultContext, node: str, procs: list[Any],
                                params: dict[str, Any]) -> tuple[list[Any], int, int]:
    """Freeze the node's processes at an instant with unsynced writes (or after the last
    try): (the pause journal entries, tries, unsynced bytes at the instant)."""
    unsynced = 0
    for tries in range(1, INSTANT_TRIES + 1):
        frozen = []
        for proc in procs:
            try:
                frozen += nuclei.pause(ctx.pool, ctx.journal, proc)
            except nuclei.ProcessNotRunning:
                pass
        # Written back first: a JVM's mapped commitlog pages reach the file system only then.
        unsynced = unsynced_log_bytes(lazyfs.status(ctx.pool, node, params["workdir"], params["mountpoint"],
                                                    writeback=True))
        if unsynced or tries == INSTANT_TRIES or not frozen:
            return frozen, tries, unsynced
        thaw(ctx, frozen)
        time.sleep(ctx.rng.uniform(*INSTANT_PAUSE_S))
    return [], INSTANT_TRIES, unsynced


# Where the SUT keeps what it acknowledges: the commitlog (the model's and RocketMQ's
# `store/commitlog/`), the model's Raft log (`raftstore/`) and DLedger's entry files
# (`<store>/dledger-<self id>/data/`, in a DLedger-mode broker and a DLedger controller).
ACKNOWLEDGED_DATA_DIRS = ("commitlog", "raftstore")
DLEDGER_DIR_PREFIX, DLEDGER_ENTRIES = "dledger-", "data"


def holds_acknowledged_data(directory: str) -> bool:
    """Is `directory` (a path under the mount, or an older node program's bare name) a log
    that holds acknowledged data?"""
    parts = directory.split("/")
    return (any(part in ACKNOWLEDGED_DATA_DIRS for part in parts)
            or any(parent.startswith(DLEDGER_DIR_PREFIX) and name == DLEDGER_ENTRIES
                   for parent, name in zip(parts, parts[1:])))


def unsynced_log_bytes(status: dict[str, Any]) -> int:
    """Unsynced bytes of the logs that hold acknowledged data (queue indexes, offsets and
    checkpoints are rebuilt or re-read; losing them alone takes no message back)."""
    by_dir = status.get("unsynced_by_dir")
    if not isinstance(by_dir, dict):
        return int(status.get("unsynced_bytes") or 0)
    return sum(int(v) for k, v in by_dir.items() if holds_acknowledged_data(str(k)))


def thaw(ctx: FaultContext, frozen: list[Any]) -> None:
    for entry in frozen:
        nuclei.resume(ctx.pool, ctx.journal, entry)


def _mount_of(ctx: FaultContext, node: str) -> Any:
    for entry in reversed(ctx.journal.pending()):
        if entry.action == "mount" and entry.node == node:
            return entry
    raise FaultError(f"node {node}: no crash file system is mounted there (crash faults need the run "
                     f"to mount it before the SUT starts; see docs/nemeses.md)")


def _page_cache(mounts: dict[str, Any]) -> float | dict[str, float | None] | None:
    """The page-cache model the crashed nodes' file systems were mounted with: their
    `dirty_expire` seconds (None: strict), one value, or per node if they differ."""
    found = {node: entry.params.get("dirty_expire_s") for node, entry in mounts.items()}
    values = set(found.values())
    return next(iter(values)) if len(values) == 1 else (found or None)


def run_dirty_expire(faults: Iterable[str | FaultSpec]) -> float | None:
    """The `dirty_expire` the run's crash file system is mounted with: the one every fault
    that takes the option agrees on (None: strict, unset on all of them). Faults without
    the option (disk faults, state-triggered crashes) follow whatever the others chose.
    FaultError, naming two faults that disagree, otherwise: the mount is made once per run."""
    chosen: dict[float | None, str] = {}
    for fault in faults:
        spec = fault if isinstance(fault, FaultSpec) else FaultSpec.parse(fault)
        registration = lookup(spec.name)
        if "dirty_expire" not in registration.options():
            continue
        value = registration.checked({k: v for k, v in spec.options.items() if k == "dirty_expire"})
        chosen.setdefault(value.get("dirty_expire"), spec.label())
    if len(chosen) > 1:
        (first, a), (second, b) = list(chosen.items())[:2]
        raise FaultError(f"faults {a} and {b} disagree on dirty_expire ({_shown(first)} and {_shown(second)}): "
                         f"the crash file system has one page-cache model per run; give every crash "
                         f"fault the same dirty_expire, or none")
    return next(iter(chosen), None)


def _shown(dirty_expire: float | None) -> str:
    return "unset: strict" if dirty_expire is None else f"{dirty_expire:g} s"


def needs_crash_fs(fault_names: Iterable[str]) -> bool:
    """Does any of these faults need the crash file system mounted?"""
    return any(getattr(lookup(name).cls, "needs_crash_fs", False) for name in fault_names)


def crash_fs_unavailable() -> str | None:
    """Why this machine cannot mount a crash file system, or None if it can."""
    if os.geteuid() != 0:
        return "crash faults need root (FUSE mounts under the nodes' data directories)"
    if not os.path.exists("/dev/fuse"):
        return "crash faults need /dev/fuse (FUSE is not available on this machine)"
    if shutil.which("fusermount3") is None:
        return "crash faults need fusermount3 (install Debian's fuse3: bash scripts/setup.sh)"
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError) as error:
        return f"crash faults need the mfusepy binding and libfuse3 ({error})"
    return None


for _selector, _who in _WHO.items():
    _fixed = {} if _selector == "fixed" else {"targets": ()}
    register(CrashFault, name=f"{_selector}-crash", selector=_selector, origin="builtin", **_fixed,
             description=f"machine crash of {_who}: kill -9 every SUT process there and drop its "
                         f"unsynced writes (lazyfs); restart them at stop; torn=true keeps a seeded prefix "
                         f"of each file's last unsynced range; dirty_expire=S keeps what stayed dirty S seconds "
                         f"(a kernel's writeback); reset_disk=true clears injected disk faults at the crash")

__all__ = ["CrashFault", "crash_fs_unavailable", "needs_crash_fs", "run_dirty_expire"]
