"""Failover: time from a fault on the master until the first successful send.

    .venv/bin/python bench/failover.py                       # controller-3, controller-2, dledger-3
    .venv/bin/python bench/failover.py --kills 20 --suspends 5 --timing default
    .venv/bin/python bench/failover.py --profiles controller-3 --kills 5 --suspends 0
    .venv/bin/python bench/failover.py --kills 0 --suspends 0 --partitions 5   # root: namespaces

Real `python -m sut` processes on loopback (sut.local.LocalCluster), RocketMQ
default timings unless --timing says otherwise. Each profile runs in the same
script run, one after the other. For every fault:

- a producer (the SUT client library: 3 s send timeout, 2 retries, route
  refresh after any failure) has been sending successfully, so its route
  cache points at the current master;
- the master gets SIGKILL (kill) or SIGSTOP (suspend: the process and its
  sockets stay, so the controller notices only by heartbeat timeout);
- the producer sends back to back; the time from the signal to the first
  SEND_OK is the failover time;
- the victim is restarted (kill) or resumed (suspend), and the next fault
  waits until the group is whole again (every broker ready, and in Controller
  mode every broker back in the SyncStateSet).

A suspended master is what a partition of the master looks like to the rest
of the cluster (no heartbeats, no acks, connections kept). `--partitions N`
(root) measures real partitions too: the profile is deployed with sut.deploy
onto a network-namespace cluster of as many nodes as the profiles need, the
master's node is cut off from the other nodes with iptables (nuclei.drop;
the client on the host still reaches every node), and the time to the first
SEND_OK is measured the same way before the partition is healed. The single nameserver's node is not
partitioned: clients would have no route to a new master until the heal
(when the master sits there, it is first moved by a kill).

Prints p50 / p99 / max per profile and fault; nothing is asserted.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import nuclei  # noqa: E402
from inventory import Pool, netns  # noqa: E402
from nuclei.net import remove  # noqa: E402
from sut import admin  # noqa: E402
from sut import systems  # noqa: E402
from sut.deploy import ModelDeployer  # noqa: E402
from sut.client import Producer  # noqa: E402
from sut.local import LocalCluster  # noqa: E402

TOPIC = "chaos"


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def broker_statuses(cluster: LocalCluster) -> dict[str, dict | None]:
    names = [n for n, p in cluster.processes.items() if p.role == "broker"]
    got = await asyncio.gather(*(admin.process_status(cluster.address(n), timeout=1.0)
                                 for n in names))
    return dict(zip(names, got))


async def master_of(cluster: LocalCluster) -> str | None:
    for name, status in (await broker_statuses(cluster)).items():
        if status and status.get("ready") and status.get("is_leader"):
            return name
    return None


async def whole(cluster: LocalCluster) -> bool:
    """Every broker ready, one master, and (Controller mode) a full SyncStateSet."""
    statuses = await broker_statuses(cluster)
    if not all(s and s.get("ready") for s in statuses.values()):
        return False
    masters = [s for s in statuses.values() if s.get("is_leader")]
    if len(masters) != 1:
        return False
    ha = masters[0].get("ha") or {}
    if "sync_state_set" in ha and len(ha["sync_state_set"]) != len(statuses):
        return False
    return all(s["max_offset"] == masters[0]["max_offset"] for s in statuses.values())


async def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await predicate():
            return
        await asyncio.sleep(0.1)
    raise TimeoutError(f"{what} not reached within {timeout:.0f}s")


async def send_until_ok(producer: Producer, started: float, limit: float) -> float:
    """Send back to back; seconds from `started` to the first SEND_OK."""
    while time.monotonic() - started < limit:
        result = await producer.send(TOPIC, b"failover-probe")
        if result.outcome.value == "ok":
            return time.monotonic() - started
    raise TimeoutError(f"no successful send within {limit:.0f}s")


async def one_fault(cluster: LocalCluster, producer: Producer, fault: str) -> float:
    await wait_for(lambda: whole(cluster), 120, "a whole group")
    await send_until_ok(producer, time.monotonic(), 30)  # warm route cache and connections
    victim = await master_of(cluster)
    if victim is None:
        raise RuntimeError("no master to hit")
    started = time.monotonic()
    if fault == "kill":
        cluster.send_signal(victim, signal.SIGKILL)
    else:
        cluster.send_signal(victim, signal.SIGSTOP)
    try:
        return await send_until_ok(producer, started, 120)
    finally:
        if fault == "kill":
            await asyncio.to_thread(cluster.popen[victim].wait, 10)
            cluster.start(victim)
        else:
            cluster.send_signal(victim, signal.SIGCONT)


async def bench_profile(profile: str, timing: str, faults: dict[str, int], base: str) -> dict:
    results: dict[str, list[float]] = {}
    with LocalCluster(profile, os.path.join(base, profile), timing=timing) as cluster:
        cluster.start_all(timeout=120)
        async with Producer(cluster.namesrv_addrs, send_timeout=3.0) as producer:
            for fault, count in faults.items():
                samples = results.setdefault(fault, [])
                for i in range(count):
                    seconds = await one_fault(cluster, producer, fault)
                    samples.append(seconds)
                    print(f"  {profile} {fault} #{i + 1}: {seconds * 1000:.0f} ms", flush=True)
    return results


class NetnsGroup:
    """A profile deployed on a namespace cluster: just what the partition bench needs."""

    def __init__(self, deployer: ModelDeployer, pool: Pool, journal: nuclei.Journal) -> None:
        self.deployer, self.pool, self.journal = deployer, pool, journal
        self.brokers = [r for r in deployer.refs if r.role == "broker"]
        self.namesrv_node = next(r.node for r in deployer.refs if r.role == "namesrv")

    async def statuses(self) -> list[dict | None]:
        return await asyncio.gather(*(admin.process_status(r.address, timeout=1.5)
                                      for r in self.brokers))

    async def whole(self) -> bool:
        statuses = await self.statuses()
        if not all(s and s.get("ready") for s in statuses):
            return False
        masters = [s for s in statuses if s.get("is_leader")]
        if len(masters) != 1:
            return False
        ha = masters[0].get("ha") or {}
        return "sync_state_set" not in ha or len(ha["sync_state_set"]) == len(statuses)

    async def master_ref(self):
        for ref, status in zip(self.brokers, await self.statuses()):
            if status and status.get("ready") and status.get("is_leader"):
                return ref
        return None

    async def move_master(self, ref) -> None:
        """Kill the master and start it again only once another broker leads (a restarted
        DLedger leader would otherwise win its old term's election straight back)."""
        entries = await asyncio.to_thread(nuclei.kill, self.pool, self.journal, ref)

        async def moved() -> bool:
            other = await self.master_ref()
            return other is not None and other.name != ref.name
        try:
            await wait_for(moved, 120, "another master")
        finally:
            for entry in entries:
                await asyncio.to_thread(nuclei.restart, self.pool, self.journal, entry,
                                        start=self.deployer.start_process, proc=ref)


async def one_partition(group: NetnsGroup, producer: Producer, hosts: dict[str, str]) -> float:
    for _ in range(5):
        await wait_for(group.whole, 180, "a whole group")
        await send_until_ok(producer, time.monotonic(), 60)
        ref = await group.master_ref()
        if ref is not None and ref.node != group.namesrv_node:
            break
        if ref is not None:
            await group.move_master(ref)
    else:
        raise RuntimeError("the master stayed on the nameserver's node after 5 moves")
    peers = [h for n, h in hosts.items() if n != ref.node]
    started = time.monotonic()
    entry = await asyncio.to_thread(nuclei.drop, group.pool, group.journal, ref.node, peers)
    try:
        return await send_until_ok(producer, started, 120)
    finally:
        await asyncio.to_thread(remove, group.pool, group.journal, entry)


def bench_partitions(profiles: list[str], timing: str, count: int, base: str,
                     results: dict[str, dict[str, list[float]]]) -> None:
    name = f"bfo{os.getpid()}"
    inventory = netns.up(name, max(systems.profile(p).nodes_needed for p in profiles), persistent=False)
    pool = Pool(inventory)
    hosts = {n.name: n.host for n in inventory.nodes}
    try:
        for profile in profiles:
            journal = nuclei.Journal(os.path.join(base, f"{profile}-journal.jsonl"))
            deployer = ModelDeployer(pool, inventory, profile, os.path.join(base, f"{profile}-netns"),
                                timing=timing)
            samples = results.setdefault(profile, {}).setdefault("partition", [])
            try:
                deployer.install()
                deployer.start()
                deployer.wait_healthy(120)
                group = NetnsGroup(deployer, pool, journal)

                async def run() -> None:
                    async with Producer(deployer.endpoints()["namesrv"], send_timeout=3.0) as producer:
                        for i in range(count):
                            seconds = await one_partition(group, producer, hosts)
                            samples.append(seconds)
                            print(f"  {profile} partition #{i + 1}: {seconds * 1000:.0f} ms",
                                  flush=True)
                asyncio.run(run())
            finally:
                nuclei.heal(pool, journal)
                deployer.stop()
    finally:
        pool.close()
        netns.down(name)


def report(all_results: dict[str, dict[str, list[float]]]) -> None:
    print("\n| profile | fault | n | p50 | p99 | max | mean |")
    print("|---|---|---|---|---|---|---|")
    for profile, by_fault in all_results.items():
        for fault, samples in by_fault.items():
            if not samples:
                continue
            ms = [s * 1000 for s in samples]
            print(f"| {profile} | {fault} | {len(ms)} | {quantile(ms, 0.5):.0f} ms | "
                  f"{quantile(ms, 0.99):.0f} ms | {max(ms):.0f} ms | {statistics.mean(ms):.0f} ms |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profiles", default="controller-3,controller-2,dledger-3")
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--suspends", type=int, default=5)
    parser.add_argument("--partitions", type=int, default=0,
                        help="also partition the master this often (root: network namespaces)")
    parser.add_argument("--timing", default="default", help="timing scale of sut.profiles")
    args = parser.parse_args()
    faults = {"kill": args.kills, "suspend": args.suspends}
    all_results = {}
    profiles = args.profiles.split(",")
    with tempfile.TemporaryDirectory(prefix="bench-failover-") as base:
        if args.kills or args.suspends:
            for profile in profiles:
                print(f"{profile} (timing {args.timing}):", flush=True)
                all_results[profile] = asyncio.run(bench_profile(profile, args.timing, faults, base))
        if args.partitions:
            print(f"partitions on a namespace cluster (timing {args.timing}):", flush=True)
            bench_partitions(profiles, args.timing, args.partitions, base, all_results)
    report(all_results)


if __name__ == "__main__":
    main()
