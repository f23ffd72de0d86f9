"""What a nemesis sees of the run (FaultContext) and what its start returns (Applied)."""
from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from inventory.model import Node
from nuclei import Journal, JournalEntry, ProcessRef


class FaultError(Exception):
    """A fault cannot be used or applied; one line saying which fault and why."""


def _no_processes(node: str) -> list[ProcessRef]:
    return []


def _no_leader(role: str) -> str | None:
    return None


def _discard(event: dict[str, Any]) -> None:
    return None


@dataclass
class FaultContext:
    """The run as nemeses see it (docs/contracts.md, "faults / nuclei").

    `processes`, `start_process` and `leader` come from the SUT's deployer;
    `target_roles` (None = every role) limits which processes and nodes a
    fault may hit; `emit` appends one event to nemesis.jsonl; `states` feeds
    state-triggered faults the cluster's state as it is sampled.
    """

    pool: Any
    nodes: list[Node]
    rng: random.Random
    journal: Journal
    processes: Callable[[str], Sequence[ProcessRef]] = _no_processes
    start_process: Callable[[ProcessRef], Any] | None = None
    leader: Callable[[str], str | None] = _no_leader
    target_roles: frozenset[str] | None = None
    emit: Callable[[dict[str, Any]], None] = _discard
    run_start_ns: int = field(default_factory=time.monotonic_ns)
    # The cluster-state samples (faults.triggers.StateFeed) state-triggered faults wait on.
    states: Any = None

    @property
    def names(self) -> list[str]:
        return [node.name for node in self.nodes]

    def address(self, name: str) -> str:
        """The address other nodes reach `name` at (what partitions block)."""
        for node in self.nodes:
            if node.name == name:
                return node.host
        raise FaultError(f"no node {name!r} in the cluster (nodes: {', '.join(self.names)})")

    def target_processes(self, node: str, role: str | None = None) -> list[ProcessRef]:
        """Processes on `node` a fault may hit: of `role` if given, else of the target roles."""
        wanted = {role} if role else self.target_roles
        return [p for p in self.processes(node) if wanted is None or getattr(p, "role", "") in wanted]

    def candidates(self) -> list[str]:
        """Nodes a fault may target: all, or those running a process of a target role."""
        if self.target_roles is None:
            return self.names
        return [name for name in self.names if self.target_processes(name)]

    def leader_role(self) -> str:
        """Whose leader "leader" means: the controllers' if only they are targeted, else the brokers'."""
        return "controller" if self.target_roles == frozenset({"controller"}) else "broker"

    def find_leader(self, timeout: float = 10.0) -> str | None:
        """The current leader, asking again for a while if there is none (an election)."""
        deadline = time.monotonic() + timeout
        while True:
            leader = self.leader(self.leader_role())
            if leader is not None or time.monotonic() >= deadline:
                return leader
            time.sleep(0.5)

    def now_ns(self) -> int:
        """History time: nanoseconds since the run started, monotonic clock."""
        return time.monotonic_ns() - self.run_start_ns

    def with_rng(self, seed: int) -> FaultContext:
        """The same context with its own RNG (one per fault start, from the schedule)."""
        return replace(self, rng=random.Random(seed))


class AppliedAction(NamedTuple):
    """One nucleus a nemesis applied: its journal entry, and the process it hit (to restart it
    on undo) or None for a network action."""

    entry: JournalEntry
    process: ProcessRef | None = None


@dataclass
class Applied:
    """What a started fault did: the exact targets and grudge, and how to undo it.

    Built-in nemeses return one from `start`; a plugin may return anything, and
    the runner records its `targets` and `grudge` attributes if it has them.
    """

    targets: list[str]
    grudge: dict[str, list[str]] | None = None
    actions: list[AppliedAction] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
