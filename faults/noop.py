"""noop: a fault that does nothing, for baseline runs with the same schedule."""
from __future__ import annotations

from faults.context import Applied, FaultContext
from faults.registry import register


@register(origin="builtin")
class Noop:
    """Injects nothing; the schedule still records its windows."""

    name = "noop"
    description = "inject nothing (baseline run with the same schedule)"
    min_nodes = 1

    def start(self, ctx: FaultContext) -> Applied:
        return Applied(targets=[])

    def stop(self, ctx: FaultContext, handle: Applied) -> None:
        return None
