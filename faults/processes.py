"""Process nemeses: kill (and start again) or suspend (and resume) the target processes.

One class per action, one registered name per target selector: `random-kill`,
`minor-kill`, `major-kill`, `fixed-kill`, `leader-kill` and the same five for
`-suspend`. Which processes: those of the target roles on the chosen nodes;
for `leader-*` only the leader's own process (the broker master or the Raft
leader of the controllers).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import nuclei
from faults import targets as selection
from faults.apply import Record, apply_all, undo_all
from faults.context import Applied, FaultContext
from faults.options import KillSignal, NodeNames
from faults.registry import register


class ProcessFault(ABC):
    """Shared target choice and bookkeeping; subclasses say what to do to one process."""

    action = ""

    def __init__(self, selector: str = "random", targets: NodeNames = ()) -> None:
        if selector not in selection.SELECTORS:
            raise ValueError(f"unknown selector {selector!r}")
        if selector == "fixed" and not targets:
            raise ValueError("needs the nodes to hit: targets=n1,n2")
        self.selector = selector
        self.fixed = list(targets)
        self.name = f"{selector}-{self.action}"
        self.min_nodes = selection.min_nodes(selector)

    def start(self, ctx: FaultContext) -> Applied:
        role = ctx.leader_role() if self.selector == "leader" else None
        leader = ctx.find_leader() if self.selector == "leader" else None
        chosen = selection.choose(self.selector, ctx.candidates(), ctx.rng, self.fixed, leader)
        work = {node: ctx.target_processes(node, role) for node in chosen}
        skipped: list[str] = []

        def job(node: str):
            def run(record: Record) -> None:
                for proc in work[node]:
                    try:
                        for entry in self.apply(ctx, proc):
                            record(entry, proc)
                    except nuclei.ProcessNotRunning:
                        skipped.append(f"{node}/{proc.name}")
            return run

        actions = apply_all(ctx, f"{self.name} on {', '.join(chosen) or 'no node'}",
                            {node: job(node) for node in chosen})
        details: dict[str, Any] = {"processes": sorted(f"{a.entry.node}/{a.entry.params.get('name')}" for a in actions)}
        if skipped:
            details["not_running"] = sorted(skipped)
        if self.selector == "leader" and leader is None:
            details["note"] = "no leader found"
        return Applied(targets=chosen, actions=actions, details=details)

    def stop(self, ctx: FaultContext, handle: Applied) -> None:
        undo_all(ctx, handle.actions)

    @abstractmethod
    def apply(self, ctx: FaultContext, proc: Any) -> list[Any]:
        """Act on one process through a nucleus; returns the journal entries made."""


class KillFault(ProcessFault):
    """Kill processes with a signal (9 unless `signal` says otherwise); stop starts them again."""

    action = "kill"

    def __init__(self, selector: str = "random", targets: NodeNames = (), signal: KillSignal = "KILL") -> None:
        super().__init__(selector, targets)
        self.signal = signal

    def apply(self, ctx: FaultContext, proc: Any) -> list[Any]:
        return nuclei.kill(ctx.pool, ctx.journal, proc, signal=self.signal)


class SuspendFault(ProcessFault):
    """Pause processes with SIGSTOP; stop resumes them with SIGCONT."""

    action = "suspend"

    def apply(self, ctx: FaultContext, proc: Any) -> list[Any]:
        return nuclei.pause(ctx.pool, ctx.journal, proc)


_WHO = {
    "random": "one random node",
    "minor": "a random minority of nodes",
    "major": "a random majority of nodes",
    "fixed": "the nodes given as targets=",
    "leader": "the current leader (broker master or Raft leader)",
}

for _selector, _who in _WHO.items():
    # Only fixed-* takes targets=; for the others the name fixes them (no option).
    _fixed = {} if _selector == "fixed" else {"targets": ()}
    register(KillFault, name=f"{_selector}-kill", selector=_selector, origin="builtin", **_fixed,
             description=f"kill -9 the target processes on {_who}; restart them at stop")
    register(SuspendFault, name=f"{_selector}-suspend", selector=_selector, origin="builtin", **_fixed,
             description=f"SIGSTOP the target processes on {_who}; SIGCONT at stop")

__all__ = ["KillFault", "ProcessFault", "SuspendFault"]
