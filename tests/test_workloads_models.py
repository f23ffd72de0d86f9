"""The histories the workloads write fit the linearizability models that check them.

The `log` and `register` workloads run over in-memory stores (correct, and
deliberately broken); the JVM engine must accept the correct histories and
reject the broken ones. This pins the value formats of docs/contracts.md.
"""
from __future__ import annotations

import asyncio

import pytest

from checkers.knossos import analysis
from checkers.knossos.edn import load_history, without_audit
from checkers.routes import linearizability_model
from workloads.base import WorkloadOptions
from workloads.history import read_history
from workloads.log import LogWorkload
from workloads.register import RegisterWorkload

from support.workloads import MemoryBroker, Registers, run_workload

pytestmark = pytest.mark.jvm


class ForgetfulBroker(MemoryBroker):
    """Acknowledges appends, then loses the newest entry of a queue now and then."""

    def client(self):
        inner = super().client()
        broker = self

        class Client:
            create_topic, close, commit = inner.create_topic, inner.close, inner.commit

            async def send(self, queue, body, msg_id):
                done = await inner.send(queue, body, msg_id)
                if broker.sends % 9 == 0:
                    broker.queues[queue].pop()  # acked, then truncated: a lost write
                return done

            pull = inner.pull

        return Client()


def log_history(broker, tmp_path):
    asyncio.run(run_workload(LogWorkload(WorkloadOptions(concurrency=3, queues=2)), broker, tmp_path,
                             duration=0.6, rate=100))
    return without_audit(read_history(tmp_path))  # as the checkers do: the audit is no model op


def test_log_histories_of_a_correct_store_are_linearizable(tmp_path):
    result = analysis(linearizability_model("log"), log_history(MemoryBroker(), tmp_path), time_limit=60)
    assert result["valid"] is True


def test_a_store_that_loses_acknowledged_appends_is_caught(tmp_path):
    result = analysis(linearizability_model("log"), log_history(ForgetfulBroker(), tmp_path), time_limit=60)
    assert result["valid"] is False


def register_history(kv, tmp_path):
    workload = RegisterWorkload(WorkloadOptions(concurrency=3, keys=2))
    asyncio.run(run_workload(workload, kv, tmp_path, duration=0.6, rate=100))
    return read_history(tmp_path)


def test_register_histories_of_a_correct_store_are_linearizable(tmp_path):
    result = analysis(linearizability_model("register"), register_history(Registers(), tmp_path), time_limit=60)
    assert result["valid"] is True


def test_stale_register_reads_are_caught(tmp_path):
    result = analysis(linearizability_model("register"), register_history(Registers(stale=True), tmp_path),
                      time_limit=60)
    assert result["valid"] is False


def test_chaos_lin_reads_a_run_history_without_its_audit_reads(tmp_path):
    events = log_history(MemoryBroker(), tmp_path)
    assert load_history(tmp_path) == without_audit(read_history(tmp_path))
    assert {ev["f"] for ev in events} <= {"append", "read"}
