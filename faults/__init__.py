"""Nemeses: named faults built from nuclei, target selection, schedules, plugins.

Public API (docs/contracts.md): `register`, `FaultContext`, `Applied`,
`FaultSpec`, `ScheduleSpec`, `events` / `plan` (pure schedules),
`validate`, `create`, `known`, `run_schedule` / `ScheduleRunner`.
"""
from faults.apply import apply_all, undo_all
from faults.context import Applied, FaultContext, FaultError
from faults.registry import (ENTRY_POINT_GROUP, Nemesis, Registration, create, known, names, plugin_errors,
                             register)
from faults.schedule import FaultSpec, ScheduledEvent, ScheduleError, ScheduleSpec, events, plan
from faults.targets import TargetError, normalize_roles

# Built-in nemeses register themselves on import.
from faults import crash, figure8, loss, noop, partition, processes  # noqa: E402,F401  isort: skip
from faults.runner import ActiveFault, ScheduleRunner, nemesis_event, run_schedule  # noqa: E402
from faults.validate import validate  # noqa: E402
from faults.crash import needs_crash_fs  # noqa: E402

__all__ = [
    "ENTRY_POINT_GROUP", "ActiveFault", "Applied", "FaultContext", "FaultError", "FaultSpec", "Nemesis",
    "Registration", "ScheduleError", "ScheduleRunner", "ScheduleSpec", "ScheduledEvent", "TargetError",
    "create", "events", "known", "names", "nemesis_event", "normalize_roles", "plan", "plugin_errors", "register",
    "run_schedule", "validate", "apply_all", "undo_all", "needs_crash_fs",
]
