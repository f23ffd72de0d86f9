"""A run's plan, a pure function of its spec: the operations, the fault schedule, their
digests, and the schedule file (harness/schedule.py) it is written as and replayed from.

What `chaos run --dry-run` shows, what run.json and schedule.yaml record, and what
`chaos shrink` and the campaign planner compute, without a cluster: the same seed
gives the same plan.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Iterable

import workloads
from faults.schedule import FaultSpec, ScheduledEvent, ScheduleSpec, plan
from harness.schedule import FaultWindow, Schedule, Shape
from harness.spec import RunSpec
from workloads.base import Workload
from workloads.generator import GeneratorSpec, LazyPlan, PlannedOp


def make_workload(spec: RunSpec) -> Workload:
    return workloads.get(spec.workload)(spec.workload_options())


def fault_schedule(spec: RunSpec, fault_specs: list[FaultSpec] | None = None) -> list[ScheduledEvent]:
    """The fault schedule of the run: a pure function of (seed, spec)."""
    if spec.windows is not None:
        return window_events(spec.windows, spec.seed)
    specs = fault_specs or [FaultSpec.parse(text) for text in spec.faults]
    schedule = ScheduleSpec(faults=specs, interval=spec.interval, duration=spec.duration,
                                   overlap=[FaultSpec.parse(text) for text in spec.overlap])
    return plan(spec.seed, schedule, spec.time) if spec.has_faults else []


def operation_plan(spec: RunSpec, workload: Workload | None = None) -> LazyPlan:
    """The workload runs through the faults (--time) and the recovery after them; the plan
    is generated as it is used (run.Plan.ops holds no list)."""
    workload = workload or make_workload(spec)
    return LazyPlan(GeneratorSpec(seed=spec.seed, rate=spec.rate, concurrency=spec.concurrency,
                                  duration=spec.time + spec.recovery), workload)


def plan_summary(spec: RunSpec, ops: Iterable[PlannedOp] | None = None) -> dict[str, Any]:
    """Counts and digests of the operation and fault schedules (same seed, same digests).

    The operations' digest is of their JSON list, fed one operation at a time."""
    ops = operation_plan(spec) if ops is None else ops
    digest, count, counts = hashlib.sha256(b"["), 0, {}
    for op in ops:
        digest.update((", " if count else "").encode()
                      + json.dumps([op.at, op.worker, op.f, op.key, op.value], sort_keys=True).encode())
        count += 1
        counts[op.f] = counts.get(op.f, 0) + 1
    digest.update(b"]")
    # An event's seed picks its targets when it starts: part of "the same faults".
    schedule = [{"offset_s": ev.offset, "fault": ev.fault.label(), "phase": ev.phase, "window": ev.window,
                 "seed": ev.seed} for ev in fault_schedule(spec)]
    return {"operations": count, "by_f": counts,
            "operations_digest": digest.hexdigest()[:16],
            "faults": schedule,
            "faults_digest": hashlib.sha256(json.dumps(schedule).encode()).hexdigest()[:16]}


# -- to and from the schedule file ----------------------------------------------------------

def from_spec(spec: RunSpec) -> Schedule:
    """The schedule a spec runs: its explicit windows, or the seeded generator's."""
    if spec.windows is not None:
        windows = spec.windows
    else:
        starts = {}
        windows_found = []
        for event in fault_schedule(spec):
            key = (event.window, event.slot)
            if event.phase == "start":
                starts[key] = event
            elif key in starts:
                begin = starts.pop(key)
                windows_found.append(FaultWindow(fault=begin.fault.label(), targets=tuple(spec.targets),
                                                 start=begin.offset, length=round(event.offset - begin.offset, 3),
                                                 seed=begin.seed))
        windows = tuple(sorted(windows_found, key=lambda w: (w.start, w.end)))
    return Schedule(profile=spec.profile, workload=spec.workload, seed=spec.seed, timing=spec.timing,
                    bugs=tuple(spec.bugs), rocketmq_version=spec.rocketmq_version,
                    shape=Shape(time=spec.time, recovery=spec.recovery, rate=spec.rate,
                                concurrency=spec.concurrency, queues=spec.queues, keys=spec.keys,
                                ordered=spec.ordered, mix=dict(spec.mix)),
                    windows=windows)


def spec_values(schedule: Schedule) -> dict[str, Any]:
    """RunSpec values that replay `schedule` (the caller adds store, inventory, ...)."""
    labels = list(dict.fromkeys(window.fault for window in schedule.windows)) or ["noop"]
    return {"profile": schedule.profile, "workload": schedule.workload, "seed": schedule.seed,
            "timing": schedule.timing, **schedule.shape.model_dump(), "faults": labels,
            "windows": schedule.windows, **({"bugs": schedule.bugs} if schedule.bugs else {}),
            **({"rocketmq_version": schedule.rocketmq_version} if schedule.rocketmq_version else {})}


def window_events(windows: tuple[FaultWindow, ...], run_seed: int) -> list[ScheduledEvent]:
    """The start/stop events of explicit windows, in time order (stops first on a tie)."""
    found = []
    ordered = sorted(windows, key=lambda w: (w.start, w.end))
    for index, window in enumerate(ordered):
        spec = FaultSpec.parse(window.fault)
        seed = window.target_seed(run_seed)
        roles = tuple(window.targets) or None
        for phase, offset in (("start", window.start), ("stop", window.end)):
            found.append(ScheduledEvent(round(offset, 3), spec, phase, index, 0, seed, roles, window.fired_at))
    found.sort(key=lambda event: (event.offset, event.phase == "start"))
    return found
