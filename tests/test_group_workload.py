"""The consumer group: RocketMQ's averaging allocation, the broker's member list, the
group workload on loopback SUT processes (valid under a master kill, the
offset-commit-ahead bug caught) and the group checker on hand-made histories."""
from __future__ import annotations

import asyncio
import json
import signal
import threading

from pathlib import Path

from checkers.group import check_rows
from harness.campaign import load_campaign
from harness.campaign.teeth import bug_campaign, cells
from sut import systems
from sut.client import GroupMember
from sut.consumer_groups import ConsumerGroups, allocate_averagely
from sut.local import LocalCluster
from workloads.base import WorkloadOptions
from workloads.group import GroupWorkload

from support.workloads import check_process_rules, endpoints_of, run_on_sut


def test_averaging_allocation_gives_contiguous_ranges_the_first_clients_one_more():
    clients = ["c", "a", "b"]
    assert [allocate_averagely(c, clients, list(range(8))) for c in "abc"] == [[0, 1, 2], [3, 4, 5], [6, 7]]
    assert [allocate_averagely(c, list("abcde"), [2, 0, 1]) for c in "abcde"] == [[0], [1], [2], [], []]
    assert allocate_averagely("z", clients, [0, 1]) == []


def test_a_member_leaves_on_unregister_expiry_and_closed_connection():
    class Conn:
        closed = asyncio.Event()
    groups = ConsumerGroups(expiry_ms=60_000)
    conn = Conn()
    for client in ("a", "b", "c"):
        groups.heartbeat("g", client, conn if client == "c" else None)
    groups.unregister("g", "a")
    assert groups.members("g") == ["b", "c"]
    conn.closed.set()
    assert groups.members("g") == ["b"]
    expired = ConsumerGroups(expiry_ms=0)
    expired.heartbeat("g", "x")
    assert expired.members("g") == []


def test_every_system_runs_the_group_workload_with_its_own_consumer():
    assert systems.refused_workload("rmq-controller-3", "group") is None
    assert systems.refused_workload("controller-3", "group") is None
    from sut.client import GroupMember
    from workloads.rocketmq_group import RocketMQGroupMember
    model = systems.system("model").part("group_member")(["127.0.0.1:9876"], "g", "t", 1.0)
    real = systems.system("rocketmq").part("group_member")(["127.0.0.1:9876"], "g", "t", 1.0, 2.0)
    assert isinstance(model, GroupMember) and isinstance(real, RocketMQGroupMember)
    assert real.route_refresh_ms == 2000 and real.timeout_ms == 1000


def _rows(events):
    out, pending = [], {}
    for i, ev in enumerate(events):
        if ev["type"] == "invoke":
            pending[ev["process"]] = (i, ev)
            continue
        j, invoke = pending.pop(ev["process"])
        out.append({"index": j, "process": ev["process"], "f": ev["f"], "key": ev["key"], "type": ev["type"],
                    "invoke_time": invoke["time"], "complete_time": ev["time"],
                    "invoke_value": json.dumps(invoke["value"]), "value": json.dumps(ev["value"])})
    return out


def _run_group(tmp_path, profile, overrides=None, during=None):
    with LocalCluster(profile, tmp_path / "cluster", overrides=overrides) as cluster:
        cluster.start_all()
        workload = GroupWorkload(WorkloadOptions(concurrency=5, queues=4, topic="grp", op_timeout=2.0))
        events, run = run_on_sut(workload, endpoints_of(cluster), tmp_path, duration=6,
                                 during=during and (lambda: during(cluster)))
    check_process_rules(events, 5)
    assert not run.final_timed_out, "the drain did not end: the group never settled with every consumer" 
    return events, check_rows(_rows(events))


def test_the_group_consumes_every_acknowledged_message_across_a_master_kill(tmp_path):
    def kill_master(cluster):
        threading.Event().wait(2.0)
        cluster.kill("broker-a-0", signal.SIGKILL)
        threading.Event().wait(2.0)
        cluster.restart("broker-a-0")
    events, section = _run_group(tmp_path, "master-slave-sync", during=kill_master)
    counts = section["counts"]
    assert section["valid"] is True, json.dumps(section)
    assert counts["sent_ok"] > 30 and counts["delivered"] >= counts["sent_ok"]
    assert counts["holds"] > 4 and counts["rebalances"] > 4
    held = [ev["value"]["held"] for ev in events if ev["f"] == "rebalance" and ev["type"] == "ok"]
    assert any(len(h) < 4 for h in held)  # the queues were shared among several consumers


def test_a_broker_that_commits_ahead_of_processing_makes_the_group_skip(tmp_path):
    _, section = _run_group(tmp_path, "single-broker", overrides={"broker-a-0": {"bugs": ["offset-commit-ahead"]}})
    assert section["valid"] is False
    assert section["counts"]["skip"] > 0 and section["counts"]["lost"] >= section["counts"]["skip"]


# -- the checker on hand-made histories ----------------------------------------------------
def _op(index, f, type="ok", key=None, invoke=None, value=None, at=None):
    at = index * 10 if at is None else at
    return {"index": index, "process": 0, "f": f, "key": key, "type": type, "invoke_time": at,
            "complete_time": at + 5, "invoke_value": json.dumps(invoke), "value": json.dumps(value)}


def _send(index, msg_id, queue, offset):
    return _op(index, "send", key=queue, value={"id": msg_id, "queue": queue, "offset": offset})


def _rebalance(index, client, gained, held=None):
    return _op(index, "rebalance", value={"client": client, "members": ["a", "b"], "held": held or list(gained),
                                           "gained": {str(q): o for q, o in gained.items()}, "released": {}})


def _poll(index, client, queue, offset, items):
    return _op(index, "poll", key=queue, invoke={"offset": offset, "client": client},
               value=[{"id": i, "queue": queue, "offset": o} for i, o in items])


def _commit(index, client, offsets):
    return _op(index, "commit", invoke={"client": client, "offsets": offsets},
               value={"client": client, "offsets": offsets})


def test_the_checker_counts_a_rebalance_duplicate_and_stays_valid():
    rows = [_send(0, 1, 0, 0), _send(1, 2, 0, 1), _rebalance(2, "a", {0: 0}), _poll(3, "a", 0, 0, [(1, 0), (2, 1)]),
            _commit(4, "a", {"0": 1}), _rebalance(5, "b", {0: 1}), _poll(6, "b", 0, 1, [(2, 1)])]
    section = check_rows(rows)
    assert section["valid"] is True
    assert section["counts"]["duplicates_rebalance"] == 1 and section["counts"]["offset_rollback"] == 0


def test_the_checker_names_an_offset_rollback_by_the_broker_as_failover():
    rows = [_send(0, 1, 0, 0), _send(1, 2, 0, 1), _rebalance(2, "a", {0: 0}), _poll(3, "a", 0, 0, [(1, 0), (2, 1)]),
            _commit(4, "a", {"0": 2}), _rebalance(5, "b", {0: 0}), _poll(6, "b", 0, 0, [(1, 0), (2, 1)])]
    counts = check_rows(rows)["counts"]
    assert counts["offset_rollback_by_broker"] == 1 and counts["duplicates_failover"] == 2


def test_the_checker_finds_a_skip_below_a_committed_offset_and_an_order_gap():
    rows = [_send(0, 1, 0, 0), _send(1, 2, 0, 1), _send(2, 3, 0, 2), _rebalance(3, "a", {0: 2}),
            _poll(4, "a", 0, 2, [(3, 2)]), _poll(5, "a", 0, 5, [])]
    section = check_rows(rows)
    assert section["valid"] is False
    assert section["counts"]["skip"] == 2 and section["counts"]["lost"] == 2 and section["counts"]["order"] == 1


def test_the_checker_says_unknown_when_no_consumer_held_a_queue():
    assert check_rows([_send(0, 1, 0, 0)])["valid"] == "unknown"


def test_teeth_runs_the_commit_ahead_bug_only_where_the_group_workload_runs():
    campaigns = Path(__file__).resolve().parent.parent / "campaigns"
    assert cells(load_campaign(campaigns / "smoke.yaml"), "offset-commit-ahead")[2] == "the workload group"
    nightly = bug_campaign(load_campaign(campaigns / "nightly.yaml"), "offset-commit-ahead")
    assert nightly is not None and nightly.workloads == ("group",) and nightly.bugs == ("offset-commit-ahead",)
