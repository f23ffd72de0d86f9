"""Seeded kills and suspends against a Controller-mode cluster on loopback while two
producers send: the schedule, its driver, and the check that the group is whole again.
Shared by tests/test_controller_chaos.py, tests/test_controller_races.py and
bench/controller_chaos_soak.py."""
from __future__ import annotations

import asyncio
import json
import signal
import time

from support.controller import (Step, brokers, controller_cluster, current_master, read_all_message_ids,
                                seeded_schedule, steps_for_this_run, wait_until)
from support.sut import TOPIC, status_of
from sut.client import Producer

FAULTS = ("kill-master", "suspend-master", "kill-broker", "suspend-broker", "kill-controller")


def schedule(seed: int, steps: int) -> list[Step]:
    return seeded_schedule(seed, steps, FAULTS, hold=(1.0, 3.0), rest=(0.5, 1.5))


def victim(cluster, step: Step) -> str | None:
    if step.fault.endswith("master"):
        return current_master(cluster)
    role = "controller" if step.fault == "kill-controller" else "broker"
    alive = sorted(n for n, p in cluster.processes.items()
                   if p.role == role and cluster.popen[n].poll() is None)
    return alive[int(step.pick * len(alive))] if alive else None


def apply_schedule(cluster, plan: list[Step], log: list[str]) -> None:
    for step in plan:
        name = victim(cluster, step)
        if name is None:
            log.append(f"{step.fault}: no target")
            time.sleep(step.hold)
            continue
        sig = signal.SIGKILL if step.fault.startswith("kill") else signal.SIGSTOP
        log.append(f"{step.fault} {name} for {step.hold:.1f}s")
        cluster.send_signal(name, sig)
        time.sleep(step.hold)
        if sig == signal.SIGKILL:
            cluster.popen[name].wait(10)
            cluster.start(name)
        else:
            cluster.send_signal(name, signal.SIGCONT)
        time.sleep(step.rest)


async def workload(namesrv: list[str], stop: asyncio.Event, ok: list[str], attempted: list[str]) -> None:
    """Two producers send until `stop`: every id attempted, and those acknowledged OK."""
    async def worker(w: int) -> None:
        async with Producer(namesrv, send_timeout=2.0) as producer:
            i = 0
            while not stop.is_set():
                result = await producer.send(TOPIC, f"w{w}-{i}".encode(), queue=i % 4)
                attempted.extend(result.msg_ids)
                if result.outcome.value == "ok":
                    ok.append(result.msg_id)
                i += 1
    await asyncio.gather(worker(0), worker(1))


def whole(cluster) -> bool:
    statuses = [status_of(cluster, b) for b in brokers(cluster)]
    if not all(s and s["ready"] for s in statuses):
        return False
    masters = [s for s in statuses if s["ha_role"] == "master"]
    return (len(masters) == 1
            and len(masters[0]["ha"]["sync_state_set"]) == len(statuses)
            and all(s["max_offset"] == masters[0]["max_offset"] for s in statuses))


def ha_dump(cluster) -> str:
    """Every broker's HA state, for a convergence that timed out."""
    lines = []
    for name in brokers(cluster):
        st = status_of(cluster, name)
        if st is None:  # not running (say why) or not answering
            code = cluster.popen[name].poll()
            out = cluster.data_dir(name) / "broker.out"
            last = out.read_text().strip().splitlines()[-1:] if out.exists() else []
            lines.append(f"{name}: no status (exit code {code}; last output {last})")
            continue
        brief = {k: st.get(k) for k in (
            "ready", "ha_role", "broker_id", "max_offset", "confirm_offset", "registered", "ha")}
        lines.append(f"{name}: {json.dumps(brief, sort_keys=True)}")
    return "\n".join(lines)


def run_schedule(profile: str, tmp_path, seed: int) -> tuple[list[str], list[str], list[str],
                                                              list[str]]:
    """(acked ids, attempted ids, ids read afterwards, fault log); the log's last line
    says how long the group took to be whole again after the last fault."""
    ok: list[str] = []
    attempted: list[str] = []
    log: list[str] = []
    with controller_cluster(profile, tmp_path / profile, heartbeat_timeout_ms=2500,
                            ha_max_time_slave_not_catchup_ms=2500) as cluster:
        cluster.start_all(timeout=60)

        async def drive():
            stop = asyncio.Event()
            load = asyncio.create_task(workload(cluster.namesrv_addrs, stop, ok, attempted))
            await asyncio.to_thread(apply_schedule, cluster, schedule(seed, steps_for_this_run(12)), log)
            await asyncio.sleep(1.0)
            stop.set()
            await load
        asyncio.run(drive())
        for name, proc in cluster.popen.items():  # nothing may stay stopped or dead
            if proc.poll() is None:
                cluster.send_signal(name, signal.SIGCONT)
        healed = time.monotonic()
        try:
            wait_until(lambda: whole(cluster), 90, f"{profile} to be whole again after {log}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{ha_dump(cluster)}") from None
        log.append(f"whole again after {time.monotonic() - healed:.1f}s")
        return ok, attempted, read_all_message_ids(cluster.namesrv_addrs), log
