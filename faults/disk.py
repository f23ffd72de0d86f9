"""Disk nemeses through the crash file system (nuclei.lazyfs) under each node's data:
`*-disk-error` (EIO), `*-disk-full` (ENOSPC, and no free space to statfs),
`*-disk-slow` (a delay before each operation); `random-`, `fixed-` and `leader-` forms.

Like the crash faults they need the file system mounted before the SUT starts
(`needs_crash_fs`); the fault itself is a set of rules in the FUSE daemon
(nuclei.diskfault), cleared at stop. Every SUT process on a chosen node shares its
disk: the target roles only narrow which nodes may be chosen.
"""
from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from faults import targets as selection
from faults.apply import Record, apply_all, undo_all
from faults.context import Applied, FaultContext
from faults.crash import _mount_of
from faults.options import NodeNames, Probability
from faults.registry import register
from nuclei import diskfault
from nuclei.diskfault_node import FILE_KINDS, MAX_DELAY_MS, OPERATIONS


def _one_of(allowed: tuple[str, ...]):
    def check(value: Any) -> tuple[str, ...]:
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)) or not items:
            raise ValueError(f"expected a comma-separated list of {', '.join(allowed)}, got {value!r}")
        bad = [item for item in items if item not in allowed]
        if bad:
            raise ValueError(f"{bad[0]!r} is not one of {', '.join(allowed)}")
        return tuple(dict.fromkeys(items))
    return check


# Which operations a rule hits (read, write, fsync; a write is also a create, mkdir or truncate).
DiskOps = Annotated[tuple[str, ...], BeforeValidator(_one_of(OPERATIONS)),
                    Field(description=f"operations, comma-separated ({','.join(OPERATIONS)})")]
# Which files: the commit log, consume queues, the Raft log (model raftstore, DLedger data),
# metadata (configs, offsets, checkpoints, epochs), or all.
DiskFiles = Annotated[tuple[str, ...], BeforeValidator(_one_of(FILE_KINDS)),
                      Field(description=f"file kinds, comma-separated ({','.join(FILE_KINDS)})")]
DelayMs = Annotated[int, Field(ge=1, le=MAX_DELAY_MS, description=f"milliseconds in [1, {MAX_DELAY_MS}]")]


class DiskFault:
    """Rules in force on the crash file system of the chosen nodes until stop."""

    kind = ""
    needs_crash_fs = True   # mounted under the data before the SUT starts, like a crash's
    crashes_machines = False

    def __init__(self, selector: str = "random", targets: NodeNames = ()) -> None:
        if selector not in selection.SELECTORS:
            raise ValueError(f"unknown selector {selector!r}")
        if selector == "fixed" and not targets:
            raise ValueError("needs the nodes to hit: targets=n1,n2")
        self.selector, self.fixed = selector, list(targets)
        self.name = f"{selector}-disk-{self.kind}"
        self.min_nodes = selection.min_nodes(selector)

    def rules(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def start(self, ctx: FaultContext) -> Applied:
        leader = ctx.find_leader() if self.selector == "leader" else None
        chosen = selection.choose(self.selector, ctx.candidates(), ctx.rng, self.fixed, leader)
        rules = self.rules()

        def job(node: str):
            mount = _mount_of(ctx, node).params

            def run(record: Record) -> None:
                record(diskfault.apply(ctx.pool, ctx.journal, node, mount["workdir"], mount["mountpoint"],
                                       rules), None)
            return run

        actions = apply_all(ctx, f"{self.name} on {', '.join(chosen) or 'no node'}",
                            {node: job(node) for node in chosen})
        details: dict[str, Any] = {"rules": rules}
        if self.selector == "leader" and leader is None:
            details["note"] = "no leader found"
        return Applied(targets=chosen, actions=actions, details=details)

    def stop(self, ctx: FaultContext, handle: Applied) -> None:
        undo_all(ctx, handle.actions)


class DiskErrorFault(DiskFault):
    """EIO on the chosen operations of the chosen files, with a probability."""

    kind = "error"

    def __init__(self, selector: str = "random", targets: NodeNames = (),
                 ops: DiskOps = OPERATIONS, files: DiskFiles = ("commitlog",),
                 probability: Probability = 1.0) -> None:
        super().__init__(selector, targets)
        self.ops, self.files, self.probability = list(ops), list(files), float(probability)

    def rules(self) -> list[dict[str, Any]]:
        return [{"kind": "error", "ops": self.ops, "files": self.files, "probability": self.probability}]


class DiskFullFault(DiskFault):
    """ENOSPC on every write, create, mkdir and truncate; statfs shows no free space."""

    kind = "full"

    def rules(self) -> list[dict[str, Any]]:
        return [{"kind": "full", "ops": ["write"], "files": ["all"], "probability": 1.0}]


class DiskSlowFault(DiskFault):
    """A delay of delay_ms before each chosen operation on the chosen files."""

    kind = "slow"

    def __init__(self, selector: str = "random", targets: NodeNames = (), delay_ms: DelayMs = 50,
                 ops: DiskOps = OPERATIONS, files: DiskFiles = ("all",)) -> None:
        super().__init__(selector, targets)
        self.delay_ms, self.ops, self.files = int(delay_ms), list(ops), list(files)

    def rules(self) -> list[dict[str, Any]]:
        return [{"kind": "slow", "ops": self.ops, "files": self.files, "delay_ms": self.delay_ms}]


_WHO = {"random": "one random node", "fixed": "the nodes given as targets=",
        "leader": "the current leader's node (broker master or Raft leader)"}
_WHAT = {
    DiskErrorFault: "EIO on ops= (read,write,fsync) of files= (commitlog; consumequeue, metadata, raftlog, "
                    "all) with probability= (1)",
    DiskFullFault: "a full disk: ENOSPC on every write, create and truncate, no free space in statfs",
    DiskSlowFault: "delay_ms= (50) before each of ops= (read,write,fsync) on files= (all)",
}

for _selector, _who in _WHO.items():
    _fixed = {} if _selector == "fixed" else {"targets": ()}
    for _cls, _what in _WHAT.items():
        register(_cls, name=f"{_selector}-disk-{_cls.kind}", selector=_selector, origin="builtin", **_fixed,
                 description=f"{_what}; on {_who}, through its crash file system; cleared at stop")

__all__ = ["DiskErrorFault", "DiskFault", "DiskFullFault", "DiskSlowFault"]
