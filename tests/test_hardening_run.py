"""run.json statuses, thresholds, atomic store files, the `latest` link and
validation before side effects (no cluster needed: the cluster part of the
lifecycle is replaced where a test is about what happens around it)."""
from __future__ import annotations

import json
import multiprocessing
import os
import signal
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

import harness.run as lifecycle
from records import read_check_inputs
from harness.cli import EXIT_ERROR, cli
from harness.signals import Stopped, stop_reason, stop_signals
from harness.spec import build_spec
from harness.store import Store, write_json


def inventory_file(tmp_path: Path, body: str = "nodes:\n  - {name: n1, host: 127.0.0.1, port: 1}\n") -> Path:
    path = tmp_path / "lab.yaml"
    path.write_text("name: lab\nkind: ssh\nstrict_host_keys: false\n" + body)
    return path


@pytest.fixture
def offline_run(tmp_path, monkeypatch):
    """A RunLifecycle whose cluster part does nothing, with checkers the test supplies."""
    monkeypatch.setattr(lifecycle.RunLifecycle, "_on_cluster", lambda self, inventory: None)
    monkeypatch.setattr(lifecycle, "report_renderer", lambda: None)
    monkeypatch.setenv("CHAOS_HOME", str(tmp_path / "home"))

    def make(check, **values):
        monkeypatch.setattr(lifecycle, "check", check)
        spec = build_spec({"profile": "single-broker", "faults": ["noop"], "time": 5,
                           "inventory": inventory_file(tmp_path), "store": tmp_path / "store", **values})
        return lifecycle.RunLifecycle(spec, Console(stderr=True), show_progress=False)
    return make


def saved(run) -> dict:
    return json.loads(run.run.run_json.read_text())


def test_run_json_says_checking_while_the_checkers_run_and_complete_after(offline_run):
    seen = []

    def check(run_dirs, spark_master=None):
        seen.append(json.loads((run_dirs[0] / "run.json").read_text())["status"])
        return [{"valid": True}]

    run = offline_run(check)
    outcome = run.execute()
    assert seen == ["checking"]
    assert (outcome.status, outcome.valid) == ("complete", True)
    assert saved(run)["status"] == "complete" and saved(run)["valid"] is True


def test_a_checker_crash_is_status_error_with_the_reason_and_no_verdict(offline_run):
    def check(run_dirs, spark_master=None):
        raise RuntimeError("executor lost")

    run = offline_run(check)
    outcome = run.execute()
    record = saved(run)
    assert outcome.status == "error" and record["status"] == "error"
    assert record["error"] == "checkers crashed: RuntimeError: executor lost"
    assert record["valid"] == "unknown"
    assert "executor lost" in (run.run.path / "harness-error.txt").read_text()


def test_a_sigterm_while_checking_is_recorded_as_interrupted_by_sigterm(offline_run):
    def check(run_dirs, spark_master=None):
        raise Stopped(signal.SIGTERM)

    run = offline_run(check)
    outcome = run.execute()
    record = saved(run)
    assert outcome.status == record["status"] == "interrupted"
    assert record["stop_reason"] == "interrupted by SIGTERM"
    assert record["error"] == "interrupted by SIGTERM while checking"


def test_the_run_lease_is_released_however_the_run_ends(offline_run, tmp_path):
    run = offline_run(lambda run_dirs, spark_master=None: [{"valid": False}])
    assert run.execute().valid is False
    assert list((tmp_path / "home" / "runs").glob("*.json")) == []


def test_thresholds_from_the_command_line_reach_the_checkers_through_run_json(offline_run):
    run = offline_run(lambda run_dirs, spark_master=None: [{"valid": True}],
                      rto_threshold_s=2.5, min_availability=0.9)
    run.execute()
    spec = read_check_inputs(run.run.path)
    assert (spec.rto_threshold_s, spec.min_availability) == (2.5, 0.9)


@pytest.mark.parametrize("args,message", [
    (["--rto-threshold", "0"], "--rto-threshold 0.0: Input should be greater than 0"),
    (["--min-availability", "1.5"], "--min-availability 1.5: Input should be less than or equal to 1"),
    (["--nodes", "12"], "--nodes 12: a local cluster has 3 to 9 nodes"),
    (["--fault", "random-kill:signal=9;touch /tmp/x"], "fault random-kill: option signal='9;touch /tmp/x'"),
    (["--fault", "random-kill:signal=STOP"], "is not a signal that ends a process"),
    (["--fault", "random-loss:probability=2"], "probability must be in (0, 1], got 2"),
    (["--fault", "fixed-partition:targets=n7"], "fixed target(s) n7 not in the cluster"),
])
def test_bad_thresholds_node_counts_and_fault_options_fail_before_anything_exists(tmp_path, args, message):
    store = tmp_path / "store"
    result = CliRunner().invoke(cli, ["run", *args, "--store", str(store)])
    assert result.exit_code == EXIT_ERROR, result.output
    assert len(result.output.strip().splitlines()) == 1 and message in result.output, result.output
    assert not store.exists()


@pytest.mark.parametrize("body,message", [
    ("nodes:\n  - {name: n1, host: 'a;b'}\n", "nodes[0].host: Value error, must be an IP address or a DNS host name"),
    ("nodes:\n  - {name: n1, host: 10.0.0.1, workdir: '/tmp/$(id)'}\n", "nodes[0].workdir"),
    ("nodes:\n  - {name: n1, host: 10.0.0.1, user: 'root;id'}\n", "nodes[0].user"),
    ("nodes: [}\n", "invalid YAML"),
    ("nodes:\n  - {name: n1, host: 10.0.0.1}\n  - {name: n2, host: 10.0.0.2}\n  - {name: n3, host: 10.0.0.3}\n"
     "  - {name: n4, host: 10.0.0.4}\n",
     "fixed target(s) n9 not in the cluster (nodes: n1, n2, n3, n4)"),
])
def test_the_inventory_and_fixed_targets_are_checked_before_a_run_directory_exists(tmp_path, body, message):
    store = tmp_path / "store"
    result = CliRunner().invoke(cli, ["run", "--inventory", str(inventory_file(tmp_path, body)),
                                      "--profile", "dledger-3", "--fault", "fixed-kill:targets=n9",
                                      "--store", str(store)])
    assert result.exit_code == EXIT_ERROR, result.output
    assert len(result.output.strip().splitlines()) == 1 and message in result.output, result.output
    assert not store.exists()


def test_latest_only_moves_forward_when_an_older_campaign_writes_later(tmp_path):
    store = Store(tmp_path)
    older, newer = "20260101T000000Z-aaaa", "20260101T000001Z-0000"
    store.new_run(newer, "r")
    store.new_run(older, "r")  # the slower run of two: must not take latest back
    assert (tmp_path / "latest").resolve() == (tmp_path / newer).resolve()


def _new_runs(root: str, count: int) -> None:
    store = Store(root)
    for _ in range(count):
        store.new_run(store.new_campaign(), "r")


def test_runs_racing_on_one_store_leave_latest_on_the_newest_campaign_and_no_temp_files(tmp_path):
    workers = [multiprocessing.Process(target=_new_runs, args=(str(tmp_path), 15)) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert all(worker.exitcode == 0 for worker in workers)
    campaigns = sorted(p.name for p in tmp_path.iterdir() if p.is_dir() and not p.is_symlink())
    assert len(campaigns) == 60
    assert (tmp_path / "latest").resolve() == (tmp_path / campaigns[-1]).resolve()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".latest")] == []


def test_a_reader_never_sees_half_a_store_file_while_writers_replace_it(tmp_path):
    path = tmp_path / "run.json"
    write_json(path, {"n": 0, "pad": "x" * 200_000})
    stop, bad = threading.Event(), []

    def writer(tag: int) -> None:
        for n in range(30):
            write_json(path, {"n": n, "writer": tag, "pad": "x" * 200_000})

    def reader() -> None:
        while not stop.is_set():
            try:
                json.loads(path.read_text())
            except ValueError as error:
                bad.append(error)

    watcher = threading.Thread(target=reader)
    watcher.start()
    writers = [threading.Thread(target=writer, args=(tag,)) for tag in range(3)]
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join()
    stop.set()
    watcher.join()
    assert bad == []
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]  # no temp file left


def test_only_the_first_stop_signal_raises_later_ones_ask_to_wait():
    waits = []
    before = signal.getsignal(signal.SIGINT)  # pytest's default, or Spark's if a session started
    with pytest.raises(Stopped) as stopped:
        with stop_signals(lambda: waits.append("please wait")):
            try:
                os.kill(os.getpid(), signal.SIGTERM)  # the handler runs before the next line
            finally:
                os.kill(os.getpid(), signal.SIGHUP)  # during the clean-up: no second exception
                os.kill(os.getpid(), signal.SIGINT)
    assert stop_reason(stopped.value) == "interrupted by SIGTERM" and waits == ["please wait"] * 2
    assert stop_reason(Stopped(signal.SIGINT)) == stop_reason(KeyboardInterrupt()) == "interrupted by Ctrl-C"
    assert signal.getsignal(signal.SIGINT) is before  # restored


def test_leases_of_live_harnesses_are_left_alone_and_dead_ones_are_handled_once(tmp_path, monkeypatch):
    from harness import stale
    monkeypatch.setenv("CHAOS_HOME", str(tmp_path / "home"))
    ended, running = tmp_path / "ended", tmp_path / "running"
    write_json(ended / "run.json", {"status": "complete", "cluster": {"source": "provisioned"}})
    write_json(running / "run.json", {"status": "running", "cluster": {"source": "provisioned", "name": "run-x"}})
    mine = stale.take_lease(tmp_path / "mine")  # this process is alive: never stale
    dead = multiprocessing.Process(target=lambda: None)
    dead.start()
    dead.join()
    for run_dir in (ended, running):
        write_json(stale.leases_dir() / f"{dead.pid}-{run_dir.name}.json",
                   {"pid": dead.pid, "start": 1, "run_dir": str(run_dir)})
    said: list[str] = []
    lines = stale.clean_up_stale(said.append)
    assert said == lines and len(lines) == 2
    assert any("after the run had ended (complete): nothing to clean up" in line for line in lines)
    assert any(f"run {running}: its harness (pid {dead.pid}) was killed; its cluster run-x was removed" in line
               for line in lines)
    assert json.loads((running / "run.json").read_text())["status"] == "error"
    assert json.loads((ended / "run.json").read_text())["status"] == "complete"
    assert sorted(stale.leases_dir().iterdir()) == [mine]
    assert stale.clean_up_stale(said.append) == []  # handled once
    stale.release_lease(mine)


def test_chaos_up_refuses_a_chaos_home_its_node_paths_could_not_live_under(tmp_path, monkeypatch):
    home = tmp_path / "a b;c"
    monkeypatch.setenv("CHAOS_HOME", str(home))
    result = CliRunner().invoke(cli, ["up", "--name", "never", "--nodes", "3"])
    assert result.exit_code == EXIT_ERROR
    assert result.output.strip().splitlines() == [
        f"Error: CHAOS_HOME {str(home)!r} must be an absolute path of letters, digits and ._+@%=,/- "
        "(the nodes' work directories live under it)"]
    assert not home.exists()


def test_a_run_that_must_bring_up_a_local_cluster_without_root_is_refused_before_anything(tmp_path, monkeypatch):
    monkeypatch.setenv("CHAOS_HOME", str(tmp_path / "home"))  # no default cluster there
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    store = tmp_path / "store"
    result = CliRunner().invoke(cli, ["run", "--store", str(store)])
    assert result.exit_code == EXIT_ERROR
    assert result.output.strip().splitlines() == [
        "Error: cannot bring up a local cluster: root is needed to create network namespaces; run it as root "
        "(e.g. with sudo) (or pass --inventory FILE)"]
    assert not (tmp_path / "home").exists() and not store.exists()
