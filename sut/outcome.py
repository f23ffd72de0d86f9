"""How a client classifies what happened to a request: ok, fail or indeterminate.

The one table of which broker status means what (docs/ha-protocol.md, "Send
statuses"). `fail` means the request definitely had no effect; anything that
may have been appended is `indeterminate` (a history `info`). Codes not in
the table are indeterminate: a status we do not understand proves nothing.
"""
from __future__ import annotations

import enum

from sut.protocol import RpcConnectionError, RpcError, RpcTimeout, ResponseCode

RC = ResponseCode


class Outcome(str, enum.Enum):
    OK = "ok"
    FAIL = "fail"                    # definitely not written
    INDETERMINATE = "indeterminate"  # may or may not be written

    @property
    def history_type(self) -> str:
        """The completion type of a history event (docs/history-format.md)."""
        return {"ok": "ok", "fail": "fail", "indeterminate": "info"}[self.value]


# Status of a send (or any write) -> outcome.
SEND_OUTCOMES: dict[int, Outcome] = {
    RC.SUCCESS: Outcome.OK,
    # appended, but flush / replication / commit not confirmed in time
    RC.FLUSH_DISK_TIMEOUT: Outcome.INDETERMINATE,
    RC.FLUSH_SLAVE_TIMEOUT: Outcome.INDETERMINATE,
    RC.SLAVE_NOT_AVAILABLE: Outcome.INDETERMINATE,
    RC.APPEND_TIMEOUT: Outcome.INDETERMINATE,
    RC.SYSTEM_ERROR: Outcome.INDETERMINATE,  # a failure inside the broker: can't tell
    # rejected before anything was appended
    RC.SYSTEM_BUSY: Outcome.FAIL,
    RC.REQUEST_CODE_NOT_SUPPORTED: Outcome.FAIL,
    RC.BAD_REQUEST: Outcome.FAIL,
    RC.SERVICE_NOT_AVAILABLE: Outcome.FAIL,
    RC.DISK_FULL: Outcome.FAIL,
    RC.NOT_MASTER: Outcome.FAIL,
    RC.TOPIC_NOT_EXIST: Outcome.FAIL,
    RC.NOT_LEADER: Outcome.FAIL,
    RC.PENDING_FULL: Outcome.FAIL,
    RC.CONTROLLER_NOT_LEADER: Outcome.FAIL,
}

# Definite failures worth another attempt (after a route refresh): the master
# may have moved or the broker may be busy for a moment.
RETRYABLE_STATUSES = frozenset({RC.SYSTEM_BUSY, RC.SERVICE_NOT_AVAILABLE, RC.NOT_MASTER,
                                RC.TOPIC_NOT_EXIST, RC.NOT_LEADER, RC.PENDING_FULL})


def classify_status(code: int) -> Outcome:
    return SEND_OUTCOMES.get(code, Outcome.INDETERMINATE)


def classify_error(exc: BaseException) -> Outcome:
    """A call that raised: only a connection that never carried the request is a failure."""
    if isinstance(exc, RpcConnectionError) and not exc.sent:
        return Outcome.FAIL
    if isinstance(exc, (RpcTimeout, RpcError)):
        return Outcome.INDETERMINATE
    return Outcome.INDETERMINATE


def status_name(code: int) -> str:
    try:
        return ResponseCode(code).name
    except ValueError:
        return f"CODE_{code}"


def combine(outcomes: list[Outcome]) -> Outcome:
    """The outcome of several attempts at the same write (same message id).

    Any ok makes it ok; else any indeterminate attempt makes the whole
    indeterminate (that attempt may have been written); else fail.
    """
    if Outcome.OK in outcomes:
        return Outcome.OK
    if Outcome.INDETERMINATE in outcomes:
        return Outcome.INDETERMINATE
    return Outcome.FAIL
