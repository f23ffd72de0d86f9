"""The generator model: the operation schedule as a pure function of (seed, spec).

Jepsen's generators decide *what* each logical process does and *when*; we
plan the whole main phase up front so that the same seed replays the same
operations (values and timing offsets) and a test can compare two plans
without running anything.

Timing: arrivals form one global stream with gaps drawn uniformly from
[0, 2/rate) (Jepsen's `stagger`: mean rate `rate`, no lock-step). Operation i
goes to worker i mod concurrency, so each worker gets a stream at rate/K and
the workload can give workers roles (producer, consumer) and own keys (one
producer per shard key). A worker that falls behind (a slow, timed-out call)
starts its next operation as soon as it is free; operations still unstarted
when the main phase ends are dropped, never invoked.

Values come from the workload's `plan_op`, called in operation order with
one random generator seeded from (seed, workload name), separate from the
arrivals' generator: timing and values do not disturb each other.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Protocol

NS_PER_S = 1_000_000_000


@dataclass(frozen=True)
class GeneratorSpec:
    """What the schedule depends on besides the workload: all of it from the run spec."""

    seed: int
    rate: float          # operations per second, all workers together
    concurrency: int     # number of workers (logical client processes at start)
    duration: float      # seconds of the main phase

    def __post_init__(self) -> None:
        if self.rate <= 0:
            raise ValueError(f"rate must be positive, got {self.rate}")
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {self.concurrency}")
        if self.duration <= 0:
            raise ValueError(f"duration must be positive, got {self.duration}")


@dataclass(frozen=True)
class PlannedOp:
    """One operation of the main phase: who does what, and when (ns after start)."""

    index: int
    at: int              # planned start, ns since the run's workload start
    worker: int
    f: str
    key: Any
    value: Any = field(default=None, hash=False, compare=True)


class Planner(Protocol):
    """The pure half of a workload: roles of workers and the value of each op."""

    name: str

    def plan_op(self, rng: random.Random, index: int, worker: int, concurrency: int) -> tuple[str, Any, Any]:
        """Return (f, key, value) of operation `index`, done by `worker`."""
        ...


def arrival_offsets(spec: GeneratorSpec, name: str) -> list[int]:
    """Planned start offsets (ns) of all operations of the main phase, in order."""
    rng = random.Random(f"{spec.seed}:{name}:arrivals")
    end = int(spec.duration * NS_PER_S)
    mean_gap = NS_PER_S / spec.rate
    offsets, at = [], 0
    while True:
        at += int(rng.uniform(0, 2 * mean_gap))
        if at >= end:
            return offsets
        offsets.append(at)


def plan(spec: GeneratorSpec, planner: Planner) -> list[PlannedOp]:
    """The main phase's operation schedule; the same (seed, spec) gives the same list."""
    values = random.Random(f"{spec.seed}:{planner.name}:values")
    ops = []
    for index, at in enumerate(arrival_offsets(spec, planner.name)):
        worker = index % spec.concurrency
        f, key, value = planner.plan_op(values, index, worker, spec.concurrency)
        ops.append(PlannedOp(index, at, worker, f, key, value))
    return ops


def per_worker(ops: list[PlannedOp], concurrency: int) -> list[list[PlannedOp]]:
    """Split a plan into each worker's own stream, keeping the order."""
    streams: list[list[PlannedOp]] = [[] for _ in range(concurrency)]
    for op in ops:
        streams[op.worker].append(op)
    return streams
