"""A real shrink: a seeded controller-unclean run with a nameserver kill, a controller
suspend, a broker master partition and packet loss on the controllers loses acknowledged
messages; `chaos shrink` (its search, real runs through the run lifecycle, the Spark
checkers) finds that the master partition alone, longer than failure detection, still
loses them. The candidates replay their schedules: faults start at the scheduled offsets.

CI's short form (CHAOS_LONG=short) uses `--timing fast` and one try per candidate with a
budget of two runs, which covers the window search here; one 5-node cluster serves every run.
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

import nuclei
from harness import schedule as schedule_file
from harness.plan import spec_values
from harness.run import RunLifecycle, check
from harness.shrink import original as original_run
from harness.shrink.search import Settings
from harness.shrink.session import shrink
from harness.spec import build_spec
from sut.systems import failure_detection_s
from support.stores import stored as store_file

SHORT = os.environ.get("CHAOS_LONG") == "short"
TIMING = "fast" if SHORT else "default"
SCALE = 1 if SHORT else 10
DETECTION = failure_detection_s("controller-unclean", TIMING)
W = schedule_file.FaultWindow
# The partition comes first in time, so that ddmin's first half holds it: two candidate
# runs find it (the window search itself is covered in tests/test_shrink_search.py).
MIXED = schedule_file.Schedule(
    profile="controller-unclean", workload="queue", seed=21, timing=TIMING,
    shape=schedule_file.Shape(time=11 * SCALE, recovery=3.5 * SCALE, rate=100, concurrency=6, queues=2, keys=3),
    windows=(
        W(fault="leader-partition", targets=("brokers",), start=1 * SCALE, length=3.5 * SCALE),
        W(fault="random-kill", targets=("nameservers",), start=5 * SCALE, length=1.5 * SCALE),
        W(fault="leader-suspend", targets=("controllers",), start=7 * SCALE, length=1 * SCALE),
        W(fault="random-loss:probability=0.3", targets=("controllers",), start=8.5 * SCALE, length=2 * SCALE),
    ))
SETTINGS = Settings(tries=1, max_runs=2, confirm=0) if SHORT else Settings()

pytestmark = [pytest.mark.long, pytest.mark.cluster, pytest.mark.root, pytest.mark.spark]
CHAOS = str(Path(sys.executable).parent / "chaos")
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def inventory(make_cluster):
    """One 5-node cluster for every run of this module."""
    return make_cluster(5)[0]


def lost(run_dir) -> int:
    results = json.loads((run_dir / "results.json").read_text())
    return results["checkers"]["queue"]["counts"].get("lost", 0)


def test_ctrl_c_during_a_shrink_heals_the_nodes_and_keeps_the_best_schedule(inventory, tmp_path):
    """A stored INVALID run (its results written here: what matters is the shrink, not
    the verdict) whose candidates run for real; SIGINT once the first try's fault is on."""
    run = tmp_path / "store" / "20260101T000000Z-aaaa" / "runs" / "stored"
    (run / "history").mkdir(parents=True)
    stored = MIXED.replace(windows=[w.model_dump() for w in MIXED.windows[:2]], shape={"time": 30 * SCALE})
    schedule_file.save(run / "schedule.yaml", stored)
    (run / "run.json").write_text(json.dumps(store_file({
        "kind": "run", "spec": {"profile": stored.profile},
        "cluster": {"source": "inventory", "file": str(inventory.source)}})))
    (run / "results.json").write_text(json.dumps(store_file({"valid": False, "checkers": {"queue": {
        "valid": False, "counts": {"lost": 3}}}})))
    proc = subprocess.Popen([CHAOS, "shrink", str(run), "--tries", "1"], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        nemesis = tmp_path / "store"
        while not any('"phase":"start"' in f.read_text() for f in nemesis.glob("*-shrink/runs/try-001/nemesis.jsonl")):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out + err
    (try_dir,) = nemesis.glob("*-shrink/runs/try-001")
    record = json.loads((try_dir / "run.json").read_text())
    assert record["status"] == "interrupted" and "heal" in record["timings"]["phases"], record
    assert nuclei.Journal(try_dir / "journal.jsonl").pending() == []
    shrink_record = json.loads((run / "shrink" / "shrink.json").read_text())
    assert shrink_record["status"] == "interrupted"
    assert schedule_file.load(run / "shrink" / "minimal.yaml") == stored
    assert "reproduction:" in out and (run / "shrink" / "index.html").is_file()


def test_a_mixed_failing_run_shrinks_to_one_master_partition_that_still_loses_messages(inventory, tmp_path):
    spec = build_spec({**spec_values(MIXED), "inventory": inventory.source, "store": tmp_path,
                       "check": False})
    outcome = RunLifecycle(spec, Console(stderr=True), show_progress=False).execute()
    assert outcome.status == "complete", outcome.error
    assert schedule_file.load(outcome.run.path / "schedule.yaml") == MIXED
    check([outcome.run.path])
    assert lost(outcome.run.path) > 0, "the mixed schedule did not lose messages"

    original = original_run.load(outcome.run.path)
    result = shrink(original, SETTINGS, Console(stderr=True), log=print)
    minimal = result.outcome.minimal
    assert [(w.fault, w.targets) for w in minimal.windows] == [("leader-partition", ("brokers",))]
    assert minimal.windows[0].length > DETECTION
    assert result.outcome.minimal_failed >= 1

    record = json.loads((result.record_dir / "shrink.json").read_text())
    failing = [t["run"] for a in record["attempts"][1:] if a["failing"]
               and len(a["windows"]) == 1 for t in a["tries"] if t["same_failure"]]
    assert failing, record["attempts"]
    run_dir = Path(failing[-1])
    assert lost(run_dir) > 0
    # the candidate replayed its schedule: the partition started at its offset
    replayed = schedule_file.load(run_dir / "schedule.yaml")
    assert [w.fault for w in replayed.windows] == ["leader-partition"]
    origin = json.loads((run_dir / "run.json").read_text())
    nemesis = [json.loads(line) for line in (run_dir / "nemesis.jsonl").read_text().splitlines() if line.strip()]
    starts = [e for e in nemesis if e["value"]["phase"] == "start"]
    assert [e["f"] for e in starts] == ["leader-partition"] and not starts[0].get("error")
    assert origin["plan"]["faults"][0]["offset_s"] == replayed.windows[0].start
    assert result.page.is_file() and "data-schedule=\"minimal\"" in result.page.read_text()
    assert "chaos run --schedule" in result.command
