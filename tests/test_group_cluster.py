"""The group workload through the whole harness on a netns cluster: a seeded short run
under a master kill is valid (group section checked, deliveries and holds counted), and
`chaos teeth` on a one-cell group campaign catches the offset-commit-ahead library bug.
Both on controller-3 at `timing: fast`, sharing one 4-node cluster."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from checkers.pipeline import check_runs
from harness.run import RunLifecycle
from harness.spec import build_spec

pytestmark = [pytest.mark.cluster, pytest.mark.root, pytest.mark.spark]

REPO = Path(__file__).resolve().parent.parent
CHAOS = str(Path(sys.executable).parent / "chaos")
RUN = {"workload": "group", "profile": "controller-3", "faults": ["leader-kill"], "targets": ["brokers"],
       "timing": "fast", "rate": 40, "concurrency": 5, "seed": 3, "time": 12, "interval": 3, "duration": 4,
       "recovery": 4, "check": False}


@pytest.fixture(scope="module")
def cluster(make_cluster):
    inventory, _ = make_cluster(4)
    return inventory


def test_the_group_workload_is_valid_under_a_master_kill(cluster, tmp_path):
    spec = build_spec({**RUN, "inventory": cluster.source, "store": tmp_path / "store"})
    outcome = RunLifecycle(spec, Console(stderr=True), show_progress=False).execute()
    assert outcome.status == "complete", outcome.error
    [result] = check_runs([Path(outcome.run.path)])
    group = result["checkers"]["group"]
    assert group["valid"] is True, json.dumps(group)
    counts = group["counts"]
    assert counts["sent_ok"] > 50 and counts["lost"] == 0 and counts["holds"] >= 4 and counts["commits"] > 10
    assert result["checkers"]["queue"]["valid"] is True  # not a queue run: nothing to say


def test_chaos_teeth_catches_a_broker_that_commits_offsets_ahead_of_processing(cluster, tmp_path):
    campaign = {"name": "group-teeth", "inventory": {"file": str(cluster.source)}, "profiles": ["controller-3"],
                "workloads": ["group"], "faults": ["leader-kill"], "targets": ["brokers"], "timing": "fast",
                "durations": {"run": 10, "between": 2, "fault": 4, "recovery": 4, "drain_timeout": 20},
                "rate": 40, "concurrency": 5, "repeats": 1, "seed": 5}
    path = tmp_path / "group-teeth.yaml"
    path.write_text(yaml.safe_dump(campaign))
    done = subprocess.run([CHAOS, "teeth", str(path), "--bug", "offset-commit-ahead", "--json", "--quiet",
                           "--store", str(tmp_path / "store")], cwd=REPO, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    [verdict] = json.loads(done.stdout)["bugs"]
    assert verdict["status"] == "caught", verdict
    assert any("skip" in anomaly or "lost" in anomaly for run in verdict["caught_by"] for anomaly in run["anomalies"])
