"""End to end on the local namespace cluster: `chaos run` from deploy to verdict.

Full form (CHAOS_LONG unset or "full"): 60 s queue runs with 15 s fault
intervals. CI's short form (CHAOS_LONG=short): 20 s runs with 5 s intervals.
All runs share one 5-node cluster (created and removed by the fixture) and,
in-process, one Spark session for the checkers.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from harness.run import RunLifecycle, report_renderer
from harness.spec import build_spec
from sut.profiles import PROFILES
from workloads.history import read_events, read_history

SHORT = os.environ.get("CHAOS_LONG") == "short"
DURATION, INTERVAL, RECOVERY = (20, 5, 5) if SHORT else (60, 15, 15)
SAFE_PROFILES = [p for p in ("dledger-3", "controller-3") if p in PROFILES]

pytestmark = [pytest.mark.long, pytest.mark.cluster, pytest.mark.root, pytest.mark.spark]


@pytest.fixture(scope="module")
def cluster(make_cluster):
    inventory, pool = make_cluster(5)
    return inventory


def chaos_run(cluster, store: Path, **values):
    spec = build_spec({"workload": "queue", "time": DURATION, "interval": INTERVAL, "rate": 20, "concurrency": 6,
                       "recovery": RECOVERY, "seed": 20240611, "inventory": cluster.source,
                       "store": store, **values})
    console = Console(stderr=True, force_terminal=False)
    return RunLifecycle(spec, console, show_progress=False).execute()


def acked_and_consumed(run_dir: Path) -> tuple[set, set]:
    events = read_history(run_dir)
    acked = {ev["value"]["id"] for ev in events if ev["f"] == "send" and ev["type"] == "ok"}
    consumed = {m["id"] for ev in events if ev["f"] == "poll" and ev["type"] == "ok" for m in ev["value"]}
    return acked, consumed


def assert_store_layout(run_dir: Path, store: Path, concurrency: int) -> None:
    """Every file of the store layout (docs/history-format.md) that this run produces."""
    campaign = run_dir.parent.parent
    assert (store / "latest").resolve() == campaign.resolve()
    assert (campaign / "campaign.json").is_file()
    run_json = json.loads((run_dir / "run.json").read_text())
    assert run_json["status"] == "complete" and run_json["seed"] == 20240611
    assert run_json["spec"]["profile"] and run_json["inventory"]["nodes"]
    assert {"deploy", "main", "recovery", "final", "collect", "stop", "check"} <= set(run_json["timings"]["phases"])
    assert sorted(p.name for p in (run_dir / "history").glob("*.jsonl")) == \
        [f"worker-{w:03d}.jsonl" for w in range(concurrency)]
    nemesis = read_events(run_dir / "nemesis.jsonl")
    phases = [ev["value"]["phase"] for ev in nemesis]
    assert phases.count("start") >= 1 and phases.count("start") == phases.count("stop")
    assert (run_dir / "journal.jsonl").is_file()
    logs = list((run_dir / "nodes").glob("*/*/*.log"))
    assert logs and all(p.stat().st_size > 0 for p in logs)
    assert (run_dir / "checked").is_dir() and any((run_dir / "checked").iterdir())
    results = json.loads((run_dir / "results.json").read_text())
    assert results["valid"] in (True, False, "unknown") and "queue" in results["checkers"]
    if report_renderer() is not None:
        assert (run_dir / "report" / "index.html").is_file()


@pytest.mark.parametrize("profile", SAFE_PROFILES)
def test_a_queue_run_with_random_kill_on_a_safe_profile_loses_no_acknowledged_message(cluster, tmp_path, profile):
    store = tmp_path / "store"
    # random-kill alone may only ever hit followers; every second window kills the leader.
    outcome = chaos_run(cluster, store, profile=profile, faults=["random-kill", "leader-kill"])
    assert outcome.status == "complete", outcome.error
    assert outcome.valid is True, json.loads((outcome.run.path / "results.json").read_text())
    assert_store_layout(outcome.run.path, store, concurrency=6)
    acked, consumed = acked_and_consumed(outcome.run.path)
    assert len(acked) > DURATION * 5
    assert acked <= consumed
    queue = json.loads((outcome.run.path / "results.json").read_text())["checkers"]["queue"]
    assert queue["counts"]["lost"] == 0 and queue["counts"]["acknowledged"] == len(acked)
    starts = [ev for ev in read_events(outcome.run.path / "nemesis.jsonl") if ev["value"]["phase"] == "start"]
    assert [ev["f"] for ev in starts] == ["random-kill", "leader-kill"] * (len(starts) // 2)
    assert all(ev["value"]["targets"] for ev in starts)


def test_master_kills_on_master_slave_async_may_lose_and_the_history_names_the_messages(cluster, tmp_path):
    store = tmp_path / "store"
    outcome = chaos_run(cluster, store, profile="master-slave-async", faults=["leader-kill"])
    assert outcome.status == "complete", outcome.error
    assert_store_layout(outcome.run.path, store, concurrency=6)
    acked, consumed = acked_and_consumed(outcome.run.path)
    lost_in_history = acked - consumed
    results = json.loads((outcome.run.path / "results.json").read_text())
    queue = results["checkers"]["queue"]
    assert queue["counts"]["lost"] == len(lost_in_history)
    assert {str(m["id"]) for m in queue["lost"]} == {str(i) for i in lost_in_history}
    assert (outcome.valid is False) == bool(lost_in_history) or outcome.valid == "unknown"
    killed = [ev for ev in read_events(outcome.run.path / "nemesis.jsonl") if ev["value"]["phase"] == "start"]
    assert killed and all(ev["value"]["targets"] == ["n1"] for ev in killed if ev["value"]["targets"])


def test_ctrl_c_heals_stops_the_sut_and_keeps_the_history(cluster, tmp_path):
    """SIGINT in the middle of a partition: the CLI heals, stops, keeps what it recorded."""
    store = tmp_path / "store"
    cmd = [str(Path(sys.executable).parent / "chaos"), "run", "--profile", "dledger-3", "--fault", "random-partition",
           "--time", "60", "--interval", "2", "--inventory", str(cluster.source), "--store", str(store),
           "--no-check", "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parent.parent)
    try:
        deadline = time.monotonic() + 120
        nemesis = None
        while time.monotonic() < deadline:  # wait until a partition is on
            found = list(store.glob("*/runs/*/nemesis.jsonl"))
            if found and '"phase":"start"' in found[0].read_text():
                nemesis = found[0]
                break
            time.sleep(0.5)
        assert nemesis is not None, "no fault started"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    run_dir = nemesis.parent
    run_json = json.loads((run_dir / "run.json").read_text())
    assert run_json["status"] == "interrupted"
    assert {"heal", "collect", "stop"} <= set(run_json["timings"]["phases"])
    journal = [json.loads(line) for line in (run_dir / "journal.jsonl").read_text().splitlines()]
    applied = {e["id"] for e in journal if e["event"] == "apply"}
    undone = {e["id"] for e in journal if e["event"] == "undo"}
    assert applied and applied == undone  # every fault action was undone
    assert read_history(run_dir)  # the recorded history is kept
    assert f"store: {run_dir.resolve()}" in out
    assert not sut_processes_under([node.workdir for node in cluster.nodes])


def sut_processes_under(workdirs: list[str]) -> list[str]:
    """Command lines of live processes started from one of these work directories."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        line = b" ".join(argv).decode(errors="replace")
        if " -m sut " in line and any(w in line for w in workdirs):
            found.append(line)
    return found


def test_an_exported_history_imported_again_is_checked_with_the_same_verdict(tmp_path):
    """A broken register history -> EDN -> `chaos import --check`: invalid, exit 1."""
    import asyncio

    from click.testing import CliRunner

    from harness.cli import cli
    from harness.edn import dumps_history
    from support.workloads import Registers, run_workload
    from workloads.base import WorkloadOptions
    from workloads.register import RegisterWorkload

    asyncio.run(run_workload(RegisterWorkload(WorkloadOptions(concurrency=3, keys=2)), Registers(stale=True),
                             tmp_path, duration=0.5, rate=100))
    source = tmp_path / "stale.edn"
    source.write_text(dumps_history(read_history(tmp_path)))
    result = CliRunner().invoke(cli, ["import", str(source), "--store", str(tmp_path / "store"), "--check"])
    assert result.exit_code == 1, result.output
    assert "verdict: INVALID" in result.output.splitlines()  # then the report and serve lines
