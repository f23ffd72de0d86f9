"""The workloads against real SUT processes (`python -m sut`, `python -m sut.raft`) on loopback."""
from __future__ import annotations

import asyncio
import signal
import threading
from collections import Counter

from sut.local import LocalCluster
from sut.raft.localgroup import LocalGroup
from workloads.base import WorkloadOptions
from workloads.clients import Endpoints
from workloads.log import LogWorkload
from workloads.queue import QueueWorkload
from workloads.register import RegisterWorkload

from support.workloads import check_process_rules, consumed_ids, endpoints_of, run_on_sut


def test_queue_workload_consumes_every_acknowledged_message(tmp_path):
    with LocalCluster("master-slave-sync", tmp_path / "cluster") as cluster:
        cluster.start_all()
        workload = QueueWorkload(WorkloadOptions(concurrency=4, queues=3, topic="wq"))
        events, _ = run_on_sut(workload, endpoints_of(cluster), tmp_path, duration=3)
    check_process_rules(events, 4)
    acked = {ev["value"]["id"] for ev in events if ev["f"] == "send" and ev["type"] == "ok"}
    assert len(acked) > 50
    consumed = consumed_ids(events)
    assert acked == set(consumed) and len(consumed) == len(set(consumed))
    for ev in events:
        if ev["f"] == "send" and ev["type"] == "ok":
            assert ev["key"] == ev["value"]["queue"] and isinstance(ev["value"]["offset"], int)
            assert ev["node"]


def test_queue_workload_classifies_a_killed_master_and_loses_nothing_acknowledged(tmp_path):
    with LocalCluster("master-slave-sync", tmp_path / "cluster") as cluster:
        cluster.start_all()
        workload = QueueWorkload(WorkloadOptions(concurrency=4, queues=2, topic="wq", op_timeout=2.0))

        def kill_and_restart_master():
            threading.Event().wait(1.5)
            cluster.kill("broker-a-0", signal.SIGKILL)
            threading.Event().wait(2.0)
            cluster.restart("broker-a-0")

        events, _ = run_on_sut(workload, endpoints_of(cluster), tmp_path, duration=6,
                                 during=kill_and_restart_master)
    check_process_rules(events, 4)
    outcomes = Counter(ev["type"] for ev in events if ev["f"] == "send" and ev["type"] != "invoke")
    assert outcomes["ok"] > 20 and outcomes["fail"] + outcomes["info"] > 0
    acked = {ev["value"]["id"] for ev in events if ev["f"] == "send" and ev["type"] == "ok"}
    assert acked <= set(consumed_ids(events))
    failed = {ev["value"]["id"] for ev in events if ev["f"] == "send" and ev["type"] == "fail"}
    assert not failed & set(consumed_ids(events))  # a definite failure never shows up


def test_ordered_queue_consumes_each_shard_in_the_order_it_was_acknowledged(tmp_path):
    with LocalCluster("single-broker", tmp_path / "cluster") as cluster:
        cluster.start_all()
        workload = QueueWorkload(WorkloadOptions(concurrency=5, queues=2, topic="wo", ordered=True))
        events, _ = run_on_sut(workload, endpoints_of(cluster), tmp_path, duration=2.5, rate=60)
    check_process_rules(events, 5)
    sent: dict[str, list[int]] = {}
    for ev in events:  # in completion-time order: a producer's acks come in its send order
        if ev["f"] == "send" and ev["type"] == "ok":
            sent.setdefault(ev["value"]["shard"], []).append(ev["value"]["id"])
            assert ev["key"] == int(ev["value"]["shard"][1:]) % 2  # shard n -> queue n mod queues
    got: dict[str, list[int]] = {}
    for ev in events:
        if ev["f"] == "poll" and ev["type"] == "ok":
            for m in ev["value"]:
                got.setdefault(m["shard"], []).append(m["id"])
    assert len(sent) == workload.producers and got == sent


def test_log_workload_reads_back_appends_at_their_offsets(tmp_path):
    with LocalCluster("single-broker", tmp_path / "cluster") as cluster:
        cluster.start_all()
        workload = LogWorkload(WorkloadOptions(concurrency=3, queues=2, topic="wl"))
        events, _ = run_on_sut(workload, endpoints_of(cluster), tmp_path, duration=2.5)
    check_process_rules(events, 3)
    appended = {(ev["key"], ev["value"]["offset"]): ev["value"]["value"]
                for ev in events if ev["f"] == "append" and ev["type"] == "ok"}
    assert appended
    for queue in (0, 1):
        offsets = sorted(off for q, off in appended if q == queue)
        assert offsets == list(range(len(offsets)))  # one log per queue, no gaps
    reads = [ev for ev in events if ev["f"] == "read" and ev["type"] == "ok"]
    for ev in reads:
        where = (ev["key"], ev["value"]["offset"])
        assert ev["value"]["value"] in (None, appended.get(where))
    final = {(ev["key"], ev["value"]["offset"]) for ev in reads if ev["value"]["value"] is not None}
    assert set(appended) <= final


def test_register_workload_on_a_raft_group_survives_a_leader_kill(tmp_path):
    with LocalGroup(str(tmp_path / "raft"), size=3) as group:
        group.start()
        leader = asyncio.run(group.wait_leader())
        endpoints = Endpoints(kv=list(group.addresses.values()))
        workload = RegisterWorkload(WorkloadOptions(concurrency=4, keys=2, op_timeout=3.0))

        def kill_leader():
            threading.Event().wait(1.0)
            group.kill(leader, signal.SIGKILL)

        events, _ = run_on_sut(workload, endpoints, tmp_path, duration=5, rate=30, during=kill_leader)
    check_process_rules(events, 4)
    done = Counter((ev["f"], ev["type"]) for ev in events if ev["type"] != "invoke")
    assert done[("write", "ok")] > 5 and done[("read", "ok")] > 5
    mismatches = [ev for ev in events if ev["f"] == "cas" and ev["type"] == "fail"
                  and ev["error"].startswith("cas-mismatch")]
    assert mismatches
    final_reads = [ev for ev in events if ev["f"] == "read" and ev["type"] == "ok"][-2:]
    assert {ev["key"] for ev in final_reads} == {0, 1}
