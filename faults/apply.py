"""All-or-nothing application of nuclei on several nodes at once, and its undo."""
from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Mapping
import nuclei
from faults.context import AppliedAction, FaultContext, FaultError
from nuclei import JournalEntry, ProcessRef
from nuclei.heal import undo

Record = Callable[[JournalEntry, ProcessRef | None], None]


def apply_all(ctx: FaultContext, what: str, jobs: Mapping[str, Callable[[Record], None]]) -> list[AppliedAction]:
    """Run one job per node in parallel; each job records the actions it applied.

    If any job fails, everything already applied is undone before the error
    is raised, so a fault is either fully on or fully off.
    """
    done: list[AppliedAction] = []
    lock = threading.Lock()

    def record(entry: JournalEntry, proc: ProcessRef | None = None) -> None:
        with lock:
            done.append(AppliedAction(entry, proc))

    try:
        nuclei.in_parallel(lambda node: jobs[node](record), list(jobs))
    except Exception as error:
        try:
            undo_all(ctx, done)
        except Exception:  # noqa: BLE001 - the apply error matters; the final heal retries
            pass
        raise FaultError(f"{what} failed and was rolled back: {error}") from error
    return done


def undo_all(ctx: FaultContext, actions: list[AppliedAction]) -> None:
    """Undo actions node by node in parallel, newest first; raises the first error after all ran."""
    by_node: dict[str, list[AppliedAction]] = defaultdict(list)
    for entry, process in actions:  # a plugin's plain (entry, process) pairs too
        by_node[entry.node].append(AppliedAction(entry, process))

    def undo_node(node: str) -> None:
        for action in reversed(by_node[node]):
            undo(ctx.pool, ctx.journal, action.entry, start=ctx.start_process, proc=action.process)

    nuclei.in_parallel(undo_node, list(by_node))
