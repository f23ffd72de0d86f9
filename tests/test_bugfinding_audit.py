"""The durability audit against real SUT processes on loopback: a fresh consumer
reads every queue to its end after the run, and the records say so."""
from __future__ import annotations

from sut.local import LocalCluster
from workloads.audit import AUDIT
from workloads.base import WorkloadOptions
from workloads.log import LogWorkload
from workloads.queue import QueueWorkload

from support.workloads import check_process_rules, endpoints_of, run_on_sut


def audited(events, queue):
    return [ev for ev in events if ev["f"] == AUDIT and ev["key"] == queue and ev["type"] == "ok"]


def test_the_audit_reads_every_queue_to_its_end_and_finds_every_acknowledged_message(tmp_path):
    with LocalCluster("single-broker", tmp_path / "cluster") as cluster:
        cluster.start_all()
        workload = QueueWorkload(WorkloadOptions(concurrency=3, queues=2, topic="audit"))
        events, _ = run_on_sut(workload, endpoints_of(cluster), tmp_path, duration=2, rate=60)
    check_process_rules(events, 3)
    acked = {ev["value"]["id"] for ev in events if ev["f"] == "send" and ev["type"] == "ok"}
    for queue in (0, 1):
        reads = audited(events, queue)
        assert reads and reads[-1]["value"] == []  # the end marker
        offsets = [item["offset"] for ev in reads for item in ev["value"]]
        assert offsets == list(range(len(offsets)))  # from the first offset, no gap
    in_log = {item["id"] for queue in (0, 1) for ev in audited(events, queue) for item in ev["value"]}
    assert len(acked) > 20 and acked <= in_log


def test_the_log_workload_audit_records_offsets_and_values(tmp_path):
    with LocalCluster("single-broker", tmp_path / "cluster") as cluster:
        cluster.start_all()
        workload = LogWorkload(WorkloadOptions(concurrency=3, queues=2, topic="auditlog"))
        events, _ = run_on_sut(workload, endpoints_of(cluster), tmp_path, duration=2, rate=60)
    appended = {(ev["key"], ev["value"]["offset"]): ev["value"]["value"]
                for ev in events if ev["f"] == "append" and ev["type"] == "ok"}
    found = {(item["queue"], item["offset"]): item["value"]
             for queue in (0, 1) for ev in audited(events, queue) for item in ev["value"]}
    assert appended and found == appended
