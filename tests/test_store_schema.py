"""The store's JSON files as models (records/): what the harness writes is what the
readers read, and a store written by an older version gets one line, not a traceback."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import EXIT_ERROR, cli
from harness.run import RunRecord
from harness.spec import build_spec
from harness.store import Store
from records import SCHEMA_VERSION, CampaignJson, OldStoreError, ResultsJson, RunJson, read_model
from sut import systems


def old_store(root: Path) -> Path:
    """A campaign as an older rocketmq-chaos wrote it: no schema_version, thresholds nested."""
    run = root / "20250101T000000Z-ab12" / "runs" / "r1"
    (run / "history").mkdir(parents=True)
    (run / "history" / "w.jsonl").write_text(json.dumps(
        {"process": 1, "type": "invoke", "f": "send", "value": {"id": "m1"}, "time": 1}) + "\n")
    (run / "run.json").write_text(json.dumps({"kind": "run", "run_id": "r1", "workload": "queue",
                                              "thresholds": {"rto_threshold_s": 2}}))
    (run / "results.json").write_text(json.dumps({"valid": True, "checkers": {}}))
    (run.parent.parent / "campaign.json").write_text(json.dumps({"kind": "ad-hoc", "runs": ["r1"]}))
    return run


@pytest.mark.parametrize("command", ["check", "report"])
@pytest.mark.parametrize("level", ["store", "campaign", "run"])
def test_an_older_store_gets_one_line_from_check_and_report(tmp_path, command, level):
    run = old_store(tmp_path)
    path = {"store": tmp_path, "campaign": run.parent.parent, "run": run}[level]
    result = CliRunner().invoke(cli, [command, str(path)])
    assert result.exit_code == EXIT_ERROR, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "written by an older rocketmq-chaos (no schema_version)" in lines[0], result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert not (run / "checked").exists() and not (run / "report").exists()


def test_a_file_of_a_newer_schema_is_refused_too(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"schema_version": SCHEMA_VERSION + 1, "valid": True}))
    with pytest.raises(OldStoreError, match=rf"schema_version {SCHEMA_VERSION + 1}, this version .* reads schema"):
        read_model(ResultsJson, path)


def test_the_harness_writes_run_json_with_the_facts_the_checkers_need(tmp_path):
    spec = build_spec({"profile": "controller-3", "timing": "fast", "faults": ["noop"], "time": 5, "rate": 40,
                       "rto_threshold_s": 3.0, "store": tmp_path / "store"}, check_store=False)
    store = Store(spec.store)
    run = store.new_run(store.new_campaign(), "r1")
    record = RunRecord(spec, run, run.path.parent.parent.name)
    record.summary = {"operations": 10, "by_f": {"send": 4, "poll": 6}}
    record.save()
    stored = read_model(RunJson, run.run_json)
    assert stored.schema_version == SCHEMA_VERSION and stored.spec["profile"] == "controller-3"
    checks = stored.checks
    assert checks.detection_s == systems.failure_detection_s("controller-3", "fast")
    assert checks.failover_window_s == systems.failover_window_s("controller-3", "fast")
    assert (checks.workload, checks.rto_threshold_s, checks.write_rate) == ("queue", 3.0, 16.0)


def test_unknown_fields_are_kept_and_known_ones_typed(tmp_path):
    path = tmp_path / "campaign.json"
    path.write_text(json.dumps({"schema_version": SCHEMA_VERSION, "kind": "campaign", "runs": ["a"],
                                "gates": [{"name": "g", "ok": True}]}))
    campaign = read_model(CampaignJson, path)
    assert campaign.runs == ["a"] and campaign.as_json()["gates"] == [{"name": "g", "ok": True}]
