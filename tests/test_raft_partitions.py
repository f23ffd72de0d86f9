"""Raft under real partitions and packet loss: iptables rules in network namespaces.

Members run as `python -m sut raft` on the nodes of a local namespace cluster
(started over SSH through the Pool); faults are the nuclei's iptables actions,
journaled and healed. The test process talks to every member through the
bridge, which the rules never block, so it can watch a partitioned leader.
"""
from __future__ import annotations

import asyncio
import os
import random
import signal
import time

import pytest

import nuclei
from nuclei.net import remove
from sut.raft.client import LeaderClient
from sut.raft.errors import RaftError
from sut.raft.localgroup import LocalGroup, sole_leader

TIMING = {"heartbeat_interval_ms": 200, "max_heartbeat_leak": 3, "min_vote_interval_ms": 30,
          "max_vote_interval_ms": 150, "max_wait_ack_ms": 1000, "resend_ms": 300, "rpc_timeout_ms": 500}


class PoolLauncher:
    """Starts member i on inventory node i over SSH; signals it through its pidfile."""

    def __init__(self, inventory, pool) -> None:
        self.pool = pool
        self.nodes = {f"n{i}": node.name for i, node in enumerate(inventory.nodes)}
        self.pidfiles: dict[str, str] = {}

    def start(self, member: str, argv: list[str], data_dir: str) -> None:
        self.pidfiles[member] = os.path.join(data_dir, "launcher.pid")
        self.pool.start_detached(self.nodes[member], argv, self.pidfiles[member],
                                 os.path.join(data_dir, "stdio.txt"),
                                 cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

    def alive(self, member: str) -> bool:
        if member not in self.pidfiles:
            return False
        result = self.pool.run(self.nodes[member], f"kill -0 $(cat {self.pidfiles[member]}) 2>/dev/null",
                               check=False)
        return result.exited == 0

    def kill(self, member: str, sig: int) -> None:
        if not self.alive(member):
            return
        signal_cmd = f"kill -{{}} $(cat {self.pidfiles[member]})"
        self.pool.run(self.nodes[member], signal_cmd.format(int(sig)), check=False)
        deadline = time.monotonic() + 10
        while sig in (signal.SIGKILL, signal.SIGTERM) and self.alive(member):
            if time.monotonic() > deadline:
                self.pool.run(self.nodes[member], signal_cmd.format(9), check=False)
            time.sleep(0.05)


@pytest.fixture
def cluster_group(netns_cluster, tmp_path):
    inventory, pool = netns_cluster
    journal = nuclei.Journal(tmp_path / "journal.jsonl")
    group = LocalGroup(str(tmp_path / "raft"), 3, TIMING, hosts=[n.host for n in inventory.nodes],
                       launcher=PoolLauncher(inventory, pool))
    hosts = {f"n{i}": node.host for i, node in enumerate(inventory.nodes)}
    try:
        group.start()
        yield group, pool, journal, hosts
    finally:
        report = nuclei.heal(pool, journal)
        group.stop()
        assert not report.errors, report.errors


def isolate(pool, journal, hosts: dict[str, str], member: str):
    """Cut `member` off from the other members (both directions)."""
    return nuclei.drop(pool, journal, pool.inventory.nodes[int(member[1:])].name,
                       [h for m, h in hosts.items() if m != member])


async def _committed(group: LocalGroup, member: str) -> list[tuple[int, bytes]]:
    return await group.client.read_committed_log(group.addresses[member])


async def _converged(group: LocalGroup, timeout: float = 30) -> str:
    leader = await group.wait_leader(timeout=timeout)
    await group.wait_for(lambda s: sole_leader(s) == leader and all(
        x and x["commit_index"] == s[leader]["commit_index"] == x["last_index"] for x in s.values()),
        timeout, "every member to hold exactly the leader's committed log")
    return leader


def test_partitioned_old_leader_has_its_uncommitted_entries_truncated(cluster_group):
    group, pool, journal, hosts = cluster_group

    async def scenario():
        old = await group.wait_leader(timeout=30)
        acked = [b"before-%d" % i for i in range(5)]
        for data in acked:
            await group.client.propose(data)
        stranded = LeaderClient([group.addresses[old]], timeout=3)
        sent: list[bytes] = []

        async def keep_writing_to_old_leader():
            for i in range(200):
                data = b"stranded-%d" % i
                sent.append(data)
                try:
                    await stranded.propose(data, timeout=0.3)
                except RaftError:
                    pass

        writer = asyncio.create_task(keep_writing_to_old_leader())
        cut = await asyncio.to_thread(isolate, pool, journal, hosts, old)
        rest = [m for m in group.members if m != old]
        new = await group.wait_leader(members=rest, timeout=30)
        old_status = await group.status(old)
        writer.cancel()
        assert old_status["last_index"] > old_status["commit_index"], "old leader holds no uncommitted tail"
        after = [b"after-%d" % i for i in range(5)]
        for data in after:
            await group.client.propose(data)
        await asyncio.to_thread(remove, pool, journal, cut)
        await _converged(group)
        logs = {m: await _committed(group, m) for m in group.members}
        assert logs[old] == logs[new]
        data = [d for _, d in logs[old]]
        assert all(d in data for d in acked + after)
        assert not any(d.startswith(b"stranded-") for d in data[data.index(after[0]):])
        await stranded.close()
        await group.close()

    asyncio.run(scenario())


def test_lossy_link_to_a_follower_still_converges(cluster_group):
    group, pool, journal, hosts = cluster_group

    async def scenario():
        leader = await group.wait_leader(timeout=30)
        follower = next(m for m in group.members if m != leader)
        node = pool.inventory.nodes[int(follower[1:])].name
        loss = await asyncio.to_thread(nuclei.loss, pool, journal, node, [hosts[leader]], 0.4)
        acked = []

        async def writer(w: int) -> None:
            for i in range(30):
                data = b"w%d-%d" % (w, i)
                try:
                    await group.client.propose(data, timeout=3)
                    acked.append(data)
                except RaftError:
                    pass

        await asyncio.gather(*(writer(w) for w in range(4)))
        await asyncio.to_thread(remove, pool, journal, loss)
        assert len(acked) >= 60
        await _converged(group)
        logs = [[d for _, d in await _committed(group, m)] for m in group.members]
        assert logs[0] == logs[1] == logs[2]
        assert set(acked) <= set(logs[0])
        await group.close()

    asyncio.run(scenario())


def test_partitioned_old_leader_never_serves_a_stale_read(cluster_group):
    from sut.kv import KvClient
    group, pool, journal, hosts = cluster_group

    async def scenario():
        old = await group.wait_leader(timeout=30)
        kv = KvClient(list(group.addresses.values()))
        await kv.write("x", 1)
        cut = await asyncio.to_thread(isolate, pool, journal, hosts, old)
        rest = [m for m in group.members if m != old]
        await group.wait_leader(members=rest, timeout=30)
        majority = KvClient([group.addresses[m] for m in rest])
        await majority.write("x", 2)
        stale = KvClient([group.addresses[old]], timeout=1)
        for _ in range(2):
            with pytest.raises(RaftError):
                await stale.read("x")
        assert await majority.read("x") == 2
        await asyncio.to_thread(remove, pool, journal, cut)
        await _converged(group)
        for client in (kv, majority, stale):
            await client.close()
        await group.close()

    asyncio.run(scenario())


def _random_faults(seed: int, steps: int) -> list[tuple[str, str, float]]:
    """(action, target, seconds) drawn from the seed: the same seed, the same faults."""
    rng = random.Random(seed)
    return [(rng.choice(["kill", "isolate", "isolate-leader", "kill-leader"]), f"n{rng.randrange(3)}",
             rng.uniform(0.4, 1.5)) for _ in range(steps)]


@pytest.mark.parametrize("seed", [int(os.environ.get("RAFT_SEED", 7))])
def test_random_kills_and_partitions_keep_logs_prefix_consistent_and_acks_durable(cluster_group, seed):
    group, pool, journal, hosts = cluster_group
    steps = 8 if os.environ.get("CHAOS_LONG", "short") == "short" else 40

    async def scenario():
        await group.wait_leader(timeout=30)
        acked: list[bytes] = []
        stop = asyncio.Event()

        async def writer(w: int) -> None:
            client = LeaderClient(list(group.addresses.values()), timeout=2)
            i = 0
            while not stop.is_set():
                data = b"s%d-w%d-%d" % (seed, w, i)
                i += 1
                try:
                    await client.propose(data, timeout=1.5)
                    acked.append(data)
                except RaftError:
                    await asyncio.sleep(0.02)
            await client.close()

        writers = [asyncio.create_task(writer(w)) for w in range(3)]
        for action, target, seconds in _random_faults(seed, steps):
            if action.endswith("leader"):
                statuses = await group.statuses()
                target = sole_leader(statuses, ready=False) or target
            if action.startswith("kill"):
                await asyncio.to_thread(group.kill, target)
                await asyncio.sleep(seconds)
                await asyncio.to_thread(group.start, target)
            else:
                cut = await asyncio.to_thread(isolate, pool, journal, hosts, target)
                await asyncio.sleep(seconds)
                await asyncio.to_thread(remove, pool, journal, cut)
            await asyncio.sleep(0.3)
        stop.set()
        await asyncio.gather(*writers)
        await _converged(group, timeout=60)
        logs = {m: await _committed(group, m) for m in group.members}
        ordered = sorted(logs.values(), key=len)
        for shorter, longer in zip(ordered, ordered[1:]):
            assert longer[:len(shorter)] == shorter, "committed logs are not prefixes of each other"
        data = [d for _, d in ordered[-1]]
        assert len(set(d for d in data if d)) == len([d for d in data if d]), "an entry was applied twice"
        missing = set(acked) - set(data)
        assert not missing, f"seed {seed}: acknowledged entries lost: {sorted(missing)[:5]}"
        assert len(acked) > 20
        await group.close()

    asyncio.run(scenario())
