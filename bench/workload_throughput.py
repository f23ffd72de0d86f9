"""How fast can one control node drive a workload? Prints ops/s and latencies.

Runs the `queue` and `log` workloads against a loopback `single-broker` SUT
(real `python -m sut` processes) and the `register` workload against a
3-member Raft KV group, at a requested rate far above what they can take, so
the numbers show the harness + SUT ceiling on this machine, and the cost of
the generator model itself (planning only, no SUT).

    .venv/bin/python bench/workload_throughput.py [--seconds 10] [--concurrency 8]
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from sut.local import LocalCluster
from sut.raft.localgroup import LocalGroup
from workloads.base import WorkloadOptions
from workloads.clients import Endpoints
from workloads.generator import GeneratorSpec, plan
from workloads.history import Clock, read_history
from workloads.log import LogWorkload
from workloads.queue import QueueWorkload
from workloads.register import RegisterWorkload
from workloads.runner import WorkloadRun


async def drive(workload, endpoints, history_dir: Path, seconds: float, rate: float) -> None:
    async def connect():
        return workload.client(endpoints)
    run = WorkloadRun(workload, connect, history_dir, Clock())
    try:
        await run.setup()
        ops = plan(GeneratorSpec(seed=1, rate=rate, concurrency=workload.options.concurrency,
                                 duration=seconds), workload)
        await run.main_phase(ops, seconds)
    finally:
        await run.close()


def report(name: str, history_dir: Path, seconds: float) -> None:
    events = read_history(history_dir.parent)
    started = {}
    latencies, outcomes = [], {"ok": 0, "fail": 0, "info": 0}
    for ev in events:
        if ev["type"] == "invoke":
            started[ev["process"]] = ev["time"]
        else:
            outcomes[ev["type"]] += 1
            latencies.append((ev["time"] - started.pop(ev["process"])) / 1e6)
    done = sum(outcomes.values())
    q = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [0.0] * 99
    print(f"{name:<9} {done / seconds:8.0f} ops/s  ok {outcomes['ok']:>6} fail {outcomes['fail']:>4} "
          f"info {outcomes['info']:>4}  latency ms p50 {q[49]:6.2f} p99 {q[98]:7.2f}")


def bench_planning() -> None:
    workload = QueueWorkload(WorkloadOptions(concurrency=16, queues=8))
    spec = GeneratorSpec(seed=1, rate=10_000, concurrency=16, duration=60)
    began = time.perf_counter()
    ops = plan(spec, workload)
    took = time.perf_counter() - began
    print(f"planning  {len(ops) / took:8.0f} ops/s planned ({len(ops)} ops in {took:.2f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rate", type=float, default=5000.0, help="requested ops/s (an upper bound)")
    args = parser.parse_args()
    bench_planning()
    options = dict(concurrency=args.concurrency, queues=4, op_timeout=5.0)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        with LocalCluster("single-broker", base / "cluster") as cluster:
            cluster.start_all()
            endpoints = Endpoints(namesrv=cluster.namesrv_addrs,
                                  brokers=[p.address for p in cluster.processes.values() if p.role == "broker"])
            for name, cls in (("queue", QueueWorkload), ("log", LogWorkload)):
                out = base / name / "history"
                asyncio.run(drive(cls(WorkloadOptions(**options, topic=f"bench-{name}")), endpoints, out,
                                  args.seconds, args.rate))
                report(name, out, args.seconds)
        with LocalGroup(str(base / "raft"), size=3) as group:
            group.start()
            asyncio.run(group.wait_leader())
            out = base / "register" / "history"
            asyncio.run(drive(RegisterWorkload(WorkloadOptions(**options, keys=3)),
                              Endpoints(kv=list(group.addresses.values())), out, args.seconds, args.rate))
            report("register", out, args.seconds)


if __name__ == "__main__":
    main()
