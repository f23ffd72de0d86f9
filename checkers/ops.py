"""What operations mean to the checkers: the one place for these facts.

Which functions are writes (RTO and availability look only at writes), which
linearizability model checks which workload, and which `fail` completions
still prove that the system answered.
"""
from __future__ import annotations

from typing import Iterable

NEMESIS_PROCESS = "nemesis"
INVOKE = "invoke"
OUTCOMES = ("ok", "fail", "info")
EVENT_TYPES = (INVOKE, *OUTCOMES)

# Operations that change state. RTO measures how long these could not
# complete after a fault; reads do not count, as in OpenChaos' recovery check.
WRITE_FUNCTIONS = ("send", "append", "write", "cas", "put", "enqueue")

# The durability audit's reads (workloads.audit): the final log as a fresh
# consumer finds it after healing. Not part of the workload's model: the queue
# and log anomaly checks read them, linearizability leaves them out.
AUDIT_FUNCTION = "audit"

# Workload -> linearizability model of checkers.knossos. None means that the
# workload has no linearizability check (the queue workload is checked by the
# queue checker: loss, duplication, order).
LINEARIZABILITY_MODELS: dict[str, str | None] = {
    "register": "cas-register",
    "log": "log",
    "queue": None,
}

# A cas whose expected value did not match completes as `fail` with this
# error: the system answered, so RTO and availability count it like an ok.
PRECONDITION_FAILED_ERRORS = ("cas-mismatch",)

# The functions that identify a workload when run.json does not name it.
_WORKLOAD_SIGNATURES = (
    ("queue", {"send", "poll", "enqueue", "dequeue"}),
    ("log", {"append"}),
    ("register", {"write", "cas"}),
)


def linearizability_model(workload: str) -> str | None:
    """The knossos model for `workload`; KeyError for a workload we do not know."""
    return LINEARIZABILITY_MODELS[workload]


def infer_workload(functions: Iterable[str]) -> str | None:
    """Guess the workload from the operation names in a history (no run.json)."""
    seen = set(functions)
    for workload, signature in _WORKLOAD_SIGNATURES:
        if seen & signature:
            return workload
    return None
