"""A candidate's vote round as DLedger's: judged after vote_wait_ms (plus a random part of
the vote interval) even when peers never answer, and a round that voters with longer logs
outvote is retried in the same term, later."""
from __future__ import annotations

import asyncio
import socket
import time

from sut.raft.config import RaftConfig, RaftTiming
from sut.raft.node import RaftNode, Role, Vote

# Elections only when the test starts one; RPCs would wait 30 s for an answer.
TIMING = RaftTiming(heartbeat_interval_ms=600_000, min_vote_interval_ms=50, max_vote_interval_ms=100,
                    rpc_timeout_ms=30_000, vote_wait_ms=100)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def candidate(tmp_path, peers: dict[str, str]) -> RaftNode:
    node = RaftNode(RaftConfig("n0", peers, str(tmp_path), TIMING), apply=lambda entry: None)
    await node.start()
    node._become_candidate(600.0)  # no election of its own: the test runs the rounds
    return node


def test_a_round_ends_at_the_vote_wait_when_peers_accept_but_never_answer(tmp_path):
    async def scenario() -> None:
        held: list[asyncio.StreamWriter] = []

        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            held.append(writer)  # read nothing, answer nothing: a peer behind a dropping link

        servers = [await asyncio.start_server(silent, "127.0.0.1", 0) for _ in range(2)]
        peers = {"n0": f"127.0.0.1:{free_port()}",
                 **{f"n{i + 1}": f"127.0.0.1:{srv.sockets[0].getsockname()[1]}" for i, srv in enumerate(servers)}}
        node = await candidate(tmp_path, peers)
        try:
            began = time.monotonic()
            await asyncio.wait_for(node._run_election(), timeout=20)
            assert time.monotonic() - began < 10  # the 30 s RPC timeout did not govern the round
            assert node.role is Role.CANDIDATE and node._must_increment  # no quorum: next term
        finally:
            await node.stop()
            for writer in held:
                writer.close()
            for srv in servers:
                srv.close()

    asyncio.run(scenario())


def test_voters_with_longer_logs_keep_the_candidate_in_its_term_and_later(tmp_path):
    async def scenario() -> None:
        peers = {f"n{i}": f"127.0.0.1:{free_port()}" for i in range(3)}
        node = await candidate(tmp_path, peers)

        async def longer_logs(peer: str, request: dict) -> Vote:
            return Vote.LOG_BEHIND

        async def voted_elsewhere(peer: str, request: dict) -> Vote:
            return Vote.ALREADY_VOTED if peer == "n1" else Vote.LOG_BEHIND

        try:
            node._ask_vote = longer_logs  # the voters' answers, without their processes
            await node._run_election()
            term, before = node.term, time.monotonic()
            await node._run_election()
            assert node.role is Role.CANDIDATE and not node._must_increment and node.term == term
            # the retry waits an extra vote interval: at least min + max vote interval
            assert node._next_vote_time - before >= 0.15
            # one answer short of a quorum, and not for want of log: the next term
            node._ask_vote = voted_elsewhere
            await node._run_election()
            assert node._must_increment
        finally:
            await node.stop()

    asyncio.run(scenario())
