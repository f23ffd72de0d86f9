"""RocketMQ's message types on real RocketMQ, deploy to verdict, one short seeded run each
under a master kill (rmq-controller-3, `timing: fast`), sharing one 4-node cluster:
orderly consumption keeps every key in send order with no gap and no queue processed by
two members at once; committed transactions are delivered, rolled-back ones never, unknown
ones resolved by check-back; timer messages come no earlier than their delivery time and
none is lost."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from harness.run import RunLifecycle
from harness.spec import build_spec
from support.rocketmq_deploy import rocketmq_cluster

pytestmark = [pytest.mark.long, pytest.mark.cluster, pytest.mark.root, pytest.mark.spark, pytest.mark.jvm]

RUN = {"profile": "rmq-controller-3", "faults": ["leader-kill"], "targets": ["brokers"], "timing": "fast",
       "time": 24, "interval": 6, "duration": 10, "recovery": 12, "rate": 20, "concurrency": 5, "seed": 11}


@pytest.fixture(scope="module")
def cluster(make_cluster):
    inventory, _ = rocketmq_cluster(make_cluster)
    return inventory


def checked_run(cluster, store: Path, workload: str) -> dict:
    spec = build_spec({**RUN, "workload": workload, "inventory": cluster.source, "store": store})
    outcome = RunLifecycle(spec, Console(stderr=True, force_terminal=False), show_progress=False).execute()
    assert outcome.status == "complete", outcome.error
    return json.loads((outcome.run.path / "results.json").read_text())


def test_orderly_consumption_keeps_each_key_in_send_order_across_a_master_kill(cluster, tmp_path):
    results = checked_run(cluster, tmp_path / "store", "ordered")
    ordered = results["checkers"]["ordered"]
    assert ordered["valid"] is True, json.dumps(ordered)
    counts = ordered["counts"]
    assert counts["sent_ok"] > 50 and counts["processed"] >= counts["sent_ok"] and counts["keys"] >= 3, counts
    assert results["checkers"]["rto"]["failovers"] >= 1


def test_transactions_commit_roll_back_and_resolve_unknowns_by_check_back_across_a_master_kill(cluster, tmp_path):
    results = checked_run(cluster, tmp_path / "store", "transactional")
    tx = results["checkers"]["transactional"]
    assert tx["valid"] is True, json.dumps(tx)
    by_decision = tx["acknowledged_by_decision"]
    assert min(by_decision.get(d, 0) for d in ("commit", "rollback", "unknown")) >= 5, by_decision
    assert tx["counts"]["checks"] >= by_decision["unknown"], tx["counts"]


def test_timer_messages_are_delivered_on_time_and_none_is_lost_across_a_master_kill(cluster, tmp_path):
    results = checked_run(cluster, tmp_path / "store", "delayed")
    delayed, queue = results["checkers"]["delayed"], results["checkers"]["queue"]
    assert delayed["valid"] is True, json.dumps(delayed)
    assert queue["valid"] is True and queue["counts"]["lost"] == 0, json.dumps(queue["counts"])
    assert delayed["counts"]["seen"] >= delayed["counts"]["timed"] > 30, delayed["counts"]
