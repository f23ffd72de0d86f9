"""`raft-vote-ignores-log` on one Raft follower, driven through its append handler: with
the election restriction a leader that orders committed entries cut is refused; with
the bug switched on the follower obeys, as a Raft follower does, and its state machine
is rebuilt from the shorter log, so what it had applied is gone (docs/teeth.md)."""
from __future__ import annotations

import asyncio
import socket

import pytest

from sut import bugs
from sut.protocol import Command, RequestCode, ResponseCode
from sut.raft.config import RaftConfig, RaftTiming
from sut.raft.node import RaftNode
from sut.raft.wire import pack_entries

# No elections or heartbeats of its own during the test: the test is its only leader.
QUIET = RaftTiming(heartbeat_interval_ms=600_000, min_vote_interval_ms=600_000, max_vote_interval_ms=600_000)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def append(term: int, leader: str, kind: str, body: bytes = b"", **fields) -> Command:
    return Command(RequestCode.RAFT_APPEND, {"term": term, "leader": leader, "kind": kind, **fields}, body)


async def follower_that_applied(tmp_path, applied: list[bytes]) -> RaftNode:
    """Member n1 after leader n0 of term 1 replicated and committed a, b, c."""
    peers = {f"n{i}": f"127.0.0.1:{free_port()}" for i in range(3)}

    async def rewind() -> None:
        applied.append(b"<rebuilt>")

    node = RaftNode(RaftConfig("n1", peers, str(tmp_path), QUIET), apply=lambda e: applied.append(e.data),
                    rewind=rewind)
    await node.start()
    reply = await node._on_append(append(1, "n0", "append", pack_entries([(1, b"a"), (1, b"b"), (1, b"c")]),
                                         prev_index=0, prev_term=0, commit=3), None)
    assert reply.code == ResponseCode.SUCCESS
    await wait_until(lambda: node.applied_index == 3)
    return node


async def wait_until(condition, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


async def stale_leader_cuts_after_index_1(node: RaftNode) -> Command:
    """Stale n2, elected in term 3 with a log that ends at index 1, orders the rest cut."""
    return await node._on_append(append(3, "n2", "truncate", index=1, index_term=1), None)


@pytest.fixture
def bug_on():
    bugs.switch_on(["raft-vote-ignores-log"])
    yield
    bugs.switch_on([])


def on_follower(tmp_path, body) -> None:
    """Run `await body(node, applied)` on a follower that applied a, b, c."""
    async def scenario() -> None:
        applied: list[bytes] = []
        node = await follower_that_applied(tmp_path, applied)
        try:
            await body(node, applied)
        finally:
            await node.stop()

    asyncio.run(scenario())


def test_without_the_bug_a_follower_refuses_to_cut_committed_entries(tmp_path):
    async def body(node: RaftNode, applied: list[bytes]) -> None:
        reply = await stale_leader_cuts_after_index_1(node)
        assert reply.code == ResponseCode.INCONSISTENT_LOG
        assert (node.raft_log.last_index, node.commit_index, applied) == (3, 3, [b"a", b"b", b"c"])

    on_follower(tmp_path, body)


def test_with_the_bug_the_follower_cuts_them_and_rebuilds_its_state_from_the_new_leader_log(tmp_path, bug_on):
    async def body(node: RaftNode, applied: list[bytes]) -> None:
        reply = await stale_leader_cuts_after_index_1(node)
        assert reply.code == ResponseCode.SUCCESS
        assert (node.raft_log.last_index, node.commit_index) == (1, 1)
        reply = await node._on_append(append(3, "n2", "append", pack_entries([(3, b"x")]),
                                             prev_index=1, prev_term=1, commit=2), None)
        assert reply.code == ResponseCode.SUCCESS
        await wait_until(lambda: node.applied_index == 2)
        # b and c were committed and applied, and are gone: the state is a, then x
        assert applied == [b"a", b"b", b"c", b"<rebuilt>", b"a", b"x"]

    on_follower(tmp_path, body)
