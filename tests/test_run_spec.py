"""Bad input to `chaos run` fails at once, in one line, before anything starts."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from harness.cli import EXIT_ERROR, cli
from harness.plan import fault_schedule, plan_summary
from harness.spec import RunSpec, SpecError, build_spec


def run_cli(*args: str):
    return CliRunner().invoke(cli, ["run", *args])


@pytest.mark.parametrize("args,message", [
    (["--profile", "nope"], "--profile: unknown profile 'nope'; known: "),
    (["--workload", "bank"], "--workload: unknown workload 'bank'; known: delayed, group, log, ordered, queue, register, transactional"),
    (["--fault", "random-kill", "--fault", "meteor"], "unknown fault 'meteor'"),
    (["--fault", "random-loss:colour=red"], "fault random-loss: unknown option(s) colour"),
    (["--time", "20", "--interval", "15"], "--time 20s is shorter than one fault interval"),
    (["--time", "-1"], "--time -1.0: Input should be greater than 0"),
    (["--concurrency", "1"], "workload queue needs --concurrency of at least 2"),
    (["--workload", "register", "--profile", "master-slave-sync"],
     "workload register needs a profile with a Raft key-value store"),
    (["--nodes", "3", "--profile", "dledger-3"], "--nodes 3: profile dledger-3 needs 4 nodes"),
    (["--workload", "register", "--profile", "dledger-3", "--mix", "read=1,fly=2"], "unknown operation(s) fly"),
    (["--mix", "send"], "--mix send: expected op=weight pairs"),
    (["--workload", "log", "--ordered"], "--ordered applies to the queue workload, not log"),
    (["--target", "routers"], "unknown role(s) routers"),
    (["--overlap", "meteor"], "--overlap: unknown fault 'meteor'"),
    (["--inventory", "/nonexistent/inv.yaml"], "inventory file /nonexistent/inv.yaml does not exist"),
])
def test_bad_options_are_one_line_errors_and_nothing_starts(tmp_path, args, message):
    store = tmp_path / "store"
    result = run_cli(*args, "--store", str(store))
    assert result.exit_code == EXIT_ERROR, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    assert message in lines[0]
    assert "Traceback" not in result.output
    assert not store.exists()  # nothing was created, let alone deployed


def test_an_unwritable_store_is_a_one_line_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    result = run_cli("--store", str(blocker / "store"))
    assert result.exit_code == EXIT_ERROR
    assert result.output.strip().splitlines() == [
        f"Error: --store: store {blocker / 'store'}: cannot create directory: Not a directory"]


def test_noop_needs_no_fault_interval():
    spec = build_spec({"fault": None, "faults": ["noop"], "time": 5, "interval": 15}, check_store=False)
    assert not spec.has_faults and plan_summary(spec)["faults"] == []


def test_chaos_run_schedules_overlap_faults_inside_every_window_of_the_main_ones(tmp_path):
    result = run_cli("-f", "noop", "--overlap", "random-kill", "-t", "30", "-i", "5", "--seed", "3", "--dry-run",
                     "--store", str(tmp_path / "s"))
    assert result.exit_code == 0, result.output
    lines = [line.split() for line in result.output.splitlines() if "(window" in line]
    assert [words[2] for words in lines if words[1] == "start"] == ["noop", "random-kill"] * 3, result.output


def test_faults_overlapping_noop_windows_are_scheduled_inside_them():
    spec = build_spec({"fault": None, "faults": ["noop"], "overlap": ["random-kill"], "time": 20, "interval": 5,
                       "seed": 3}, check_store=False)
    events = fault_schedule(spec)
    assert spec.has_faults and {e.fault.name for e in events} == {"noop", "random-kill"}
    for kill in (e for e in events if e.fault.name == "random-kill"):
        window = next(e for e in events if e.fault.name == "noop" and e.window == kill.window and e.phase == kill.phase)
        assert (kill.offset > window.offset) if kill.phase == "start" else (kill.offset < window.offset)


def test_the_same_seed_gives_the_same_operation_and_fault_schedules():
    values = {"seed": 1234, "time": 40, "interval": 5, "faults": ["random-kill", "random-partition"]}
    a, b = (plan_summary(build_spec(values, check_store=False)) for _ in range(2))
    assert a == b and a["operations"] > 0 and len(a["faults"]) >= 4
    other = plan_summary(build_spec(dict(values, seed=1235), check_store=False))
    assert other["operations_digest"] != a["operations_digest"]
    assert other["faults"] != a["faults"]


def test_dry_run_prints_the_schedules_and_repeats_them_for_the_same_seed(tmp_path):
    args = ["--seed", "99", "--time", "30", "--interval", "5", "--dry-run", "--store", str(tmp_path / "s")]
    first, second = run_cli(*args), run_cli(*args)
    assert first.exit_code == 0, first.output
    assert first.output == second.output
    assert "digest" in first.output and "start  random-kill" in first.output
    assert not (tmp_path / "s").exists()


def test_spec_defaults_are_valid_and_seed_is_drawn_and_recorded():
    spec = RunSpec()
    assert spec.profile and spec.seed >= 0
    with pytest.raises(SpecError):
        build_spec({"concurrency": 0}, check_store=False)


def test_an_unreachable_node_ends_the_run_with_one_line_and_a_record(tmp_path):
    inventory = tmp_path / "lab.yaml"
    inventory.write_text("name: lab\nkind: ssh\nstrict_host_keys: false\n"
                         "nodes:\n  - {name: n1, host: 127.0.0.2, port: 1}\n")
    result = CliRunner().invoke(cli, ["run", "--profile", "single-broker", "--fault", "noop", "--time", "5",
                                      "--inventory", str(inventory), "--store", str(tmp_path / "store"),
                                      "--quiet"])
    assert result.exit_code == EXIT_ERROR, result.output
    assert "Traceback" not in result.output
    error_lines = [line for line in result.output.splitlines() if line.startswith("run error:")]
    assert len(error_lines) == 1 and "n1" in error_lines[0]
    run_json = json.loads(next((tmp_path / "store").glob("*/runs/*/run.json")).read_text())
    assert run_json["status"] == "error" and "n1" in run_json["error"]
