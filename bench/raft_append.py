"""Raft benchmarks on a 3-member group of real `python -m sut raft` processes (loopback).

    python bench/raft_append.py append   [--seconds 10] [--clients 16] [--size 128] [--timing default]
    python bench/raft_append.py failover [--kills 20] [--timing default]

`append`: clients each propose entries back to back through the leader
(RAFT_PROPOSE, answered after commit and apply); prints throughput and latency
quantiles. `failover`: kill -9 the leader, time until the two survivors agree
on a new ready leader (polled every 20 ms), restart the victim, repeat;
prints p50 / p90 / max. Prints numbers only; nothing is asserted.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sut.raft.client import LeaderClient  # noqa: E402
from sut.raft.errors import RaftError  # noqa: E402
from sut.raft.localgroup import LocalGroup, sole_leader  # noqa: E402


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def bench_append(group: LocalGroup, seconds: float, clients: int, size: int) -> None:
    await group.wait_leader(timeout=60)
    latencies: list[float] = []
    errors = 0
    payload = os.urandom(size // 2).hex().encode()[:size]
    stop_at = time.monotonic() + seconds

    async def client_loop() -> None:
        nonlocal errors
        client = LeaderClient(list(group.addresses.values()), timeout=5)
        while time.monotonic() < stop_at:
            started = time.monotonic()
            try:
                await client.propose(payload)
                latencies.append(time.monotonic() - started)
            except RaftError:
                errors += 1
        await client.close()

    started = time.monotonic()
    await asyncio.gather(*(client_loop() for _ in range(clients)))
    elapsed = time.monotonic() - started
    print(f"append: {len(latencies)} entries of {size} B in {elapsed:.1f} s with {clients} clients: "
          f"{len(latencies) / elapsed:.0f} entries/s, latency p50 {quantile(latencies, .5) * 1000:.1f} ms, "
          f"p95 {quantile(latencies, .95) * 1000:.1f} ms, p99 {quantile(latencies, .99) * 1000:.1f} ms, "
          f"errors {errors}")


async def bench_failover(group: LocalGroup, kills: int) -> None:
    times: list[float] = []
    for i in range(kills):
        leader = await group.wait_leader(timeout=120)
        await group.client.propose(b"before-kill-%d" % i)
        group.kill(leader)
        killed = time.monotonic()
        rest = [m for m in group.members if m != leader]
        while True:
            statuses = await group.statuses(rest)
            new = sole_leader(statuses)
            if new and all(statuses.values()):
                break
            await asyncio.sleep(0.02)
        times.append(time.monotonic() - killed)
        print(f"kill {i + 1}/{kills}: {leader} -> {new} in {times[-1] * 1000:.0f} ms", flush=True)
        group.start(leader)
    print(f"failover after kill -9 of the leader ({kills} kills): p50 {quantile(times, .5) * 1000:.0f} ms, "
          f"p90 {quantile(times, .9) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms, "
          f"mean {statistics.mean(times) * 1000:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["append", "failover"])
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--timing", default="default", help="default (DLedger's) or test (x0.1)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="raft-bench-") as root:
        group = LocalGroup(root, 3, args.timing)
        try:
            group.start()
            if args.what == "append":
                asyncio.run(bench_append(group, args.seconds, args.clients, args.size))
            else:
                asyncio.run(bench_failover(group, args.kills))
        finally:
            group.stop()


if __name__ == "__main__":
    main()
