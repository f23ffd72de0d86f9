"""Machine crashes on real clusters: `chaos run` with crash faults, end to end.

Full form (CHAOS_LONG unset or "full"): 60 s runs with 15 s fault intervals;
CI's short form (CHAOS_LONG=short): 16 s runs with 4 s intervals and 12 s to
recover (a crash of the node holding both the master and the controller leader
takes up to ~13 s: a controller election, then the broker's registration).
Seeded, on one 3-node local cluster with a lazyfs under every node's data
directory.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from rich.console import Console

from faults.crash import crash_fs_unavailable
from harness.run import RunLifecycle
from harness.spec import build_spec
from nuclei import lazyfs
from tests.conftest import require
from workloads.history import read_events, read_history

SHORT = os.environ.get("CHAOS_LONG") == "short"
DURATION, INTERVAL, RECOVERY = (16, 4, 12) if SHORT else (60, 15, 15)
SEED = 20261123

pytestmark = [pytest.mark.long, pytest.mark.cluster, pytest.mark.root, pytest.mark.spark]


@pytest.fixture(scope="module")
def cluster(make_cluster):
    require(crash_fs_unavailable() is None, f"needs FUSE: {crash_fs_unavailable()}")
    inventory, pool = make_cluster(4)
    yield inventory, pool
    for node in inventory.nodes:  # every run unmounted what it mounted
        assert not lazyfs.mounted(pool, node.name, node.workdir, f"{node.workdir}/data")


def crash_run(cluster, tmp_path: Path, profile: str, fault: str, rate: float = 40):
    inventory, _ = cluster
    spec = build_spec({"workload": "queue", "time": DURATION, "interval": INTERVAL, "recovery": RECOVERY,
                       "seed": SEED, "rate": rate, "inventory": inventory.source, "store": tmp_path / "store",
                       "profile": profile, "faults": [fault]})
    outcome = RunLifecycle(spec, Console(stderr=True, force_terminal=False), show_progress=False).execute()
    assert outcome.status == "complete", outcome.error
    return outcome


def queue_verdict(run_dir: Path) -> dict:
    return json.loads((run_dir / "results.json").read_text())["checkers"]["queue"]


def invalid_sections(run_dir: Path) -> dict:
    """Each checker that did not say valid, with what it said (for a failure's message)."""
    checkers = json.loads((run_dir / "results.json").read_text())["checkers"]
    return {name: {k: v for k, v in section.items() if k in ("valid", "reason", "counts", "error")}
            for name, section in checkers.items() if section.get("valid") is not True}


def acked(run_dir: Path) -> set:
    return {ev["value"]["id"] for ev in read_history(run_dir) if ev["f"] == "send" and ev["type"] == "ok"}


def crash_starts(run_dir: Path) -> list[dict]:
    return [ev for ev in read_events(run_dir / "nemesis.jsonl") if ev["value"]["phase"] == "start"]


def assert_crashed_and_unmounted(run_dir: Path) -> None:
    starts = crash_starts(run_dir)
    assert starts and all(ev["value"]["targets"] for ev in starts)
    run_json = json.loads((run_dir / "run.json").read_text())
    assert "unmount" in run_json["timings"]["phases"]
    assert any("unmounted the crash file system" in line for line in run_json["heal"])
    journal = [json.loads(line) for line in (run_dir / "journal.jsonl").read_text().splitlines()]
    applied = {e["id"] for e in journal if e["event"] == "apply"}
    assert {e["action"] for e in journal if e["event"] == "apply"} >= {"mount", "kill"}
    assert applied == {e["id"] for e in journal if e["event"] == "undo"}


def test_master_slave_async_under_leader_crash_is_invalid_and_lists_the_lost_messages(cluster, tmp_path):
    # Fast enough that every crash finds acknowledged sends its 500 ms flush interval had not reached.
    outcome = crash_run(cluster, tmp_path, "master-slave-async", "leader-crash", rate=100)
    run_dir = outcome.run.path
    assert_crashed_and_unmounted(run_dir)
    queue = queue_verdict(run_dir)
    assert outcome.valid is False and queue["valid"] is False
    # Acknowledged and gone from the final log: never consumed (lost) or consumed before
    # the crash took it back (lost_after_consume); which of the two depends on timing.
    gone = queue["lost"] + queue["lost_after_consume"]
    assert queue["counts"]["lost"] + queue["counts"]["lost_after_consume"] > 0
    assert gone and {str(m["id"]) for m in gone} <= {str(i) for i in acked(run_dir)}
    lost_bytes = [lost["unsynced_bytes"] for ev in crash_starts(run_dir) for lost in ev["value"]["lost"].values()]
    assert any(lost_bytes), "the crash dropped no unsynced data"


def test_single_broker_with_sync_flush_loses_nothing_under_the_same_crash(cluster, tmp_path):
    outcome = crash_run(cluster, tmp_path, "single-broker-sync", "leader-crash")
    run_dir = outcome.run.path
    assert_crashed_and_unmounted(run_dir)
    queue = queue_verdict(run_dir)
    assert len(acked(run_dir)) > DURATION * 5
    assert queue["counts"]["lost"] == 0 and queue["valid"] is True, queue.get("lost")


@pytest.mark.parametrize("profile", ["controller-3", "dledger-3"])
def test_safe_replicated_profiles_stay_valid_under_random_crash(cluster, tmp_path, profile):
    outcome = crash_run(cluster, tmp_path, profile, "random-crash")
    run_dir = outcome.run.path
    assert_crashed_and_unmounted(run_dir)
    queue = queue_verdict(run_dir)
    assert len(acked(run_dir)) > DURATION * 5
    assert queue["counts"]["lost"] == 0, queue.get("lost")
    assert outcome.valid is True, invalid_sections(run_dir)
