"""SUT send throughput and latency on loopback.

Starts real `python -m sut` processes (sut.local.LocalCluster, RocketMQ
default timings) and drives them with N concurrent producers (tasks sending
fixed-size messages back to back for a fixed time) that share --clients
Producer instances (one connection each; RocketMQ shares one client instance
per process). Prints messages/s, p50/p99/max latency of acknowledged sends
and the CPU time each process spent per message.

    .venv/bin/python bench/sut_throughput.py                 # every scenario
    .venv/bin/python bench/sut_throughput.py --scenario single-async --duration 20
    .venv/bin/python bench/sut_throughput.py --clients 16     # a connection per producer
    .venv/bin/python bench/sut_throughput.py --crash-fs both  # without and with the crash file system
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sut.client import Producer  # noqa: E402
from sut.local import LocalCluster, wait_until  # noqa: E402
from sut import admin  # noqa: E402
from sut.profiles import get as get_profile  # noqa: E402

# scenario -> (profile, per-process config overrides)
SCENARIOS = {
    "single-async": ("single-broker", {"broker-a-0": {"store": {"flush_disk_type": "ASYNC_FLUSH"}}}),
    "single-sync": ("single-broker", {"broker-a-0": {"store": {"flush_disk_type": "SYNC_FLUSH"}}}),
    "master-slave-sync": ("master-slave-sync", {}),
    "master-slave-async": ("master-slave-async", {}),
    "controller-3": ("controller-3", {}),  # Controller mode: 3 brokers, SYNC_FLUSH, quorum acks
    "dledger-3": ("dledger-3", {}),  # DLedger mode: Raft in the broker group
}


async def drive(namesrv: list[str], producers: int, size: int, duration: float,
                clients_n: int) -> dict:
    body = b"x" * size
    latencies: list[float] = []
    outcomes: dict[str, int] = {}
    shared = [Producer(namesrv, send_timeout=5.0) for _ in range(clients_n)]
    for p in shared:  # warm up: route lookup and connection
        await p.send("chaos", body)
    clients = [shared[i % clients_n] for i in range(producers)]
    stop_at = time.perf_counter() + duration

    async def worker(p: Producer) -> None:
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            r = await p.send("chaos", body)
            outcomes[r.status] = outcomes.get(r.status, 0) + 1
            if r.outcome.value == "ok":
                latencies.append(time.perf_counter() - t0)

    started = time.perf_counter()
    await asyncio.gather(*(worker(p) for p in clients))
    elapsed = time.perf_counter() - started
    for p in shared:
        await p.close()
    latencies.sort()
    q = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [0.0] * 99
    return {"msgs_per_s": len(latencies) / elapsed, "acked": len(latencies),
            "p50_ms": q[49] * 1000, "p99_ms": q[98] * 1000,
            "max_ms": latencies[-1] * 1000 if latencies else 0.0, "statuses": outcomes}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def crash_fs(base: Path, nodes: int) -> Iterator[dict[str, int]]:
    """A lazyfs (nuclei/lazyfs_node.py) on every node's data root, unmounted after;
    yields the daemons' pids by name."""
    import mfusepy

    from nuclei.lazyfs_node import mounted
    program = Path(__file__).resolve().parent.parent / "nuclei" / "lazyfs_node.py"
    env = {**os.environ, "PYTHONPATH": str(Path(mfusepy.__file__).parent)}
    daemons, points = [], [base / f"node{i}" / "data" for i in range(nodes)]
    try:
        for point in points:
            point.mkdir(parents=True, exist_ok=True)
            daemons.append(subprocess.Popen(
                ["python3", str(program), "serve", "--state", str(point.parent / "lazyfs"),
                 "--mountpoint", str(point)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            wait_until(lambda: mounted(str(point)), 20, what=f"lazyfs on {point}")
        yield {f"lazyfs-{i}": daemon.pid for i, daemon in enumerate(daemons)}
    finally:
        for point in points:
            subprocess.run(["fusermount3", "-u", "-z", str(point)], capture_output=True)
        for daemon in daemons:
            daemon.wait(timeout=20)


def ready_master(cluster: LocalCluster) -> str | None:
    """The broker that takes writes (fixed, elected by the controller or by Raft), once
    every replica it acks with is attached: a full SyncStateSet, a ready Raft leader,
    a streaming slave."""
    brokers = [name for name in cluster.processes if name.startswith("broker")]
    for name in brokers:
        status = admin.run_sync(admin.process_status(cluster.address(name))) or {}
        if not status.get("is_leader"):
            continue
        ha = status.get("ha", {})
        if "sync_state_set" in ha:
            return name if len(ha["sync_state_set"]) == len(brokers) else None
        if "raft" in ha:
            return name if ha["raft"].get("ready") else None
        return name if len(brokers) == 1 or ha.get("slaves") else None
    return None


def run_scenario(name: str, producers: int, size: int, duration: float, clients_n: int,
                 with_crash_fs: bool = False) -> dict:
    profile, overrides = SCENARIOS[name]
    nodes = get_profile(profile).nodes_needed
    with tempfile.TemporaryDirectory(prefix="sut-bench-") as tmp, \
            (crash_fs(Path(tmp), nodes) if with_crash_fs else contextlib.nullcontext({})) as daemons, \
            LocalCluster(profile, tmp, timing="default", overrides=overrides) as cluster:
        cluster.start_all()
        master = wait_until(lambda: ready_master(cluster), 60, what="a master with its replicas attached")
        brokers = {n: p.pid for n, p in cluster.popen.items() if n.startswith("broker")} | daemons
        before = {n: cpu_seconds(pid) for n, pid in brokers.items()}
        client_before = time.process_time()
        result = asyncio.run(drive(cluster.namesrv_addrs, producers, size, duration, clients_n))
        # CPU per acknowledged message: comparable across runs even on a busy machine
        acked = max(1, result["acked"])
        syncs = (admin.run_sync(admin.process_status(cluster.address(master))) or {}).get("sync_count", 0)
        result["msgs_per_sync"] = acked / syncs if syncs else None  # None: the master never fsyncs per ack
        result["cpu_us"] = {n: (cpu_seconds(pid) - before[n]) / acked * 1e6 for n, pid in brokers.items()}
        result["cpu_us"]["client"] = (time.process_time() - client_before) / acked * 1e6
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", choices=[*SCENARIOS, "all"], default="all")
    parser.add_argument("--producers", type=int, default=16)
    parser.add_argument("--size", type=int, default=1024, help="message body bytes")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per scenario")
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs per scenario; the best one is shown (the machine may be shared)")
    parser.add_argument("--clients", type=int, default=1,
                        help="Producer instances the producers share (each has its own connection); "
                             "1 = like RocketMQ's one client instance per process")
    parser.add_argument("--crash-fs", choices=["off", "on", "both"], default="off",
                        help="run the SUT on the crash file system (lazyfs over FUSE, needs root and "
                             "/dev/fuse): off, on, or both to compare")
    args = parser.parse_args()
    modes = {"off": [False], "on": [True], "both": [False, True]}[args.crash_fs]
    names = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    print(f"{args.producers} concurrent producers over {args.clients} client connection(s), "
          f"{args.size} B messages, {args.duration:g} s per run, best of {max(1, args.repeat)}")
    print(f"load average before: {os.getloadavg()[0]:.1f} (2-core machine: above 2 means contention)")
    print(f"{'scenario':<26} {'msg/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}  "
          f"CPU us/msg per process; statuses")
    for name, with_fs in [(n, m) for n in names for m in modes]:
        runs = [run_scenario(name, args.producers, args.size, args.duration, args.clients, with_fs)
                for _ in range(max(1, args.repeat))]
        label = f"{name}+lazyfs" if with_fs else name
        r = max(runs, key=lambda run: run["msgs_per_s"])
        cpu = ", ".join(f"{k} {v:.0f}" for k, v in r["cpu_us"].items())
        if r["msgs_per_sync"] is not None:
            cpu += f"; {r['msgs_per_sync']:.1f} msgs per fdatasync"
        print(f"{label:<26} {r['msgs_per_s']:>8.0f} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} "
              f"{r['max_ms']:>8.1f}  {cpu}; {r['statuses']}", flush=True)


if __name__ == "__main__":
    main()
