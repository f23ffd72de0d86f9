"""`chaos teeth` and `--bug` without a cluster: which cells can expose each bug, what a
campaign lacks, and unknown bug names refused before anything starts."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.campaign import load_campaign
from harness.campaign import teeth
from harness.campaign.teeth import NOT_EXERCISABLE, BugVerdict, bug_campaign, cells, score
from harness.cli import cli
from sut import bugs
from sut.profiles import FAULT_FAMILIES, PROFILES, render

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ROOT / "campaigns" / "smoke.yaml"
NIGHTLY = ROOT / "campaigns" / "nightly.yaml"


def test_the_library_holds_at_least_eight_documented_bugs_over_every_part_of_the_sut():
    assert len(bugs.BUGS) >= 8
    modes = {m for bug in bugs.BUGS.values() for m in bug.modes}
    assert {"dledger", "controller", "single"} <= modes
    for bug in bugs.BUGS.values():
        assert bug.source and bug.anomaly and bug.description
        assert set(bug.families) <= set(FAULT_FAMILIES) and bug.families
        assert any(p.mode in bug.modes and p.expected_safe for p in PROFILES.values()), bug.name


def test_render_writes_a_bug_only_into_the_roles_that_carry_it():
    procs = render(PROFILES["controller-3"], ["h"] * 3, ["/w"] * 3, bugs=("read-beyond-confirm-offset",))
    by_role = {p.role: p.config.get("bugs") for p in procs}
    assert by_role == {"namesrv": None, "controller": None, "broker": ["read-beyond-confirm-offset"]}


def test_smoke_can_expose_every_bug_but_the_ring_and_crash_ones_and_says_what_they_need():
    smoke = load_campaign(SMOKE)
    assert cells(smoke, "raft-commit-without-quorum") == (["dledger-3"], ["leader-partition"], None)
    # the expected-unsafe controller-unclean is no place to look for a bug
    assert cells(smoke, "read-beyond-confirm-offset")[0] == ["controller-3"]
    assert cells(smoke, "sync-flush-without-fsync")[2] == ("an expected-safe profile of mode single and a fault "
                                                           "of family crash")
    assert cells(smoke, "raft-commit-prior-term")[2] == "a fault of partition-majorities-ring or figure-8-partition"
    restricted = bug_campaign(smoke, "raft-commit-without-quorum")
    assert restricted.bugs == ("raft-commit-without-quorum",) and restricted.profiles == ("dledger-3",)
    assert bug_campaign(smoke, "sync-flush-without-fsync") is None


def test_the_nightly_campaign_can_exercise_every_bug_of_the_library():
    nightly = load_campaign(NIGHTLY)
    assert {name: cells(nightly, name)[2] for name in bugs.known()} == dict.fromkeys(bugs.known())


def test_dry_run_lists_each_bugs_runs_and_exits_1_when_a_bug_is_not_exercisable(tmp_path):
    import json
    store = tmp_path / "store"
    nightly = CliRunner().invoke(cli, ["teeth", str(NIGHTLY), "--dry-run", "--json", "--store", str(store)])
    assert nightly.exit_code == 0, nightly.output
    shown = {b["bug"]: b for b in json.loads(nightly.output)["bugs"]}
    assert sorted(shown) == bugs.known() and all(b["exercisable"] and b["runs"] for b in shown.values())
    assert all("partition-majorities-ring" in run or "figure-8-partition" in run
               for run in shown["raft-commit-prior-term"]["runs"])
    assert any("figure-8-partition" in run for run in shown["raft-commit-prior-term"]["runs"])
    smoke = CliRunner().invoke(cli, ["teeth", str(SMOKE), "--dry-run", "--store", str(store)])
    assert smoke.exit_code == 1, smoke.output
    assert "raft-commit-without-quorum: 1 run on dledger-3 x leader-partition" in smoke.output
    assert "sync-flush-without-fsync: not exercisable (needs an expected-safe profile" in smoke.output
    assert not store.exists()


def test_the_score_counts_only_exercisable_bugs():
    verdicts = [BugVerdict("a", "caught"), BugVerdict("b", "missed"), BugVerdict("c", NOT_EXERCISABLE)]
    assert score(verdicts) == (1, 2)


@pytest.mark.parametrize("command", [
    ["run", "--profile", "dledger-3", "--bug", "raft-forgets-everything"],
    ["teeth", str(SMOKE), "--bug", "raft-forgets-everything"],
])
def test_an_unknown_bug_is_refused_in_one_line_before_anything_starts(tmp_path, command):
    store = tmp_path / "store"
    result = CliRunner().invoke(cli, [*command, "--store", str(store)])
    assert result.exit_code == 3, result.output
    line = next(x for x in result.output.splitlines() if "unknown bug" in x)
    assert "'raft-forgets-everything'; known: " + ", ".join(bugs.known()) in line
    assert "Traceback" not in result.output and not store.exists()


def test_a_sut_process_refuses_an_unknown_bug_in_its_config(tmp_path):
    import json
    import subprocess
    import sys
    config = tmp_path / "namesrv.json"
    config.write_text(json.dumps({"port": 1, "host": "127.0.0.1", "data_dir": str(tmp_path / "d"),
                                  "bugs": ["nope"]}))
    done = subprocess.run([sys.executable, "-m", "sut", "namesrv", "--config", str(config)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "unknown bug 'nope'" in done.stderr


def test_the_crash_file_system_reports_unsynced_bytes_per_directory_and_crashes_look_at_the_logs(tmp_path):
    import os
    from faults.crash import unsynced_log_bytes
    from nuclei.lazyfs_node import CrashState
    state = CrashState(str(tmp_path / "state"))
    for name, data in (("commitlog", b"acknowledged"), ("consumequeue", b"index")):
        os.makedirs(state.path(name))
        live = os.path.join(state.path(name), "0")
        fd = os.open(live, os.O_RDWR | os.O_CREAT, 0o644)
        os.pwrite(fd, data, 0)
        state.wrote(state.fid(live, new=True), 0, len(data))
        os.close(fd)
    status = state.status()
    assert status["unsynced_by_dir"] == {"commitlog": 12, "consumequeue": 5}
    assert unsynced_log_bytes(status) == 12
    assert unsynced_log_bytes({**status, "unsynced_by_dir": {"consumequeue": 5}}) == 0
    assert unsynced_log_bytes({"unsynced_bytes": 7}) == 7   # an older node program: every file


# -- what catches a bug: a safety anomaly, in a run whose control is valid --------------------

def results_with(queue_counts=None, **sections) -> dict:
    return {"queue": {"valid": True, "counts": queue_counts or {}}, **sections}


def test_only_safety_anomalies_can_catch_a_bug_never_recovery_time_or_duplicates():
    slow = results_with({"duplicated": 4, "lost": 0}, rto={"valid": False, "problems": ["not recovered"]},
                        perf={"valid": False})
    assert teeth.safety_anomalies(slow) == []
    unsafe = results_with({"lost": 2, "lost_after_consume": 1, "inconsistent_offsets": 3},
                          linearizable={"valid": False}, order={"valid": False},
                          invariants={"safety_breaches": 1, "anomalies": [{"kind": "raft-commit-index-back",
                                                                            "safety": True}]})
    assert teeth.safety_anomalies(unsafe) == [
        "queue: 2 lost", "queue: 1 lost_after_consume", "queue: 3 inconsistent_offsets", "linearizable: invalid",
        "order: invalid", "invariants: 1 breach(es) raft-commit-index-back"]



def test_a_consumer_groups_skipped_or_lost_deliveries_catch_a_bug_but_its_duplicates_do_not():
    group = results_with({}, group={"valid": False, "counts": {"skip": 3, "lost": 1, "order": 0, "duplicates": 9,
                                                                "offset_rollback": 2}})
    assert teeth.safety_anomalies(group) == ["group: 1 lost", "group: 3 skip"]
    duplicates_only = results_with({}, group={"valid": True, "counts": {"duplicates": 9, "offset_rollback": 2}})
    assert teeth.safety_anomalies(duplicates_only) == []

def run(run_id, valid, *safety, status="complete"):
    return teeth.RunResult(run_id, status, valid, tuple(safety))


def test_a_bug_is_caught_only_where_its_control_run_is_valid():
    bug_runs = {"a": run("a", False, "queue: 1 lost"), "b": run("b", False, "queue: 2 lost")}
    verdict = teeth.verdict_of("x", bug_runs, {"a": run("a", True), "b": run("b", False, "queue: 2 lost")})
    assert verdict.status == teeth.CAUGHT and [c["run_id"] for c in verdict.caught_by] == ["a"]
    assert verdict.control_valid is False and [u["run_id"] for u in verdict.unsafe_without_control] == ["b"]


def test_a_bug_whose_every_catch_has_an_invalid_or_unknown_control_is_not_caught():
    bug_runs = {"a": run("a", False, "queue: 1 lost"), "b": run("b", False, "queue: 1 lost")}
    verdict = teeth.verdict_of("x", bug_runs, {"a": run("a", False, "queue: 1 lost"), "b": run("b", "unknown")})
    assert verdict.status == teeth.CONTROL_INVALID and verdict.caught_by == []
    assert teeth.score([verdict]) == (0, 1)


def test_an_invalid_run_without_a_safety_anomaly_is_missed_not_caught():
    verdict = teeth.verdict_of("x", {"a": run("a", False)}, {"a": run("a", True)})
    assert (verdict.status, verdict.control_valid) == (teeth.MISSED, True)


def test_runs_without_results_make_the_verdict_an_error():
    verdict = teeth.verdict_of("x", {"a": run("a", "unknown", status="missing results")}, {"a": run("a", True)})
    assert verdict.status == teeth.ERROR and "a: missing results" in verdict.error


def test_the_control_has_the_bugs_cells_and_seeds_without_the_bug(tmp_path):
    from harness.campaign.plan import plan
    restricted = bug_campaign(load_campaign(SMOKE), "raft-commit-without-quorum")
    control = teeth.control_campaign(restricted)
    assert control.bugs == () and (control.profiles, control.faults) == (restricted.profiles, restricted.faults)
    with_bug, without = plan(restricted, store=tmp_path).runs, plan(control, store=tmp_path).runs
    assert [(r.run_id, r.seed) for r in with_bug] == [(r.run_id, r.seed) for r in without]


def test_a_campaign_that_can_exercise_no_bug_is_refused_in_one_line(tmp_path):
    store = tmp_path / "store"
    result = CliRunner().invoke(cli, ["teeth", str(SMOKE), "--bug", "sync-flush-without-fsync",
                                      "--store", str(store)])
    assert result.exit_code != 0 and "can exercise none of the 1 bug(s) sync-flush-without-fsync" in result.output
    assert len(result.output.strip().splitlines()) == 1 and not list(store.glob("*/campaign.json"))


def test_teeth_exits_0_only_when_a_bug_was_exercised_and_every_exercised_one_caught():
    from harness.commands.teeth import exit_code
    assert exit_code([BugVerdict("a", teeth.CAUGHT), BugVerdict("c", NOT_EXERCISABLE)]) == 0
    assert exit_code([BugVerdict("c", NOT_EXERCISABLE)]) == 1
    assert exit_code([BugVerdict("a", teeth.CAUGHT), BugVerdict("b", teeth.CONTROL_INVALID)]) == 1
