"""Nemeses: named faults built from nuclei, target selection, schedules, plugins.

This package's names are what a nemesis plugin uses (docs/nemeses.md,
"Writing a nemesis"): `register`, `Nemesis`, `FaultContext`, `Applied`,
`AppliedAction`, `apply_all` / `undo_all`, `FaultError`. The harness takes
the rest from the submodules (docs/contracts.md): `faults.registry`
(create, known, names), `faults.schedule` (FaultSpec, ScheduleSpec, plan),
`faults.runner` (run_schedule, ScheduleRunner), `faults.validate`,
`faults.targets`, `faults.crash`.
"""
from faults.apply import apply_all, undo_all
from faults.context import Applied, AppliedAction, FaultContext, FaultError
from faults.registry import Nemesis, register

# Built-in nemeses register themselves on import.
from faults import bandwidth, clock, crash, degrade, disk, figure8, loss, noop, partition, processes, triggers  # noqa: E402,F401  isort: skip

__all__ = ["Applied", "AppliedAction", "FaultContext", "FaultError", "Nemesis", "apply_all", "register",
           "undo_all"]
