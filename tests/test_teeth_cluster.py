"""Library bugs caught on a real cluster: one seeded short run per bug (DLedger's Raft
commit rule and election restriction, Controller mode's ack, SyncStateSet, truncation
and read paths, the flush path), sharing one 4-node cluster and one Spark check.
`raft-commit-prior-term` needs five members and the figure-8 nemesis and is caught in
7 of 8 seeds, not in every schedule, so a seeded run here would fail one time in eight;
its catch rate is a bench entry (bench/catch_rate.py, docs/teeth.md).

Short runs in every form (`timing: fast` for the failovers): the bugs need one fault
window that outlasts failure detection, not a long run.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from checkers.pipeline import check_runs
from faults.crash import crash_fs_unavailable
from harness.campaign import load_campaign
from harness.campaign.teeth import CAUGHT, run_teeth
from harness.run import RunLifecycle
from harness.spec import build_spec
from tests.conftest import require

pytestmark = [pytest.mark.cluster, pytest.mark.root, pytest.mark.spark]

COMMON = {"workload": "queue", "timing": "fast", "rate": 40, "concurrency": 4, "seed": 1, "check": False}
CONTROLLER_PARTITION = {"profile": "controller-3", "faults": ["leader-partition"], "targets": ["brokers"],
                        "time": 14, "interval": 4, "duration": 5, "recovery": 5}
RUNS = {
    "raft-commit-without-quorum": {"profile": "dledger-3", "faults": ["leader-partition"], "targets": ["brokers"],
                                   "time": 12, "interval": 3, "duration": 4, "recovery": 4},
    # The smoke campaign's cell: two windows, each a heal the stale leader can win.
    "raft-vote-ignores-log": {"profile": "dledger-3", "faults": ["leader-partition"], "targets": ["brokers"],
                              "time": 20, "interval": 4, "duration": 6, "recovery": 6},
    "ack-without-sync-state-set": CONTROLLER_PARTITION,
    "read-beyond-confirm-offset": CONTROLLER_PARTITION,
    "sync-state-set-shrink-before-commit": CONTROLLER_PARTITION,
    "truncate-keeps-consume-queue": CONTROLLER_PARTITION,
    # RocketMQ's flush interval (500 ms): at `fast` (50 ms) a crash seldom finds an acked tail unsynced
    "sync-flush-without-fsync": {"profile": "single-broker-sync", "faults": ["leader-crash"], "timing": "default",
                                 "time": 10, "interval": 3, "duration": 3, "recovery": 3},
}
# What each bug must show (docs/teeth.md): acknowledged messages gone from the final log;
# reads of a tail that was never acknowledged, then cut; or queue offsets holding two messages.
LOSS = ("lost", "lost_after_consume_acknowledged")
CUT_AFTER_READ = ("lost_after_consume", "inconsistent_offsets")
EXPECTED = {bug: LOSS for bug in RUNS} | {
    "read-beyond-confirm-offset": CUT_AFTER_READ,
    # The shrunk set confirms the isolated master's tail: its sends are acknowledged, or time
    # out first (info) while consumers already read what is cut when it rejoins.
    "sync-state-set-shrink-before-commit": LOSS + CUT_AFTER_READ,
    "truncate-keeps-consume-queue": ("inconsistent_offsets",)}


@pytest.fixture(scope="module")
def cluster(make_cluster):
    inventory, _ = make_cluster(4)
    return inventory


@pytest.fixture(scope="module")
def checked(cluster, tmp_path_factory) -> dict[str, dict[str, Any]]:
    """bug -> results.json of its run."""
    require(crash_fs_unavailable() is None, f"the flush bug needs a crash: {crash_fs_unavailable()}")
    inventory = cluster
    store = tmp_path_factory.mktemp("store")
    paths = {}
    for bug, values in RUNS.items():
        spec = build_spec({**COMMON, **values, "bugs": [bug], "inventory": inventory.source, "store": store})
        outcome = RunLifecycle(spec, Console(stderr=True), show_progress=False).execute()
        assert outcome.status == "complete", f"{bug}: {outcome.error}"
        paths[bug] = Path(outcome.run.path)
    results = check_runs(list(paths.values()))
    return {bug: {"result": result, "dir": path} for (bug, path), result in zip(paths.items(), results)}


@pytest.mark.parametrize("bug", list(RUNS))
def test_the_bug_is_caught_with_the_anomaly_it_documents(checked, bug):
    result = checked[bug]["result"]
    counts = result["checkers"]["queue"]["counts"]
    assert result["valid"] is False, json.dumps(counts)
    assert sum(counts[key] for key in EXPECTED[bug]) > 0, json.dumps(counts)


def test_run_json_and_the_run_page_say_the_bug_was_switched_on(checked):
    run_dir = checked["sync-flush-without-fsync"]["dir"]
    assert json.loads((run_dir / "run.json").read_text())["bugs"] == ["sync-flush-without-fsync"]
    from reports.run_report import render_run_report
    page = render_run_report(run_dir).read_text()
    assert 'data-bugs="sync-flush-without-fsync"' in page and "--bug sync-flush-without-fsync" in page


def test_chaos_teeth_catches_a_bug_only_against_a_valid_control_on_a_small_campaign(cluster, tmp_path):
    """The real path: run_teeth runs the bug's cell and its control (same seed, no bug)
    through the campaign runner and reads their verdicts from the store."""
    campaign_path = tmp_path / "teeth-e2e.yaml"
    campaign_path.write_text(yaml.safe_dump({
        "name": "teeth-e2e", "inventory": {"file": str(cluster.source)}, "profiles": ["dledger-3"],
        "workloads": ["queue"], "faults": ["leader-partition"], "targets": ["brokers"], "timing": "fast",
        "durations": {"run": 12, "between": 3, "fault": 4, "recovery": 4, "drain_timeout": 20},
        "rate": 40, "concurrency": 4, "repeats": 1, "seed": 1}))
    store = tmp_path / "store"
    [verdict] = run_teeth(load_campaign(campaign_path), campaign_path, store, ["raft-commit-without-quorum"],
                          Console(stderr=True), show_progress=False)
    assert verdict.status == CAUGHT and verdict.control_valid is True, verdict.as_json()
    [caught] = verdict.caught_by
    assert caught["control_valid"] is True and any(a.startswith("queue: ") for a in caught["anomalies"])
    control = Path(verdict.control_dir) / "runs" / caught["run_id"]
    assert json.loads((control / "run.json").read_text())["bugs"] == []
    bug_run = Path(verdict.campaign_dir) / "runs" / caught["run_id"]
    assert json.loads((bug_run / "run.json").read_text())["seed"] == \
        json.loads((control / "run.json").read_text())["seed"]
