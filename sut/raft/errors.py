"""Why a proposal or read did not succeed, and whether the client may call it a failure.

`definite` errors prove the operation had no effect (the client records `fail`);
the others leave it open (the client records `info`, Jepsen's indeterminate).
Each error maps to one ResponseCode so server and client agree on the wire.
"""
from __future__ import annotations

from typing import Any

from sut.protocol import Command, ResponseCode


class RaftError(Exception):
    """Base: a Raft operation did not succeed."""

    code = ResponseCode.SYSTEM_ERROR
    definite = False

    def __init__(self, message: str, leader: str | None = None,
                 leader_address: str | None = None) -> None:
        super().__init__(message)
        self.leader, self.leader_address = leader, leader_address

    def fields(self) -> dict[str, Any]:
        return {"error": str(self), "leader": self.leader, "leader_address": self.leader_address}


class NotLeader(RaftError):
    """This node is not the leader: nothing was appended. Carries the leader hint if known."""

    code = ResponseCode.NOT_LEADER
    definite = True


class PendingFull(RaftError):
    """Too many appends wait for commit (maxPendingRequestsNum): rejected before appending."""

    code = ResponseCode.PENDING_FULL
    definite = True


class ProposalDropped(RaftError):
    """The entry was overwritten by another leader's entry at its index: it never commits."""

    code = ResponseCode.INCONSISTENT_LOG
    definite = True


class AppendTimeout(RaftError):
    """Not committed within maxWaitAckTimeMs: the entry may still commit (indeterminate)."""

    code = ResponseCode.APPEND_TIMEOUT
    definite = False


class CasMismatch(RaftError):
    """A compare-and-set whose expected value did not match: applied as a no-op."""

    code = ResponseCode.CAS_MISMATCH
    definite = True


_BY_CODE = {cls.code: cls for cls in (NotLeader, PendingFull, ProposalDropped, AppendTimeout, CasMismatch)}


def error_reply(request: Command, exc: RaftError) -> Command:
    """The response that tells a client about `exc`."""
    return request.reply(exc.code, {k: v for k, v in exc.fields().items() if v is not None})


def error_from_reply(reply: Command) -> RaftError:
    """Rebuild the error a server answered with; unknown codes are indeterminate."""
    cls = _BY_CODE.get(reply.code, RaftError)
    fields = reply.fields
    message = str(fields.get("error") or f"response code {reply.code}")
    return cls(message, fields.get("leader"), fields.get("leader_address"))
