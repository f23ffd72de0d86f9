"""A reusable Raft library (DLedger-flavoured) for the broker group and the controllers.

Small API:
    node = RaftNode(RaftConfig(...), apply=callback)   # callback(Entry) in commit order
    await node.start()
    applied = await node.propose(b"...")               # on the leader; waits for apply
    node.role, node.term, node.leader_id, node.is_ready, node.status()
    await node.read_barrier()                          # linearizable read point (ReadIndex)
Errors say whether the operation may still have happened (see sut.raft.errors).
"""
from sut.raft.config import TEST_TIMING, RaftConfig, RaftConfigError, RaftTiming
from sut.raft.errors import (AppendTimeout, CasMismatch, NotLeader, PendingFull, ProposalDropped,
                             RaftError)
from sut.raft.log import Entry, RaftLog
from sut.raft.node import AppliedProposal, RaftNode, Role

__all__ = ["RaftNode", "RaftConfig", "RaftTiming", "TEST_TIMING", "RaftConfigError", "Role", "AppliedProposal",
           "Entry", "RaftLog", "RaftError", "NotLeader", "PendingFull", "AppendTimeout",
           "ProposalDropped", "CasMismatch"]
