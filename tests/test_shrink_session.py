"""`chaos shrink` around the search: refusals of runs that cannot be shrunk (one line,
nothing started), the record in the store, the page, and a stop that keeps what was found.
The trial here is a fake; tests/test_shrink_cluster.py shrinks a real run."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from rich.console import Console

from harness import schedule as schedule_file
from harness.cli import EXIT_ERROR, cli
from harness.shrink import original as original_run
from harness.shrink.search import Settings, TryResult
from harness.shrink.session import shrink
from support.shrink import LOST, loses_messages, mixed_schedule, stored_run

@pytest.mark.parametrize("kind,message", [
    ("valid", "the run is valid; only a failing (INVALID) run can be shrunk"),
    ("unchecked", "not checked (no results.json)"),
    ("older", "recorded by an older harness (no schedule.yaml)"),
    ("profile", "profile 'controller-gone' no longer exists"),
    ("provisioned", "its nodes are gone (a cluster brought up for the run"),
    ("inventory-gone", "its nodes are gone (inventory /nonexistent/inv.yaml no longer exists)"),
    ("anomaly", "--anomaly non-linearizable: the run shows inconsistent-offsets, lost"),
    ("not-a-run", "not a run directory"),
])
def test_runs_that_cannot_be_shrunk_are_refused_in_one_line(tmp_path, kind, message):
    args = []
    if kind == "valid":
        run = stored_run(tmp_path, results={"valid": True, "checkers": {}})
    elif kind == "unchecked":
        run = stored_run(tmp_path, results=None)
    elif kind == "older":
        run = stored_run(tmp_path, schedule=False)
    elif kind == "profile":
        run = stored_run(tmp_path, profile="controller-gone")
    elif kind == "provisioned":
        run = stored_run(tmp_path, cluster={"source": "provisioned", "name": "run-abc"})
    elif kind == "inventory-gone":
        run = stored_run(tmp_path, cluster={"source": "existing", "file": "/nonexistent/inv.yaml"})
    elif kind == "anomaly":
        run, args = stored_run(tmp_path), ["--anomaly", "non-linearizable"]
    else:
        run = tmp_path
    result = CliRunner().invoke(cli, ["shrink", str(run), *args])
    assert result.exit_code == EXIT_ERROR, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0], result.output
    assert not (run / "shrink").exists()


def test_the_record_the_minimal_schedule_and_the_page(tmp_path):
    original = original_run.load(stored_run(tmp_path))
    assert original.base_values()["op_timeout"] == 2.0 and original.base_values()["check"] is False
    result = shrink(original, Settings(tries=1, confirm=2, max_runs=60), Console(stderr=True),
                    trial=lambda s: TryResult(loses_messages(s), None))
    assert result.outcome.status == "done"
    record = json.loads((result.record_dir / "shrink.json").read_text())
    assert record["status"] == "done" and record["target"] == "lost"
    assert record["attempts"][0]["step"] == "original"
    assert [a["index"] for a in record["attempts"]] == list(range(len(record["attempts"])))
    assert sum(len(a["tries"]) for a in record["attempts"][1:]) == result.outcome.runs == record["runs"]
    assert record["reproduction"] == {"tries": 2, "failed": 2, "rate": 1.0}
    assert "chaos run --schedule" in record["command"] and str(original.inventory) in record["command"]
    minimal = schedule_file.load(result.minimal_file)
    assert [w.name for w in minimal.windows] == ["leader-partition"]
    page = result.page.read_text()
    assert 'data-schedule="original"' in page and 'data-schedule="minimal"' in page
    assert page.count("data-window") == 5 + 1
    assert "1 of 1" not in page and "2 of 2" in page
    assert list((original.store).glob("*-shrink/campaign.json"))


def test_a_stop_keeps_the_best_schedule_so_far_and_says_interrupted(tmp_path):
    original = original_run.load(stored_run(tmp_path))
    calls = []

    def trial(schedule):
        calls.append(schedule)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return TryResult(loses_messages(schedule), None)
    result = shrink(original, Settings(tries=1), Console(stderr=True), trial=trial)
    assert result.outcome.status == "interrupted"
    record = json.loads((result.record_dir / "shrink.json").read_text())
    assert record["status"] == "interrupted"
    kept = schedule_file.load(result.minimal_file)
    assert kept == result.outcome.minimal and len(kept.windows) < 5
    assert result.page.is_file()
