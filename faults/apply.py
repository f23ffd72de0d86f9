"""All-or-nothing application of nuclei on several nodes at once, and its undo."""
from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

import nuclei
from faults.context import FaultContext, FaultError

Record = Callable[[Any, Any], None]  # (journal entry, process or None)


def apply_all(ctx: FaultContext, what: str, jobs: Mapping[str, Callable[[Record], None]]) -> list[tuple[Any, Any]]:
    """Run one job per node in parallel; each job records the actions it applied.

    If any job fails, everything already applied is undone before the error
    is raised, so a fault is either fully on or fully off.
    """
    done: list[tuple[Any, Any]] = []
    lock = threading.Lock()

    def record(entry: Any, proc: Any = None) -> None:
        with lock:
            done.append((entry, proc))

    try:
        nuclei.in_parallel(lambda node: jobs[node](record), list(jobs))
    except Exception as error:
        try:
            undo_all(ctx, done)
        except Exception:  # noqa: BLE001 - the apply error matters; the final heal retries
            pass
        raise FaultError(f"{what} failed and was rolled back: {error}") from error
    return done


def undo_all(ctx: FaultContext, actions: list[tuple[Any, Any]]) -> None:
    """Undo actions node by node in parallel, newest first; raises the first error after all ran."""
    by_node: dict[str, list[tuple[Any, Any]]] = defaultdict(list)
    for entry, proc in actions:
        by_node[entry.node].append((entry, proc))

    def undo_node(node: str) -> None:
        for entry, proc in reversed(by_node[node]):
            nuclei.undo(ctx.pool, ctx.journal, entry, start=ctx.start_process, proc=proc)

    nuclei.in_parallel(undo_node, list(by_node))
