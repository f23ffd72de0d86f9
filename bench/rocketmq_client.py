"""The cost of driving real RocketMQ through the shared driver JVM (docs/rocketmq-client.md).

    .venv/bin/python bench/rocketmq_client.py [--sends 300] [--concurrency 8]

Starts a loopback RocketMQ (one nameserver, one broker: tests/support/rocketmq.py), then
prints the driver JVM's start time and resident memory, the round trip of a request that
does nothing in the JVM (the driver's own cost), and the send latency (p50 / p99) through it, sequential and with --concurrency clients (one producer each, as the
workloads' workers); beside them, as the same-box reference, the model's client
(workloads.clients.BrokerClient) sending to the model's single broker (`python -m sut`).
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Awaitable, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from sut.local import LocalCluster  # noqa: E402
from sut.rocketmq.driver import Driver, SharedDriver  # noqa: E402
from support.rocketmq import LoopbackRocketMQ  # noqa: E402
from sut.rocketmq.profiles import SYSTEM as ROCKETMQ  # noqa: E402
from workloads.clients import Endpoints, broker_client  # noqa: E402
from workloads.rocketmq_client import RocketMQClient  # noqa: E402

TOPIC = "bench"


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000


async def timed(send: Callable[[int], Awaitable[object]], count: int, concurrency: int) -> list[float]:
    """Latencies of `count` sends split over `concurrency` senders going back to back."""
    latencies: list[float] = []

    async def sender(k: int) -> None:
        for i in range(k, count, concurrency):
            t0 = time.perf_counter()
            await send(i)
            latencies.append(time.perf_counter() - t0)
    await asyncio.gather(*(sender(k) for k in range(concurrency)))
    return latencies


async def latencies(clients: list, sends: int, concurrency: int) -> dict[str, float]:
    """Sequential, then concurrent sends through workload clients (BrokerClient's interface)."""
    await clients[0].create_topic(4)
    for c in clients:  # warm up: producer start, route, connection
        assert (await c.send(0, b"warm", "warm")).type == "ok"
    body = b"x" * 64
    seq = await timed(lambda i: clients[0].send(i % 4, body, f"s{i}"), sends, 1)
    par = await timed(lambda i: clients[i % concurrency].send(i % 4, body, f"p{i}"), sends, concurrency)
    for c in clients:
        await c.close()
    return {"seq_p50": pct(seq, 0.5), "seq_p99": pct(seq, 0.99), "par_p50": pct(par, 0.5), "par_p99": pct(par, 0.99)}


async def rocketmq(namesrv: str, sends: int, concurrency: int) -> dict[str, float]:
    began = time.perf_counter()
    shared = SharedDriver()
    driver: Driver = shared.acquire()
    start_s = time.perf_counter() - began
    rss_idle = rss_mb(driver.pid)
    # The driver's own cost: a request that does nothing in the JVM (pipe, JSON, pool thread).
    ping = await timed(lambda i: driver.acall("ping"), sends, 1)
    ping_par = await timed(lambda i: driver.acall("ping"), sends, concurrency)
    endpoints = Endpoints(namesrv=[namesrv], system=ROCKETMQ)
    clients = [RocketMQClient(endpoints, TOPIC, "bench", 6.0, shared=shared) for _ in range(concurrency)]
    result = await latencies(clients, sends, concurrency)
    rss_busy = rss_mb(driver.pid)
    shared.release()
    shared.close()
    return dict(result, start_s=start_s, rss_idle=rss_idle, rss_busy=rss_busy,
                ping_seq_p50=pct(ping, 0.5), ping_seq_p99=pct(ping, 0.99),
                ping_par_p50=pct(ping_par, 0.5), ping_par_p99=pct(ping_par, 0.99))


async def model(cluster: LocalCluster, sends: int, concurrency: int) -> dict[str, float]:
    brokers = [p.address for p in cluster.processes.values() if p.role == "broker"]
    endpoints = Endpoints(namesrv=cluster.namesrv_addrs, brokers=brokers)
    clients = [broker_client(endpoints, TOPIC, "bench", 6.0) for _ in range(concurrency)]
    return await latencies(clients, sends, concurrency)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sends", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-rmq-client-") as tmp:
        cluster = LoopbackRocketMQ(Path(tmp) / "rmq")
        try:
            cluster.start()
            real = asyncio.run(rocketmq(cluster.namesrv, args.sends, args.concurrency))
        finally:
            cluster.close()
        sut = LocalCluster("single-broker", Path(tmp) / "model", timing="fast")
        try:
            sut.start_all()
            ref = asyncio.run(model(sut, args.sends, args.concurrency))
        finally:
            sut.close()
    print(f"driver JVM: start {real['start_s']:.2f} s, RSS {real['rss_idle']:.0f} MB idle, "
          f"{real['rss_busy']:.0f} MB after {2 * args.sends} sends by {args.concurrency} producers")
    print(f"a JVM per worker instead: {args.concurrency} x {real['rss_idle']:.0f} MB idle and "
          f"{args.concurrency} JVM starts per run (and one more per retired worker)")
    print(f"{'latency (ms)':<40}{'p50':>8}{'p99':>8}")
    for label, row, key in (("driver round trip (ping), 1 caller", real, "ping_seq"),
                            (f"driver round trip (ping), {args.concurrency} callers", real, "ping_par"),
                            ("RocketMQ send via driver, 1 sender", real, "seq"),
                            ("model client, 1 sender (ref)", ref, "seq"),
                            (f"RocketMQ send via driver, {args.concurrency} senders", real, "par"),
                            (f"model client, {args.concurrency} senders (ref)", ref, "par")):
        print(f"{label:<40}{row[key + '_p50']:>8.2f}{row[key + '_p99']:>8.2f}")


if __name__ == "__main__":
    main()
