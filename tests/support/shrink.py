"""Schedules for the shrink tests: a mixed controller-unclean schedule and a model of
which schedules lose messages (a broker master partition longer than failure detection)."""
from __future__ import annotations

import json
from pathlib import Path

from harness import schedule as schedule_file
from harness.schedule import FaultWindow, Schedule, Shape
from support.stores import stored

DETECTION = 1.5


def mixed_schedule() -> Schedule:
    windows = [
        FaultWindow(fault="random-kill", targets=("nameservers",), start=2, length=3, seed=1),
        FaultWindow(fault="leader-suspend", targets=("controllers",), start=7, length=2, seed=2),
        FaultWindow(fault="leader-partition", targets=("brokers",), start=11, length=6, seed=3),
        FaultWindow(fault="random-loss:probability=0.2", start=19, length=3, seed=4),
        FaultWindow(fault="random-kill", targets=("controllers",), start=24, length=3, seed=5),
    ]
    return Schedule(profile="controller-unclean", workload="queue", seed=7, timing="fast",
                    shape=Shape(time=30, recovery=4, rate=100, concurrency=10, queues=4, keys=3),
                    windows=windows)


def loses_messages(schedule: Schedule) -> frozenset[str]:
    """A model of controller-unclean: a broker master partition longer than failure
    detection loses messages, whatever else happens; at least two clients are needed."""
    partitions = [w for w in schedule.windows if w.name == "leader-partition" and w.length > DETECTION]
    return frozenset({"lost"}) if partitions and schedule.shape.concurrency >= 2 else frozenset()


LOST = {"valid": False, "checkers": {"queue": {"valid": False, "counts": {"lost": 12, "inconsistent_offsets": 3}}}}


def stored_run(tmp_path: Path, results=LOST, cluster=None, schedule=True, profile=None) -> Path:
    """A stored run of the mixed schedule as `chaos shrink` finds it: run.json, schedule.yaml, results.json."""
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text("name: x\n")
    run = tmp_path / "store" / "20260101T000000Z-abcd" / "runs" / "controller-unclean-queue-mixed"
    (run / "history").mkdir(parents=True)
    plan = mixed_schedule()
    if profile:
        plan = plan.model_copy(update={"profile": profile})
    record = {"kind": "run", "spec": {"profile": plan.profile, "op_timeout": 2.0, "targets": []},
              "cluster": cluster or {"source": "inventory", "file": str(inventory)}}
    (run / "run.json").write_text(json.dumps(stored(record)))
    if schedule:
        (run / "schedule.yaml").write_text(schedule_file.dump(plan))
    if results is not None:
        (run / "results.json").write_text(json.dumps(stored(results)))
    return run
