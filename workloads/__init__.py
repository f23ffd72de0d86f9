"""Client workloads: operation generators plus clients that record raw history.

`WORKLOADS` maps a workload name to its class (see workloads.base for the
protocol, docs/workloads.md for how to add one).
"""
from workloads.base import Completion, Workload, WorkloadOptions
from workloads.log import LogWorkload
from workloads.queue import QueueWorkload
from workloads.register import RegisterWorkload

WORKLOADS: dict[str, type[Workload]] = {
    cls.name: cls for cls in (QueueWorkload, LogWorkload, RegisterWorkload)
}


def get(name: str) -> type[Workload]:
    """The workload class called `name`; KeyError names the known ones."""
    try:
        return WORKLOADS[name]
    except KeyError:
        raise KeyError(f"unknown workload {name!r}; known: {', '.join(sorted(WORKLOADS))}") from None


__all__ = ["Completion", "WORKLOADS", "Workload", "WorkloadOptions", "get"]
