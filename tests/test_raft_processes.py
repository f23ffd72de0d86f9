"""Raft/DLedger scenarios (docs/ha-protocol.md) with real processes on loopback and real signals.

Every test runs `python -m sut raft` members, kills them with SIGKILL, restarts
them on the same data, and polls their status with generous deadlines (the
machine is shared and small). Timing is DLedger's scaled down; where a test
states a bound in heartbeat intervals it uses its own, slower timing so the
bound holds on a loaded machine.
"""
from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from sut.raft.client import Indeterminate
from sut.raft.errors import AppendTimeout, NotLeader, PendingFull
from sut.raft.localgroup import LocalGroup, sole_leader

# heartbeat 300 ms; a follower gives up on its leader after > 3 missed ones (900 ms)
SLOW = {"heartbeat_interval_ms": 300, "max_heartbeat_leak": 3, "min_vote_interval_ms": 30,
        "max_vote_interval_ms": 100, "max_wait_ack_ms": 1500, "resend_ms": 300, "rpc_timeout_ms": 500}


@pytest.fixture
def group_factory(tmp_path):
    groups: list[LocalGroup] = []

    def make(size: int = 3, timing="test", **kwargs) -> LocalGroup:
        group = LocalGroup(str(tmp_path / f"g{len(groups)}"), size, timing, **kwargs)
        groups.append(group)
        group.start()
        return group

    yield make
    for group in groups:
        group.stop()


def run(coro):
    return asyncio.run(coro)


async def _propose_many(group: LocalGroup, count: int, prefix: str) -> list[bytes]:
    acked = []
    for i in range(count):
        data = f"{prefix}-{i}".encode()
        await group.client.propose(data)
        acked.append(data)
    return acked


async def _data(group: LocalGroup, member: str) -> list[bytes]:
    return [d for _, d in await group.client.read_committed_log(group.addresses[member]) if d]


def _log_tails(group: LocalGroup, members: list[str], lines: int = 20) -> str:
    """The last lines of each member's raft log, to tell why a timing bound was missed."""
    tails = []
    for member in members:
        with open(os.path.join(group.data_dir(member), "raft.log"), errors="replace") as f:
            tails.append(f"--- {member}\n" + "".join(f.readlines()[-lines:]))
    return "\n".join(tails)


def test_single_node_elects_itself_and_keeps_its_term_across_a_restart(group_factory):
    group = group_factory(1)

    async def scenario():
        await group.wait_leader()
        acked = await _propose_many(group, 10, "single")
        term = (await group.status("n0"))["term"]
        group.kill("n0")
        group.start("n0")
        await group.wait_leader()
        after = await group.status("n0")
        assert after["term"] == term
        assert await _data(group, "n0") == acked
        await group.close()

    run(scenario())


def test_three_nodes_elect_exactly_one_leader_and_it_stays(group_factory):
    group = group_factory(3)

    async def scenario():
        leader = await group.wait_leader()
        term = (await group.status(leader))["term"]
        for _ in range(10):  # stays single and stable over ~5 heartbeats
            await asyncio.sleep(0.1)
            statuses = await group.statuses()
            assert sole_leader(statuses) == leader
            assert {s["term"] for s in statuses.values()} == {term}
        await group.close()

    run(scenario())


def test_kill_9_of_the_leader_elects_a_new_one_within_3_heartbeats_after_the_timeout(group_factory):
    group = group_factory(3, SLOW)
    heartbeat = SLOW["heartbeat_interval_ms"] / 1000

    async def scenario():
        old = await group.wait_leader()
        acked = await _propose_many(group, 20, "before-kill")
        killed_at = time.time()
        group.kill(old)
        rest = [m for m in group.members if m != old]
        new = await group.wait_leader(members=rest, ready=False, timeout=30)
        # Timed by the new leader's own clock (same machine), not by this poller, whose
        # status calls may lag on a loaded box.
        elapsed = (await group.status(new))["role_since"] - killed_at
        # the followers wait out > max_heartbeat_leak heartbeats, then must elect within 3 more
        assert elapsed < (SLOW["max_heartbeat_leak"] + 3) * heartbeat, \
            f"failover took {elapsed:.2f}s; the members' logs:\n" + _log_tails(group, rest)
        assert new != old
        await group.wait_leader(members=rest)
        acked += await _propose_many(group, 5, "after-kill")
        for member in rest:
            assert (await _data(group, member))[:len(acked)] == acked
        group.start(old)  # the old leader comes back as a follower with every entry
        await group.wait_for(lambda s: s[old] and s[old]["leader"] == new and
                             s[old]["commit_index"] >= s[new]["commit_index"], 30, "old leader to catch up")
        assert await _data(group, old) == acked
        await group.close()

    run(scenario())


def test_killing_both_followers_makes_the_leader_step_down_in_the_same_term(group_factory):
    group = group_factory(3, SLOW)

    async def scenario():
        leader = await group.wait_leader()
        term = (await group.status(leader))["term"]
        followers = [m for m in group.members if m != leader]
        killed_at = time.time()
        for member in followers:
            group.kill(member)
        status = await group.wait_for(lambda s: s[leader] if s[leader]["role"] == "candidate" else None,
                                      30, "the leader to step down", members=[leader])
        elapsed = status["role_since"] - killed_at  # the leader's own clock, as in the failover test
        assert status["term"] == term
        assert elapsed < 4 * SLOW["heartbeat_interval_ms"] / 1000 * 2, \
            f"step-down took {elapsed:.2f}s; its log:\n" + _log_tails(group, [leader])
        await group.close()

    run(scenario())


def test_appends_without_quorum_time_out_as_indeterminate(group_factory):
    group = group_factory(3, {**SLOW, "max_heartbeat_leak": 10})  # the leader keeps leading for 3 s

    async def scenario():
        leader = await group.wait_leader()
        for member in group.members:
            if member != leader:
                group.kill(member)
        started = time.monotonic()
        with pytest.raises(AppendTimeout) as caught:
            await group.client.propose(b"no quorum")
        assert not caught.value.definite
        assert time.monotonic() - started >= SLOW["max_wait_ack_ms"] / 1000 * 0.9
        await group.close()

    run(scenario())


def test_too_many_pending_appends_are_rejected_definitely(group_factory):
    timing = {**SLOW, "max_heartbeat_leak": 10, "max_pending_requests": 3}
    group = group_factory(3, timing)

    async def scenario():
        leader = await group.wait_leader()
        for member in group.members:
            if member != leader:
                group.kill(member)
        results = await asyncio.gather(*(group.client.propose(b"p%d" % i) for i in range(6)),
                                       return_exceptions=True)
        full = [r for r in results if isinstance(r, PendingFull)]
        assert len(full) == 3 and all(r.definite for r in full)
        assert sum(isinstance(r, AppendTimeout) for r in results) == 3
        await group.close()

    run(scenario())


def test_a_follower_answers_not_leader_with_the_leader_hint(group_factory):
    group = group_factory(3)

    async def scenario():
        from sut.protocol import RequestCode
        from sut.raft.errors import error_from_reply
        leader = await group.wait_leader()
        follower = next(m for m in group.members if m != leader)
        reply = await group.client._client(group.addresses[follower]).call(RequestCode.RAFT_PROPOSE,
                                                                          body=b"x")
        error = error_from_reply(reply)
        assert isinstance(error, NotLeader) and error.definite
        assert error.leader == leader and error.leader_address == group.addresses[leader]
        await group.close()

    run(scenario())


def test_restarted_follower_rejoins_without_changing_the_term(group_factory):
    group = group_factory(3, SLOW)

    async def scenario():
        leader = await group.wait_leader()
        term = (await group.status(leader))["term"]
        follower = next(m for m in group.members if m != leader)
        group.kill(follower)
        acked = await _propose_many(group, 10, "while-down")
        group.start(follower)
        await group.wait_for(lambda s: s[follower] and s[follower]["role"] == "follower"
                             and s[follower]["commit_index"] >= s[leader]["commit_index"], 30,
                             "the follower to rejoin")
        statuses = await group.statuses()
        assert sole_leader(statuses) == leader
        assert {s["term"] for s in statuses.values()} == {term}
        assert await _data(group, follower) == acked
        await group.close()

    run(scenario())


def test_whole_group_kill_9_loses_no_acknowledged_entry(group_factory):
    group = group_factory(3)

    async def scenario():
        await group.wait_leader()
        acked = []

        async def writer(w: int) -> None:
            for i in range(40):
                data = f"w{w}-{i}".encode()
                try:
                    await group.client.propose(data)
                except (AppendTimeout, Indeterminate):
                    continue
                acked.append(data)

        await asyncio.gather(*(writer(w) for w in range(4)))
        for member in group.members:
            group.kill(member)
        group.start()
        await group.wait_leader(timeout=30)
        leader = await group.wait_leader()
        await group.wait_for(lambda s: all(x["commit_index"] == s[leader]["commit_index"] for x in s.values() if x),
                             30, "every member to learn the commit index")
        for member in group.members:
            log = await _data(group, member)
            assert set(acked) <= set(log) and len(log) == len(set(log))
        await group.close()

    run(scenario())


def test_a_bad_raft_config_is_one_clear_line_and_exit_code_2(tmp_path):
    import json
    import subprocess
    import sys
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"data_dir": str(tmp_path / "d"),
                                "raft": {"node_id": "n9", "peers": {"n0": "127.0.0.1:1"}}}))
    proc = subprocess.run([sys.executable, "-m", "sut", "raft", "--config", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0
    assert "n9" in proc.stderr and "peers" in proc.stderr and "Traceback" not in proc.stderr
