"""What operations mean to the checkers: the one place for these facts.

Which functions are writes (RTO and availability look only at writes) and
which `fail` completions still prove that the system answered. Which checks
each workload gets is checkers/routes.py.
"""
from __future__ import annotations

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

# A cas whose expected value did not match completes as `fail` with this
# error: the system answered, so RTO and availability count it like an ok.
PRECONDITION_FAILED_ERRORS = ("cas-mismatch",)
