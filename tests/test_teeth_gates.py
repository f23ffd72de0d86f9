"""safe-valid: a safe profile's run that any checker finds invalid fails the campaign,
whatever the anomaly; runs with a library bug switched on are judged as mutants.
Constructed stores, no cluster."""
from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from rich.console import Console

from harness.campaign import load_campaign, plan
from harness.campaign.gates import evaluate, families
from harness.campaign.model import Gates
from harness.campaign.runner import CampaignRunner
from harness.cli import cli
from reports.campaign import RunRow, acknowledged_not_in_log, run_anomalies
from support.stores import PROFILES, results, stored

INCONSISTENT = "17 queue offset(s) seen holding two different messages"
NOT_LINEARIZABLE = "key 1: cannot linearize ok read 2 by process 3 (#41)"


def queue_invalid_by_offsets() -> dict:
    doc = results(True, rto=[0.5])
    doc["valid"] = False
    doc["checkers"]["queue"].update(valid=False, problems=[INCONSISTENT])
    doc["checkers"]["queue"]["counts"]["inconsistent_offsets"] = 17
    return doc


def register_not_linearizable() -> dict:
    doc = results(True, rto=[0.5])
    doc["valid"] = False
    del doc["checkers"]["queue"]
    doc["checkers"]["linearizable"] = {"valid": False, "problems": [NOT_LINEARIZABLE], "model": "cas-register",
                                       "counts": {"valid": 2, "invalid": 1, "unknown": 0}}
    return doc


def row(profile: str, doc: dict, fault: str = "leader-partition", bugs: tuple[str, ...] = ()) -> RunRow:
    checkers = doc["checkers"]
    counts = checkers.get("queue", {}).get("counts", {})
    return RunRow(f"{profile}-{fault}-r1", profile, "queue", fault, 1, 1, "complete", doc["valid"],
                  lost=acknowledged_not_in_log(counts), anomalies=run_anomalies(checkers), bugs=list(bugs))


def by_name(gates):
    return {g.name: g for g in gates}


def test_inconsistent_offsets_alone_fail_safe_valid_with_run_checker_anomaly_and_count():
    gates = by_name(evaluate(Gates(), [row("dledger-3", queue_invalid_by_offsets())], PROFILES))
    gate = gates["safe-valid"]
    assert not gate.passed
    assert gate.detail == f"dledger-3-leader-partition-r1: queue: {INCONSISTENT}"
    assert gates["no-lost-on-safe"].passed    # nothing lost in the narrow sense: only safe-valid sees it


def test_a_non_linearizable_register_run_fails_safe_valid():
    gate = by_name(evaluate(Gates(), [row("controller-3", register_not_linearizable())], PROFILES))["safe-valid"]
    assert not gate.passed and f"linearizable: {NOT_LINEARIZABLE} (x1)" in gate.detail


def test_lost_after_consume_counts_as_lost_on_safe_profiles():
    counts = {"lost": 0, "lost_after_consume": 20, "lost_after_consume_acknowledged": 17}
    assert acknowledged_not_in_log(counts) == 17
    assert acknowledged_not_in_log({"lost": 2, "lost_after_consume": 3}) == 5  # older stores: all of it
    doc = results(False, lost=0)
    doc["checkers"]["queue"]["counts"].update(counts)
    gate = by_name(evaluate(Gates(), [row("dledger-3", doc)], PROFILES))["no-lost-on-safe"]
    assert not gate.passed and "dledger-3-leader-partition-r1: 17 lost" in gate.detail


def test_an_unsafe_profile_s_anomalies_and_a_switched_off_gate_do_not_fail_safe_valid():
    runs = [row("controller-unclean", queue_invalid_by_offsets())]
    assert by_name(evaluate(Gates(), runs, PROFILES))["safe-valid"].passed
    assert "safe-valid" not in by_name(evaluate(Gates(safe_valid=False), runs, PROFILES))


def test_a_bug_exposed_by_the_faults_makes_its_run_a_mutant_that_unsafe_found_must_catch():
    caught = row("controller-3", queue_invalid_by_offsets(), bugs=("read-beyond-confirm-offset",))
    gates = by_name(evaluate(Gates(), [caught], PROFILES))
    assert gates["safe-valid"].passed
    assert gates["unsafe-found"].passed and "bug read-beyond-confirm-offset invalid in 1 of 1" in gates[
        "unsafe-found"].detail
    missed = row("controller-3", results(True), bugs=("read-beyond-confirm-offset",))
    gate = by_name(evaluate(Gates(), [missed], PROFILES))["unsafe-found"]
    assert not gate.passed and "bug read-beyond-confirm-offset passed all 1 runs under partition" in gate.detail


def test_ring_and_bridge_partitions_are_of_the_partition_family():
    assert families("partition-majorities-ring+random-loss") == {"partition", "loss"}
    assert families("bridge") == {"partition"}


def test_a_bug_its_faults_do_not_expose_leaves_the_run_held_safe():
    # a flush bug under a partition (it needs a crash), and a DLedger bug on a Controller-mode run
    for bug, profile in (("sync-flush-without-fsync", "controller-3"), ("raft-vote-ignores-log", "controller-3")):
        gates = by_name(evaluate(Gates(), [row(profile, queue_invalid_by_offsets(), bugs=(bug,))], PROFILES))
        assert not gates["safe-valid"].passed
        assert f"bug {bug} never ran under" in gates["unsafe-found"].detail


# -- the exit code and the pages of a recorded campaign ------------------------------------

FILE = """\
name: safe-only
profiles: [dledger-3]
workloads: [{workload}]
faults: [leader-partition]
durations: {{run: 10, between: 2, fault: 5, recovery: 2}}
seed: 3
"""


def recorded(tmp_path: Path, workload: str, doc: dict) -> tuple[Path, Path]:
    """A campaign whose one run is recorded and checked but which never finished."""
    path = tmp_path / "c.yaml"
    path.write_text(FILE.format(workload=workload))
    campaign = load_campaign(path)
    runner = CampaignRunner(campaign, plan(campaign), path, tmp_path / "store", Console(quiet=True))
    for run in runner.plan.runs:
        run_dir = runner.path / "runs" / run.run_id
        run_dir.mkdir(parents=True)
        (run_dir / "run.json").write_text(json.dumps(stored({"run_id": run.run_id, "status": "complete"})))
        (run_dir / "results.json").write_text(json.dumps(stored(doc)))
        runner.state["done"][run.run_id] = {"status": "complete", "valid": False}
    runner.state["status"] = "interrupted"
    runner.save()
    return path, runner.path


def finish(tmp_path: Path, path: Path):
    return CliRunner().invoke(cli, ["campaign", str(path), "--resume", "--store", str(tmp_path / "store"),
                                    "--quiet"])


def test_a_campaign_whose_safe_run_has_only_inconsistent_offsets_fails_and_exits_1(tmp_path):
    path, campaign = recorded(tmp_path, "queue", queue_invalid_by_offsets())
    result = finish(tmp_path, path)
    assert result.exit_code == 1, result.output
    assert "gate FAIL  every run of a safe profile valid by every checker: dledger-3-queue-leader-partition-r1" \
        in result.output
    assert "gate PASS  no acknowledged message lost" in result.output
    table = result.output.split("gate ")[0]
    assert "queue 17" in table   # the summary table's anomalies column, then the anomaly itself
    assert f"anomalies  dledger-3-queue-leader-partition-r1 (expected safe): queue: {INCONSISTENT}" in table
    html = (campaign / "index.html").read_text()
    assert 'data-anomalies="1"' in html and 'id="anomalies"' in html and INCONSISTENT in html


def test_a_campaign_whose_safe_register_run_is_not_linearizable_fails_and_exits_1(tmp_path):
    path, campaign = recorded(tmp_path, "register", register_not_linearizable())
    result = finish(tmp_path, path)
    assert result.exit_code == 1, result.output
    assert "gate FAIL  every run of a safe profile valid by every checker" in result.output
    assert "linearizable: key 1: cannot linearize" in result.output


def test_an_unknown_bug_in_a_campaign_file_is_refused_with_its_line(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(FILE.format(workload="queue") + "bugs: [raft-forgets-everything]\n")
    result = CliRunner().invoke(cli, ["campaign", str(path), "--dry-run"])
    assert result.exit_code == 3
    assert "c.yaml: bugs[0] (line 7): unknown bug 'raft-forgets-everything'; known: " in result.output
