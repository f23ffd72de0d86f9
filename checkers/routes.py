"""Which checks each workload gets: the one table routing workloads to checkers and models.

The workload is the one run.json names, else the one its operations suggest
(`infer_workload`). A workload missing from the table gets only the checkers
that apply to every run (stats, rto, perf), and its linearizable section says
that no model is known. A third-party checker decides for itself which runs
it applies to (checkers.registry); it may read this table to do so.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

# How the `queue` section of a run is filled (checkers/anomalies.py): by
# following message ids (checkers/queue.py, which also fills `order`) or
# values at log offsets (checkers/logs.py).
MESSAGE_ANOMALIES = "messages"
LOG_ANOMALIES = "log"


@dataclass(frozen=True)
class Route:
    """How the checkers treat one workload."""

    functions: frozenset[str]  # operations that identify it when run.json does not name it
    anomalies: str | None = None  # MESSAGE_ANOMALIES, LOG_ANOMALIES or None: no queue section
    model: str | None = None  # the knossos model of the linearizable checker; None: not checked


# In the order infer_workload tries them.
WORKLOADS: dict[str, Route] = {
    "queue": Route(frozenset({"send", "poll", "enqueue", "dequeue"}), anomalies=MESSAGE_ANOMALIES),
    "log": Route(frozenset({"append"}), anomalies=LOG_ANOMALIES, model="log"),
    "register": Route(frozenset({"write", "cas"}), model="cas-register"),
}

# Workload -> linearizability model (None: the workload has no linearizability check).
LINEARIZABILITY_MODELS: dict[str, str | None] = {name: route.model for name, route in WORKLOADS.items()}


def route(workload: str | None) -> Route | None:
    """The route of `workload`; None for a workload the table does not know."""
    return WORKLOADS.get(workload or "")


def linearizability_model(workload: str) -> str | None:
    """The knossos model for `workload`; KeyError for a workload we do not know."""
    return WORKLOADS[workload].model


def infer_workload(functions: Iterable[str]) -> str | None:
    """Guess the workload from the operation names in a history (no run.json)."""
    seen = set(functions)
    for workload, known in WORKLOADS.items():
        if seen & known.functions:
            return workload
    return None
