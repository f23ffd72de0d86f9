"""A Raft follower ordered to cut committed entries, driven through its append handler:
whatever bug is switched on (none, `raft-vote-ignores-log`, `raft-commit-prior-term`),
it obeys its leader as a DLedger follower does, its state machine is rebuilt from the
shorter log, so what it had applied is gone, and the breach is written as an invariant
event (docs/invariants.md, docs/teeth.md)."""
from __future__ import annotations

import asyncio
import json
import socket
import time

import pytest

from sut import bugs
from sut.invariants import FILE_NAME
from sut.protocol import Command, RequestCode, ResponseCode
from sut.raft.config import RaftConfig, RaftTiming
from sut.raft.node import RaftNode
from sut.raft.wire import pack_entries

# No elections or heartbeats of its own during the test: the test is its only leader.
QUIET = RaftTiming(heartbeat_interval_ms=600_000, min_vote_interval_ms=600_000, max_vote_interval_ms=600_000)


def read_events(path) -> list[dict]:
    """The invariant events a node wrote (one JSON object a line)."""
    return [json.loads(line) for line in path.read_text().splitlines()]


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


@pytest.fixture(params=[None, "raft-vote-ignores-log", "raft-commit-prior-term"])
def any_bugs(request):
    """No bug, or one of the two that let a leader miss committed entries: the follower
    behaves the same, since it cannot know why its leader lacks them."""
    bugs.switch_on([request.param] if request.param else [])
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


def test_a_follower_cuts_committed_entries_on_its_leaders_order_and_rebuilds_its_state(tmp_path, any_bugs):
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


def test_the_cut_is_recorded_as_invariant_events_with_node_time_and_details(tmp_path, any_bugs):
    async def body(node: RaftNode, applied: list[bytes]) -> None:
        before = time.time()
        await stale_leader_cuts_after_index_1(node)
        events = read_events(tmp_path / FILE_NAME)
        assert [e["kind"] for e in events] == ["raft-committed-entries-cut", "raft-commit-index-back"]
        assert all(e["node"] == "n1" and before <= e["time"] <= time.time() for e in events)
        assert {"after_index": 1, "commit_index": 3, "leader": "n2", "term": 3}.items() <= events[0]["details"].items()
        assert events[1]["details"]["to_index"] == 1

    on_follower(tmp_path, body)


def test_an_overwrite_of_committed_entries_by_append_is_obeyed_and_recorded(tmp_path):
    async def body(node: RaftNode, applied: list[bytes]) -> None:
        reply = await node._on_append(append(3, "n2", "append", pack_entries([(3, b"y")]),
                                             prev_index=1, prev_term=1, commit=1), None)
        assert reply.code == ResponseCode.SUCCESS
        assert (node.raft_log.last_index, node.raft_log.term_at(2), node.commit_index) == (2, 3, 1)
        assert read_events(tmp_path / FILE_NAME)[0]["details"]["after_index"] == 1

    on_follower(tmp_path, body)


def test_cutting_only_uncommitted_entries_breaks_no_invariant(tmp_path):
    async def body(node: RaftNode, applied: list[bytes]) -> None:
        reply = await node._on_append(append(1, "n0", "append", pack_entries([(1, b"d")]),
                                             prev_index=3, prev_term=1, commit=3), None)
        assert reply.code == ResponseCode.SUCCESS and node.raft_log.last_index == 4
        reply = await node._on_append(append(2, "n2", "truncate", index=3, index_term=1), None)
        assert reply.code == ResponseCode.SUCCESS and node.raft_log.last_index == 3
        assert not (tmp_path / FILE_NAME).exists()

    on_follower(tmp_path, body)
