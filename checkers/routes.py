"""Which checks each workload gets: the routes of workloads/registry.py, seen by the checkers.

The workload is the one run.json names, else the one its operations suggest
(`infer_workload`). A workload missing from the registry gets only the checkers
that apply to every run (stats, rto, perf), and its linearizable section says
that no model is known. A third-party checker decides for itself which runs
it applies to (checkers.registry); it may read these routes to do so.
"""
from __future__ import annotations

from typing import Iterable

from workloads.registry import LOG_ANOMALIES, MESSAGE_ANOMALIES, Route, routes

__all__ = ["LOG_ANOMALIES", "MESSAGE_ANOMALIES", "Route", "infer_workload", "linearizability_model", "route"]


def route(workload: str | None) -> Route | None:
    """The route of `workload`; None for a workload the registry does not know."""
    return routes().get(workload or "")


def linearizability_model(workload: str) -> str | None:
    """The knossos model for `workload`; KeyError for a workload we do not know."""
    return routes()[workload].model


def infer_workload(functions: Iterable[str]) -> str | None:
    """Guess the workload from the operation names in a history (no run.json)."""
    seen = set(functions)
    for workload, known in routes().items():
        if seen & known.functions:
            return workload
    return None
