"""What `chaos gc` and a second `chaos shrink` must keep: every failing, stopped or running
run, every reproducer, and nothing written outside the store."""
from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from harness.cli import cli
from support.shrink import stored_run
from support.stores import make_campaign, results, stored

RUN = "dledger-3-queue-leader-kill-r1"


def adhoc(store: Path, day: int, status: str = "complete", valid=True, kind: str = "ad-hoc") -> Path:
    path = make_campaign(store, f"202401{day:02d}T000000Z-bbbb", [
        {"profile": "dledger-3", "fault": "leader-kill", "status": status, "results": results(valid)}])
    meta = json.loads((path / "campaign.json").read_text())
    (path / "campaign.json").write_text(json.dumps({**meta, "kind": kind, "status": None}))
    return path


def gc(store: Path, *extra: str):
    result = CliRunner().invoke(cli, ["gc", "--keep-nights", "1", "--store", str(store), *extra])
    assert result.exit_code == 0, result.output
    return result


def test_gc_with_include_runs_keeps_invalid_interrupted_and_running_runs_whole(tmp_path):
    kept = [adhoc(tmp_path, 2, valid=False), adhoc(tmp_path, 3, status="interrupted", valid="unknown"),
            adhoc(tmp_path, 4, status="running", valid="unknown"), adhoc(tmp_path, 5, valid=False, kind="shrink")]
    passing = adhoc(tmp_path, 1)
    adhoc(tmp_path, 9)                                     # the newest: kept anyway
    result = gc(tmp_path, "--include-runs")
    for path in kept:
        assert (path / "runs" / RUN / "history").is_dir(), result.output
    assert "is invalid: kept as evidence" in result.output and "is running" in result.output
    assert not (passing / "runs" / RUN / "history").exists()


def test_gc_of_a_passing_campaign_keeps_the_reproducers_of_its_expected_invalid_runs(tmp_path):
    old = make_campaign(tmp_path, "20240101T000000Z-aaaa-nightly", [
        {"profile": "controller-unclean", "fault": "leader-kill", "results": results(False, lost=2)}])
    run = old / "runs" / "controller-unclean-queue-leader-kill-r1"
    (run / "schedule.yaml").write_text("windows: []\n")
    for record in ("shrink", "shrink-1"):
        (run / record).mkdir()
        (run / record / "minimal.yaml").write_text("windows: []\n")
        (run / record / "index.html").write_text("<html></html>\n")
    make_campaign(tmp_path, "20240102T000000Z-aaaa-nightly", [{"profile": "dledger-3", "fault": "leader-kill",
                                                               "results": results(True)}])
    result = gc(tmp_path)
    assert "prune  20240101T000000Z-aaaa-nightly" in result.output
    assert not (run / "history").exists()
    assert (run / "schedule.yaml").is_file()
    assert (run / "shrink" / "minimal.yaml").is_file() and (run / "shrink-1" / "index.html").is_file()


def test_gc_replaces_a_dangling_gc_marker_link_instead_of_writing_through_it(tmp_path):
    store, outside = tmp_path / "store", tmp_path / "outside"
    outside.mkdir()
    old = make_campaign(store, "20240101T000000Z-aaaa-nightly", [
        {"profile": "dledger-3", "fault": "leader-kill", "results": results(True)}])
    make_campaign(store, "20240102T000000Z-aaaa-nightly", [
        {"profile": "dledger-3", "fault": "leader-kill", "results": results(True)}])
    (old / "gc.txt").symlink_to(outside / "planted.txt")
    result = gc(store)
    assert "prune  20240101T000000Z-aaaa-nightly" in result.output
    assert list(outside.iterdir()) == []
    assert (old / "gc.txt").is_file() and not (old / "gc.txt").is_symlink()
    assert "pruned 20240101T000000Z-aaaa-nightly: already" in gc(store).output


def test_a_second_shrink_keeps_the_first_result_numbered_also_when_stopped_before_its_first_trial(tmp_path):
    from rich.console import Console

    from harness import schedule as schedule_file
    from harness.shrink import original as original_run
    from harness.shrink.search import Settings, TryResult
    from harness.shrink.session import shrink
    from support.shrink import loses_messages

    run = stored_run(tmp_path)
    first = shrink(original_run.load(run), Settings(tries=1), Console(stderr=True),
                   trial=lambda s: TryResult(loses_messages(s), None))
    found = schedule_file.load(first.minimal_file)
    assert len(found.windows) < len(schedule_file.load(run / "schedule.yaml").windows)

    def stopped(schedule):
        raise KeyboardInterrupt
    for number in (1, 2):
        second = shrink(original_run.load(run), Settings(tries=1), Console(stderr=True), trial=stopped)
        assert second.outcome.status == "interrupted"
        status = json.loads((run / f"shrink-{number}" / "shrink.json").read_text())["status"]
        assert (status == "interrupted") == (number == 2)
    assert schedule_file.load(run / "shrink-1" / "minimal.yaml") == found
    assert (run / "shrink-1" / "index.html").is_file() and not (run / "shrink-3").exists()


def test_shrinking_a_run_of_a_throwaway_cluster_brings_up_one_of_its_size_and_takes_it_down(tmp_path, monkeypatch):
    import contextlib

    from support.shrink import loses_messages
    from harness.shrink.search import TryResult

    run = stored_run(tmp_path, cluster={"source": "provisioned", "provider": "netns", "name": "run-abc", "nodes": 4})
    clusters, used = [], set()
    throwaway = tmp_path / "throwaway.yaml"

    @contextlib.contextmanager
    def nodes_for(inventory_file, nodes, provider, say):
        clusters.append(["up", inventory_file, nodes, provider])
        throwaway.write_text("name: shr\n")
        try:
            yield throwaway
        finally:
            clusters.append(["down"])

    class Trials:
        def __init__(self, base_values, campaign_id, console, log):
            self.inventory = base_values["inventory"]

        def __call__(self, schedule):
            used.add(self.inventory)
            return TryResult(loses_messages(schedule), None)
    monkeypatch.setattr("harness.shrink.campaign.nodes_for", nodes_for)
    monkeypatch.setattr("harness.shrink.trials.LifecycleTrials", Trials)
    monkeypatch.setattr("inventory.netns.check_can_provision", lambda name, nodes: None)
    result = CliRunner().invoke(cli, ["shrink", str(run), "--tries", "1", "--confirm", "1"])
    assert result.exit_code == 0, result.output
    assert clusters == [["up", None, 4, "netns"], ["down"]] and used == {throwaway}
    assert "--nodes 4" in result.output and str(throwaway) not in result.output.split("replay:")[1]
