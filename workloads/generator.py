"""The generator model: the operation schedule as a pure function of (seed, spec).

Jepsen's generators decide *what* each logical process does and *when*; the
main phase's plan is a pure function of the seed, so the same seed replays the
same operations (values and timing offsets) and a test can compare two plans
without running anything. It is generated as the workers consume it, never
held whole (a day-long soak has millions of operations).

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
from collections import deque
from collections.abc import Iterable, Iterator
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


def iter_arrivals(spec: GeneratorSpec, name: str) -> Iterator[int]:
    """Planned start offsets (ns) of the main phase's operations, in order, one at a time."""
    rng = random.Random(f"{spec.seed}:{name}:arrivals")
    end = int(spec.duration * NS_PER_S)
    mean_gap = NS_PER_S / spec.rate
    at = 0
    while True:
        at += int(rng.uniform(0, 2 * mean_gap))
        if at >= end:
            return
        yield at


def arrival_offsets(spec: GeneratorSpec, name: str) -> list[int]:
    """Planned start offsets (ns) of all operations of the main phase, in order."""
    return list(iter_arrivals(spec, name))


def iter_plan(spec: GeneratorSpec, planner: Planner) -> Iterator[PlannedOp]:
    """The main phase's operation schedule, generated as it is consumed (a long soak's
    plan would not fit in memory); the same (seed, spec) gives the same operations."""
    values = random.Random(f"{spec.seed}:{planner.name}:values")
    for index, at in enumerate(iter_arrivals(spec, planner.name)):
        worker = index % spec.concurrency
        f, key, value = planner.plan_op(values, index, worker, spec.concurrency)
        yield PlannedOp(index, at, worker, f, key, value)


def plan(spec: GeneratorSpec, planner: Planner) -> list[PlannedOp]:
    """The main phase's operation schedule as a list (tests, benchmarks: short plans)."""
    return list(iter_plan(spec, planner))


@dataclass(frozen=True)
class LazyPlan:
    """A plan that is generated again each time it is iterated, never held whole."""

    spec: GeneratorSpec
    planner: Planner

    def __iter__(self) -> Iterator[PlannedOp]:
        return iter_plan(self.spec, self.planner)


def worker_streams(ops: Iterable[PlannedOp], concurrency: int) -> list[Iterator[PlannedOp]]:
    """Each worker's own stream of a plan, in order, drawn from it on demand: only the
    operations planned for workers that lag behind the one asking are buffered."""
    source = iter(ops)
    waiting: list[deque[PlannedOp]] = [deque() for _ in range(concurrency)]

    def stream(worker: int) -> Iterator[PlannedOp]:
        mine = waiting[worker]
        while True:
            while not mine:
                op = next(source, None)
                if op is None:
                    return
                waiting[op.worker].append(op)
            yield mine.popleft()

    return [stream(worker) for worker in range(concurrency)]


def per_worker(ops: Iterable[PlannedOp], concurrency: int) -> list[list[PlannedOp]]:
    """Split a plan into each worker's own stream, keeping the order."""
    return [list(stream) for stream in worker_streams(ops, concurrency)]
