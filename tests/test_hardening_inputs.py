"""The last tracebacks and silent limits: each bad input is one line, exit 2/3, and nothing
is created (no store, no run directory, no `latest` moved)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import EXIT_ERROR, cli

HUGE_INT = "9" * 5000


def one_error_line(result) -> str:
    assert result.exit_code in (2, EXIT_ERROR), result.output
    assert "Traceback" not in result.output and result.exception is None or isinstance(
        result.exception, SystemExit), result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    return lines[0]


@pytest.mark.parametrize("args,message", [
    (["--rate", "1e-300"], "--rate 1e-300: Input should be greater than or equal to 0.001"),
    (["--seed", "-1"], "--seed -1: Input should be greater than or equal to 0"),
    (["--seed", str(10**23)], f"--seed {10**23}: Input should be less than 9223372036854775808"),
    (["--op-timeout", "1e308"], "--op-timeout 1e+308: Input should be less than or equal to 3600"),
    (["--drain-timeout", "1e308"], "--drain-timeout 1e+308: Input should be less than or equal to 86400"),
])
def test_out_of_range_run_options_are_refused_in_one_line_before_the_store_exists(tmp_path, args, message):
    store = tmp_path / "store"
    line = one_error_line(CliRunner().invoke(cli, ["run", "--profile", "single-broker", "--fault", "noop",
                                                   *args, "--store", str(store)]))
    assert message in line, line
    assert not store.exists()


def _schedule_text(windows: int) -> str:
    lines = ["profile: single-broker", "workload: queue", "seed: 1",
             "shape: {time: 1000, recovery: 1, rate: 10, concurrency: 2, queues: 1, keys: 1}", "windows:"]
    lines += [f"- {{fault: noop, start: {i * 0.001:.3f}, length: 0.001}}" for i in range(windows)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("content,message", [
    (b"profile: \xff\xfe\n", "not UTF-8 text (byte 9)"),
    (f"seed: {HUGE_INT}\n".encode(), "a number too long to read"),
    (_schedule_text(11).encode(), "windows: 11 fault windows, more than the 10 one run may have"),
])
def test_unreadable_or_oversized_schedule_files_are_refused_in_one_line(tmp_path, monkeypatch, content, message):
    monkeypatch.setattr("harness.bounds.MAX_FAULT_WINDOWS", 10)  # the real limit's file takes long to write
    schedule, store = tmp_path / "schedule.yaml", tmp_path / "store"
    schedule.write_bytes(content)
    line = one_error_line(CliRunner().invoke(cli, ["run", "--schedule", str(schedule), "--store", str(store)]))
    assert message in line and str(schedule) in line, line
    assert not store.exists()


def test_explicit_windows_count_against_the_window_limit():
    from harness.bounds import run_size_problem
    assert run_size_problem(10, 1000, None, windows=100_000) is None
    assert "100001 fault windows" in run_size_problem(10, 1000, None, windows=100_001)


@pytest.mark.parametrize("content,message", [
    (b"name: \xff\xfe\n", "not UTF-8 text (byte 6)"),
    (f"name: x\nseed: {HUGE_INT}\n".encode(), "a number too long to read"),
])
@pytest.mark.parametrize("command", ["campaign", "inventory"])
def test_unreadable_campaign_and_inventory_files_are_refused_in_one_line(tmp_path, content, message, command):
    path, store = tmp_path / "file.yaml", tmp_path / "store"
    path.write_bytes(content)
    args = ([command, str(path), "--store", str(store)] if command == "campaign" else
            ["run", "--inventory", str(path), "--profile", "single-broker", "--store", str(store)])
    line = one_error_line(CliRunner().invoke(cli, args))
    assert message in line and str(path) in line, line
    assert not store.exists()


def test_a_history_keyed_by_a_map_is_one_unreadable_file_not_a_traceback(tmp_path):
    history = tmp_path / "h.json"
    ops = [{"type": t, "f": "write", "value": 1, "process": 0, "time": i, "key": {"a": 1}}
           for i, t in enumerate(("invoke", "ok"))]
    history.write_text(json.dumps(ops))
    nested = tmp_path / "nested.jsonl"
    nested.write_text("".join(json.dumps({**op, "key": [1, [2, 3]]}) + "\n" for op in ops))
    result = CliRunner().invoke(cli, ["lin", str(history), str(nested)])
    assert result.exit_code == EXIT_ERROR and "Traceback" not in result.output, result.output
    assert "its key holds a map" in result.output and f"{nested}: valid" in result.output


def test_teeth_campaign_names_stay_unique_however_long_the_campaign_name():
    from harness.campaign.model import NAME_PATTERN
    from harness.campaign.teeth import teeth_name
    long = "n" * 64
    names = {teeth_name(long, bug) for bug in ("lost-ack", "stale-read", "skip-fsync")}
    assert len(names) == 3 and all(re.match(NAME_PATTERN, name) for name in names), names
    assert teeth_name("nightly", "lost-ack") == "nightly-teeth-lost-ack"


def test_a_relative_inventory_is_stored_resolved(tmp_path, monkeypatch):
    from harness.spec import build_spec
    (tmp_path / "inv.yaml").write_text("name: x\nnodes:\n  - {name: n1, host: 127.0.0.1}\n")
    monkeypatch.chdir(tmp_path)
    spec = build_spec({"inventory": "inv.yaml", "profile": "single-broker", "faults": ["noop"],
                       "store": str(tmp_path / "store")}, check_store=False)
    assert spec.inventory == tmp_path / "inv.yaml" and spec.inventory.is_absolute()


def test_the_stopped_process_sweep_matches_its_directory_exactly_not_by_prefix(tmp_path):
    import shlex
    import signal
    import subprocess
    import sys
    import time

    from nuclei.process import _RESUME_STOPPED
    workdir, longer = tmp_path / "n1", tmp_path / "n10"
    workdir.mkdir()
    ours = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", f"{workdir}/conf/x.json"])
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", f"{longer}/conf/x.json"])
    try:
        for proc, name in ((ours, "ours.pid"), (stranger, "stranger.pid")):
            (workdir / name).write_text(f"{proc.pid}\n")
            proc.send_signal(signal.SIGSTOP)
        time.sleep(0.2)
        script = _RESUME_STOPPED % {"directory": shlex.quote(str(workdir))}
        resumed = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout
        assert resumed.splitlines() == [f"{ours.pid} {workdir}/ours.pid"]
        assert Path(f"/proc/{stranger.pid}/stat").read_text().rsplit(") ", 1)[1].split()[0] == "T"
    finally:
        for proc in (ours, stranger):
            proc.send_signal(signal.SIGCONT)
            proc.kill()
            proc.wait()
