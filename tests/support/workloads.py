"""Workloads driven without a harness: in-memory stand-ins for a broker and a key-value
store, a workload run against them or against a real SUT, and the process rules every
history must follow."""
from __future__ import annotations

import asyncio
from collections import defaultdict

from sut.local import LocalCluster
from workloads.base import Completion
from workloads.clients import Endpoints
from workloads.generator import GeneratorSpec, plan
from workloads.history import Clock, read_history
from workloads.runner import WorkloadRun


class MemoryBroker:
    """An in-memory topic: send appends, pull reads; `send_outcomes` scripts failures."""

    def __init__(self) -> None:
        self.queues: dict[int, list[bytes]] = defaultdict(list)
        self.commits: dict[int, int] = {}
        self.sends = 0
        self.send_outcome = lambda n: "ok"

    def client(self):
        broker = self

        class Client:
            closed = False

            async def create_topic(self, queues):
                return None

            async def send(self, queue, body, shard):
                broker.sends += 1
                outcome = broker.send_outcome(broker.sends)
                if outcome == "hang":
                    await asyncio.sleep(3600)
                if outcome == "raise":
                    raise RuntimeError("socket exploded")
                if outcome in ("ok", "info-applied"):
                    broker.queues[queue].append(body)
                if outcome == "ok":
                    return Completion("ok", len(broker.queues[queue]) - 1, "n1")
                if outcome == "info-applied":
                    return Completion("info", None, "n1", "FLUSH_SLAVE_TIMEOUT")
                return Completion("fail", None, "n1", "SERVICE_NOT_AVAILABLE")

            async def pull(self, queue, offset, max_count):
                data = broker.queues[queue][offset:offset + max_count]
                return Completion("ok", ([(offset + i, b) for i, b in enumerate(data)], offset + len(data), True), "n1")

            async def commit(self, queue, offset):
                broker.commits[queue] = offset

            async def close(self):
                self.closed = True

        return Client()


def check_process_rules(events, concurrency):
    """Every invoke is followed by exactly one completion of the same process; info retires it."""
    by_worker = defaultdict(list)
    for ev in events:
        by_worker[ev["process"] % concurrency].append(ev)
    for worker, evs in by_worker.items():
        pending = None
        retired = set()
        for ev in evs:
            assert ev["process"] not in retired, f"retired process {ev['process']} used again"
            if ev["type"] == "invoke":
                assert pending is None, f"worker {worker}: two invokes in a row"
                pending = ev
            else:
                assert pending is not None and pending["process"] == ev["process"]
                assert (pending["f"], pending["key"]) == (ev["f"], ev["key"])
                assert ev["time"] >= pending["time"]
                pending = None
                if ev["type"] == "info":
                    retired.add(ev["process"])
        assert pending is None


async def run_workload(workload, broker, tmp_path, duration=1.0, rate=200.0, final=True):
    clock = Clock()
    ops = plan(GeneratorSpec(seed=1, rate=rate, concurrency=workload.options.concurrency,
                             duration=duration), workload)

    async def connect():
        return broker.client()

    run = WorkloadRun(workload, connect, tmp_path / "history", clock)
    try:
        await run.setup()
        await run.main_phase(ops, duration)
        if final:
            await run.final_phase()
    finally:
        await run.close()
    return run


class Registers:
    """An in-memory KV; `stale` makes every read answer the value before the last write."""

    def __init__(self, stale: bool = False) -> None:
        self.data: dict[str, int] = {}
        self.previous: dict[str, int] = {}
        self.stale = stale

    def client(self):
        kv = self

        class Client:
            async def read(self, key):
                return Completion("ok", (kv.previous if kv.stale else kv.data).get(key), "n1")

            async def write(self, key, value):
                kv.previous[key] = kv.data.get(key)
                kv.data[key] = value
                return Completion("ok", value, "n1")

            async def cas(self, key, old, new):
                if kv.data.get(key) != old:
                    return Completion("fail", None, "n1", "cas-mismatch")
                kv.previous[key] = kv.data.get(key)
                kv.data[key] = new
                return Completion("ok", None, "n1")

        return Client()


def endpoints_of(cluster: LocalCluster) -> Endpoints:
    return Endpoints(namesrv=cluster.namesrv_addrs,
                     brokers=[p.address for p in cluster.processes.values() if p.role == "broker"])


def consumed_ids(events):
    """The ids of every message the history's successful polls returned, in order."""
    return [m["id"] for ev in events if ev["f"] == "poll" and ev["type"] == "ok" for m in ev["value"]]


def run_on_sut(workload, endpoints, tmp_path, duration, rate=40.0, during=None):
    """Setup, main phase (with `during()` run in a thread meanwhile), final phase; the history."""
    async def main():
        async def connect():
            return workload.client(endpoints)
        run = WorkloadRun(workload, connect, tmp_path / "history", Clock())
        try:
            await run.setup()
            ops = plan(GeneratorSpec(seed=4, rate=rate, concurrency=workload.options.concurrency,
                                     duration=duration), workload)
            side = asyncio.create_task(asyncio.to_thread(during)) if during else None
            await run.main_phase(ops, duration)
            if side:
                await side
            await run.final_phase()
        finally:
            await run.close()
        return run
    run = asyncio.run(main())
    return read_history(tmp_path), run
