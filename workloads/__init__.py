"""Client workloads: operation generators plus clients that record raw history.

`known()` maps a workload name to its class and `get(name)` finds one
(workloads/registry.py: the built-ins, decorated classes and `chaos.workloads`
plugins); see workloads.base for the protocol, docs/workloads.md for how to add one.
"""
from workloads.base import Completion, Workload, WorkloadOptions
from workloads.registry import Route, get, known, register

__all__ = ["Completion", "Route", "Workload", "WorkloadOptions", "get", "known", "register"]
