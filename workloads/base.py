"""What a workload is: a planner (pure) plus a client protocol (effects).

Like a Jepsen test map naming a client and a generator, a workload has:
- `plan_op(rng, index, worker, concurrency)`: the pure half, called by the
  generator model for every operation of the main phase;
- `prepare(op)`: turns a planned op into the (f, key, value) of the invoke,
  using what the run has seen so far (e.g. the next offset to poll);
- `execute(client, f, key, value)`: one call against the SUT, classified into
  a Completion (ok / fail / info);
- `final_phase(run)`: the final phase after the faults are healed (drain,
  final reads), done through `run(worker, f, key, value)` so the same workers
  record it under the same process rules.
A new workload is one module with one subclass and its checker route, registered
with workloads.registry.register (or the `chaos.workloads` entry-point group).
"""
from __future__ import annotations

import asyncio
import random
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, ClassVar, Iterable, Protocol

from sut import systems
from workloads.generator import PlannedOp
from workloads.registry import Route


@dataclass(frozen=True)
class WorkloadOptions:
    """The run spec's workload knobs (harness fills it; defaults suit tests)."""

    concurrency: int = 4
    queues: int = 4
    keys: int = 3
    ordered: bool = False
    mix: dict[str, float] = field(default_factory=dict)   # f -> weight; empty = workload default
    payload_bytes: int = 16
    op_timeout: float = 6.0       # no answer within this -> info (indeterminate)
    drain_timeout: float = 60.0
    route_refresh_s: float | None = None   # None: re-read routes after a failure; else RocketMQ's periodic refresh
    topic: str = "chaos"
    group: str = "chaos-consumers"


@dataclass(frozen=True)
class Completion:
    """The outcome of one call: `type` is ok, fail (no effect) or info (unknown)."""

    type: str
    value: Any = None
    node: str | None = None
    error: str | None = None
    learned: Any = field(default=None, compare=False)  # for observe(); not written to the history


class OpRunner(Protocol):
    """Runs one recorded operation for a worker (invoke, execute, complete)."""

    async def __call__(self, worker: int, f: str, key: Any, value: Any) -> Completion: ...


async def run_together(coros: Iterable[Awaitable[Any]]) -> list[Any]:
    """Run coroutines concurrently; if one fails or we are cancelled, cancel and await all.

    Unlike a bare asyncio.gather, nothing keeps running (or writing history)
    after this returns or raises.
    """
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        return await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def spread(workers: int, items: Iterable[Any],
                 op: Callable[[int, Any], Awaitable[Any]]) -> None:
    """Item i goes to worker i mod `workers`; each worker does its items in order, workers in parallel."""
    lanes: list[list[Any]] = [[] for _ in range(workers)]
    for i, item in enumerate(items):
        lanes[i % workers].append(item)

    async def lane(worker: int, todo: list[Any]) -> None:
        for item in todo:
            await op(worker, item)
    await run_together(lane(w, todo) for w, todo in enumerate(lanes) if todo)


def weighted_choice(rng: random.Random, mix: dict[str, float]) -> str:
    names = sorted(mix)
    return rng.choices(names, weights=[mix[n] for n in names], k=1)[0]


class Workload(ABC):
    """Base class of the workloads; see the module docstring for the protocol."""

    name: ClassVar[str]
    route: ClassVar[Route]      # which checks its histories get (workloads/registry.py)
    description: ClassVar[str]
    default_mix: ClassVar[dict[str, float]]
    min_concurrency: ClassVar[int] = 1

    def __init__(self, options: WorkloadOptions) -> None:
        self.options = options
        self.mix = self.check_mix(options.mix or self.default_mix)

    @classmethod
    def check_mix(cls, mix: dict[str, float]) -> dict[str, float]:
        """The mix if every op is one of this workload's and some weight is positive."""
        unknown = sorted(set(mix) - set(cls.default_mix))
        if unknown:
            raise ValueError(f"workload {cls.name}: unknown operation(s) {', '.join(unknown)} in the mix "
                             f"(known: {', '.join(sorted(cls.default_mix))})")
        if any(w < 0 for w in mix.values()) or not any(w > 0 for w in mix.values()):
            raise ValueError(f"workload {cls.name}: mix weights must be >= 0 with at least one > 0")
        return dict(mix)

    @classmethod
    def unsupported(cls, profile: str) -> str | None:
        """Why this workload cannot run on `profile`, or None if it can: by default what the
        profile's system refuses (sut/systems.py)."""
        try:
            return systems.refused_workload(profile, cls.name)
        except systems.ProfileError:
            return None  # an unknown profile: the spec says so

    @classmethod
    def options_problem(cls, options: WorkloadOptions) -> str | None:
        """Why these options make no sense for this workload, or None."""
        if options.concurrency < cls.min_concurrency:
            return (f"workload {cls.name} needs --concurrency of at least {cls.min_concurrency}, "
                    f"got {options.concurrency}")
        try:
            cls.check_mix(options.mix or cls.default_mix)
        except ValueError as exc:
            return str(exc)
        return None

    # -- pure planning -------------------------------------------------------------
    @abstractmethod
    def plan_op(self, rng: random.Random, index: int, worker: int, concurrency: int) -> tuple[str, Any, Any]:
        """(f, key, value) of main-phase operation `index`, done by `worker`."""

    # -- effects ---------------------------------------------------------------------
    @abstractmethod
    def client(self, endpoints: Any, node_names: dict[str, str] | None = None) -> Any:
        """A new client (its own connections) for one worker; see workloads.clients."""

    async def setup(self, client: Any) -> None:
        """Prepare the SUT before the main phase (create a topic...)."""

    def prepare(self, op: PlannedOp) -> tuple[str, Any, Any]:
        """The invoke's (f, key, value); default: as planned."""
        return op.f, op.key, op.value

    @abstractmethod
    async def execute(self, client: Any, worker: int, f: str, key: Any, value: Any) -> Completion:
        """Do one operation; must not raise for SUT errors (classify them instead)."""

    def observe(self, worker: int, f: str, key: Any, value: Any, done: Completion) -> None:
        """Learn from a completion once it is recorded (offsets seen...), before the worker goes on."""

    async def final_phase(self, run: OpRunner) -> None:
        """The final phase after healing and recovery (drain, final reads); default: none."""
