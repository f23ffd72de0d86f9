"""History events and the Jepsen process rules, with the runner over in-memory clients.

The clients here are test doubles of the SUT client adapters (unit-level logic
only); tests/test_workloads_sut.py runs the same workloads against real SUT
processes.
"""
from __future__ import annotations

import asyncio
import json

import pytest

from workloads.base import Completion, WorkloadOptions
from workloads.history import (Clock, EventLog, ProcessRuleError, WorkerHistory, read_events,
                               read_history, worker_file)
from workloads.log import LogWorkload
from workloads.queue import QueueWorkload
from workloads.register import RegisterWorkload

from support.workloads import MemoryBroker, check_process_rules, run_workload


def test_events_have_every_schema_field(tmp_path):
    log = EventLog(tmp_path / "w.jsonl")
    history = WorkerHistory(log, worker=2, concurrency=4, clock=Clock())
    history.invoke("write", "r1", 3)
    history.complete("ok", 3, node="n2")
    log.close()
    events = read_events(tmp_path / "w.jsonl")
    assert [set(ev) for ev in events] == [{"process", "type", "f", "key", "value", "time", "node", "error"}] * 2
    assert [ev["type"] for ev in events] == ["invoke", "ok"]
    assert events[1]["node"] == "n2" and events[0]["process"] == 2


def test_info_retires_the_process_and_the_worker_continues_as_a_new_id(tmp_path):
    history = WorkerHistory(EventLog(tmp_path / "w.jsonl"), worker=1, concurrency=4, clock=Clock())
    history.invoke("write", "r", 1)
    history.complete("info", 1, error="timeout")
    history.invoke("read", "r")
    history.complete("fail", error="NOT_LEADER")
    history.invoke("read", "r")
    history.complete("ok", 1)
    assert [ev["process"] for ev in read_events(tmp_path / "w.jsonl")] == [1, 1, 5, 5, 5, 5]


def test_completion_without_invoke_and_double_invoke_are_bugs(tmp_path):
    history = WorkerHistory(EventLog(tmp_path / "w.jsonl"), worker=0, concurrency=1, clock=Clock())
    with pytest.raises(ProcessRuleError):
        history.complete("ok")
    history.invoke("read")
    with pytest.raises(ProcessRuleError):
        history.invoke("read")


def test_malformed_history_line_names_file_and_line(tmp_path):
    path = tmp_path / "w.jsonl"
    path.write_text(json.dumps({"process": 0, "type": "invoke", "f": "read"}) + "\n{oops\n")
    with pytest.raises(ValueError, match=r"w.jsonl:2: malformed history line"):
        read_events(path)


def test_queue_run_follows_process_rules_and_drains_every_acknowledged_message(tmp_path):
    broker = MemoryBroker()
    # Every 7th send is indeterminate (but applied), every 11th fails.
    broker.send_outcome = lambda n: "info-applied" if n % 7 == 0 else "fail" if n % 11 == 0 else "ok"
    workload = QueueWorkload(WorkloadOptions(concurrency=4, queues=3))
    asyncio.run(run_workload(workload, broker, tmp_path))
    events = read_history(tmp_path)
    check_process_rules(events, 4)
    acked = {ev["value"]["id"] for ev in events if ev["f"] == "send" and ev["type"] == "ok"}
    infos = {ev["value"]["id"] for ev in events if ev["f"] == "send" and ev["type"] == "info"}
    polled = [m["id"] for ev in events if ev["f"] == "poll" and ev["type"] == "ok"
              for m in ev["value"]]
    assert acked and infos
    assert acked <= set(polled)
    assert infos <= set(polled)            # applied despite the unknown answer: "recovered"
    assert len(polled) == len(set(polled))  # the drain does not re-read
    assert broker.commits == {q: len(broker.queues[q]) for q in broker.queues}
    retired = {ev["process"] for ev in events if ev["type"] == "info"}
    assert any(p >= 4 for p in {ev["process"] for ev in events})  # new ids after info
    assert retired


def test_a_hanging_call_is_info_after_the_op_timeout(tmp_path):
    broker = MemoryBroker()
    broker.send_outcome = lambda n: "hang" if n == 1 else "ok"
    workload = QueueWorkload(WorkloadOptions(concurrency=2, queues=1, op_timeout=0.3))
    asyncio.run(run_workload(workload, broker, tmp_path, duration=0.6, rate=20, final=False))
    events = read_history(tmp_path)
    check_process_rules(events, 2)
    first_send_done = [ev for ev in events if ev["f"] == "send" and ev["type"] != "invoke"][0]
    assert first_send_done["type"] == "info" and "timeout" in first_send_done["error"]


def test_an_unexpected_client_exception_is_info_not_fail(tmp_path):
    broker = MemoryBroker()
    broker.send_outcome = lambda n: "raise" if n == 2 else "ok"
    workload = QueueWorkload(WorkloadOptions(concurrency=2, queues=1))
    asyncio.run(run_workload(workload, broker, tmp_path, duration=0.5, rate=40, final=False))
    errors = [ev for ev in read_history(tmp_path) if ev["type"] == "info"]
    assert len(errors) == 1 and "socket exploded" in errors[0]["error"]


def test_cancelling_a_run_closes_the_pending_operation_as_info(tmp_path):
    broker = MemoryBroker()
    broker.send_outcome = lambda n: "hang"
    workload = QueueWorkload(WorkloadOptions(concurrency=2, queues=1, op_timeout=60))

    async def cancel_soon():
        task = asyncio.create_task(run_workload(workload, broker, tmp_path, duration=5, rate=20))
        # Cancel once a send hangs in flight, not after a fixed sleep: on a loaded box
        # the first send can start later than any sleep we would pick.
        async with asyncio.timeout(30):
            while broker.sends == 0:
                await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_soon())
    events = read_history(tmp_path)
    check_process_rules(events, 2)
    assert any(ev["type"] == "info" and ev["f"] == "send" and "interrupted" in ev["error"]
               for ev in events)


def test_log_reads_target_recent_offsets_and_the_final_phase_reads_them_all(tmp_path):
    broker = MemoryBroker()
    workload = LogWorkload(WorkloadOptions(concurrency=3, queues=2))
    asyncio.run(run_workload(workload, broker, tmp_path))
    events = read_history(tmp_path)
    check_process_rules(events, 3)
    appended = {(ev["key"], ev["value"]["offset"]): ev["value"]["value"]
                for ev in events if ev["f"] == "append" and ev["type"] == "ok"}
    read_ok = [ev for ev in events if ev["f"] == "read" and ev["type"] == "ok"]
    assert appended
    for q in (0, 1):
        top = max(off for key, off in appended if key == q)
        final_reads = {ev["value"]["offset"] for ev in events
                       if ev["f"] == "read" and ev["type"] == "invoke" and ev["key"] == q}
        assert set(range(top + 1)) <= final_reads
    # a read of an offset holding a payload returns that payload, and appends got their offsets
    payload_at = {(q, off): int(body) for q, bodies in broker.queues.items() for off, body in enumerate(bodies)}
    assert all(payload_at[where] == payload for where, payload in appended.items())
    assert any(ev["value"]["value"] is not None for ev in read_ok)
    assert all(ev["value"]["value"] in (None, payload_at.get((ev["key"], ev["value"]["offset"])))
               for ev in read_ok)


def test_register_final_phase_reads_every_key(tmp_path):
    store: dict[str, int] = {}

    class Kv:
        async def read(self, key):
            return Completion("ok", store.get(key), "n1")

        async def write(self, key, value):
            store[key] = value
            return Completion("ok", value, "n1")

        async def cas(self, key, old, new):
            if store.get(key) != old:
                return Completion("fail", None, "n1", "CAS_MISMATCH")
            store[key] = new
            return Completion("ok", None, "n1")

    class Source:
        def client(self):
            return Kv()

    workload = RegisterWorkload(WorkloadOptions(concurrency=2, keys=5))
    asyncio.run(run_workload(workload, Source(), tmp_path, duration=0.5, rate=100))
    events = read_history(tmp_path)
    check_process_rules(events, 2)
    last_reads = {}
    for ev in events:
        if ev["f"] == "read" and ev["type"] == "ok":
            last_reads[ev["key"]] = ev["value"]
    assert last_reads == {k: store.get(f"register-{k}") for k in range(5)}
    assert any(ev["f"] == "cas" and ev["type"] == "fail" for ev in events)


def test_worker_files_are_one_per_worker(tmp_path):
    broker = MemoryBroker()
    asyncio.run(run_workload(QueueWorkload(WorkloadOptions(concurrency=3, queues=2)), broker, tmp_path,
                             duration=0.3))
    assert sorted(p.name for p in (tmp_path / "history").iterdir()) == \
        [worker_file(tmp_path, w).name for w in range(3)]
