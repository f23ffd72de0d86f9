"""A state-triggered fault on the model (controller-3), end to end: `chaos run` fires
`master-controller-kill` when the sampled state names a master and a controller leader,
schedule.yaml records the trigger and the instant, and a replay of that schedule fires
at the recorded offset. Short runs without the checkers (the trigger is what is tested).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from harness import schedule as schedule_file
from harness.plan import spec_values
from harness.run import RunLifecycle
from harness.spec import build_spec
from workloads.history import read_events

pytestmark = [pytest.mark.cluster, pytest.mark.root]
SEED = 20261128


@pytest.fixture(scope="module")
def cluster(make_cluster):
    inventory, _ = make_cluster(3)
    return inventory


def run(values: dict, inventory, store: Path):
    spec = build_spec({**values, "inventory": inventory.source, "store": store, "check": False})
    outcome = RunLifecycle(spec, Console(stderr=True, force_terminal=False), show_progress=False).execute()
    assert outcome.status == "complete", outcome.error
    return outcome.run.path


def fired_start(run_dir: Path) -> dict:
    [start] = [ev for ev in read_events(run_dir / "nemesis.jsonl") if ev["value"]["phase"] == "start"]
    return start


def main_start_ns(run_dir: Path) -> float:
    """History time (ns) of the main phase's start, from run.json's timings."""
    timings = json.loads((run_dir / "run.json").read_text())["timings"]
    return (timings["phases"]["main"]["start_s"] - timings["history_origin_s"]) * 1e9


def test_a_triggered_kill_is_recorded_and_its_replay_fires_at_the_recorded_instant(cluster, tmp_path):
    first = run({"profile": "controller-3", "workload": "queue", "faults": ["master-controller-kill"],
                 "time": 14, "interval": 3, "duration": 6, "recovery": 8, "rate": 20, "seed": SEED,
                 "timing": "fast"}, cluster, tmp_path / "store")
    recorded = schedule_file.load(first / schedule_file.FILE_NAME)
    [window] = recorded.windows
    assert window.trigger == "master-and-controller-leader"
    assert isinstance(window.fired_at, float) and window.start <= window.fired_at < window.end
    start = fired_start(first)
    assert start["value"]["fired_at_s"] == window.fired_at and start["value"]["trigger_held"] is True
    assert start["value"]["master"] in start["value"]["targets"]
    assert start["value"]["controller_leader"] in start["value"]["targets"]
    assert {p.split("/")[1].split("-")[0] for p in start["value"]["processes"]} >= {"broker", "controller"}, start

    # The replay fires at the recorded offset of its own main phase, not when the state says so.
    replay = run(spec_values(recorded), cluster, tmp_path / "store")
    again = schedule_file.load(replay / schedule_file.FILE_NAME)
    assert again.windows[0].fired_at == window.fired_at
    replayed = fired_start(replay)
    assert replayed["value"]["fired_at_s"] == window.fired_at
    offset_s = (replayed["time"] - main_start_ns(replay)) / 1e9
    assert abs(offset_s - window.fired_at) < 0.5, (offset_s, window.fired_at)
    assert replayed["value"]["targets"], replayed
