"""The SUT's view of itself over time (cluster.jsonl): real processes on loopback.

A controller-mode group and a DLedger group are started as real subprocesses;
the recorder samples them while their master is SIGKILLed twice, and the file
it writes must show each failover with the new master's node and a higher
epoch (controller mode) or term (DLedger).
"""
from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from harness.cluster_state import ClusterRecorder
from sut import admin
from sut.cluster_state import Probe, gather_statuses, summarize
from sut.local import LocalCluster, wait_until
from workloads.history import Clock


def probes_of(cluster: LocalCluster) -> list[Probe]:
    # Each process of the loopback cluster is its own "node", named by its index as on a real inventory.
    return [Probe(f"n{p.node + 1}", p.role, name, p.address, str(p.config.get("broker_name", "")))
            for name, p in cluster.processes.items()]


def sampler(cluster: LocalCluster):
    probes, ids = probes_of(cluster), {}
    return lambda: summarize(probes, admin.run_sync(gather_statuses(probes, 0.5)), ids)


def master_process(cluster: LocalCluster, state: dict) -> str:
    node = state["groups"]["broker-a"]["master"]
    return next(name for name, p in cluster.processes.items() if p.role == "broker" and f"n{p.node + 1}" == node)


def recorded_master(path: Path) -> str | None:
    """The master the last complete line of cluster.jsonl names (None before one is written)."""
    lines = path.read_text().splitlines() if path.exists() else []
    for line in reversed(lines):
        try:
            return json.loads(line)["groups"]["broker-a"]["master"]
        except (ValueError, KeyError):
            continue
    return None


def failovers(path: Path) -> list[tuple[str, int]]:
    """(master node, epoch or term) each time the group's master changed to a node."""
    seen = []
    for line in path.read_text().splitlines():
        group = json.loads(line)["groups"]["broker-a"]
        rank = group["epoch"] if group["epoch"] is not None else group["term"]
        if group["master"] and (not seen or seen[-1][0] != group["master"]):
            seen.append((group["master"], rank))
    return seen


@pytest.mark.parametrize("profile", ["controller-3", "dledger-3"])
def test_each_master_kill_shows_in_cluster_jsonl_as_a_new_master_with_a_higher_epoch_or_term(tmp_path, profile):
    path = tmp_path / "cluster.jsonl"
    with LocalCluster(profile, tmp_path / "cluster", timing="fast") as cluster:
        cluster.start_all(timeout=60)
        sample = sampler(cluster)
        with ClusterRecorder(sample, path, Clock(), interval_s=0.1):
            for _ in range(2):
                before = wait_until(lambda: (s := sample())["groups"]["broker-a"]["master"] and s,
                                    timeout=60, what="a master")
                victim = master_process(cluster, before)
                # The kill must come after the recorder has written this master down: under load its
                # first sample can still be on its way when the test's own sample sees a master.
                wait_until(lambda: recorded_master(path) == before["groups"]["broker-a"]["master"],
                           timeout=30, what="the recorder to write the master down")
                cluster.kill(victim, signal.SIGKILL)
                wait_until(lambda: sample()["groups"]["broker-a"]["master"] not in (None, before["groups"]["broker-a"]["master"]),
                           timeout=60, what="a new master")
                cluster.restart(victim, timeout=60)
    changes = failovers(path)
    assert len(changes) >= 3, changes
    ranks = [rank for _, rank in changes]
    assert all(r is not None for r in ranks) and ranks == sorted(ranks) and len(set(ranks)) == len(ranks), changes
    assert all(a[0] != b[0] for a, b in zip(changes, changes[1:]))
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0]["prev_time"] is None and all(b["prev_time"] >= a["time"] for a, b in zip(lines, lines[1:]))
    assert any(line["nodes"][node]["down"] for line in lines for node in line["nodes"])
    if profile.startswith("controller"):
        assert all(line["controller"]["members"] for line in lines)
        assert any(line["controller"]["leader"] for line in lines)
        assert any(line["groups"]["broker-a"]["sync_state_set"] for line in lines)


def test_a_sample_that_fails_is_recorded_and_sampling_goes_on(tmp_path):
    path = tmp_path / "cluster.jsonl"
    answers = iter([{"groups": {}}, RuntimeError("admin API down"), {"groups": {"g": {}}}])

    def state():
        answer = next(answers, {"groups": {"g": {}}})
        if isinstance(answer, Exception):
            raise answer
        return answer
    recorder = ClusterRecorder(state, path, Clock(), interval_s=0.01)
    with recorder:
        wait_until(lambda: recorder.samples >= 5, timeout=10)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [sorted(k for k in line if k not in ("time", "prev_time")) for line in lines] == \
        [["groups"], ["error"], ["groups"]]
    assert lines[1]["error"] == "RuntimeError: admin API down"
