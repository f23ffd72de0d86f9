"""Clock nemeses, per process through libfaketime (nuclei/clock.py):

- `*-clock-skew`: the clock jumps ms= forward or back (direction=) and stays there;
- `*-clock-drift`: the clock runs at rate= (1.05: 5 % fast) from the fault's start;
- `clock-strobe`, `fixed-clock-strobe`, `leader-clock-strobe`: the clock flips between
  ms= ahead and the true time every period= seconds, as Jepsen's strobe does.

Each moves the clocks of the SUT processes of the target roles on the chosen nodes
(`random`: one node, `fixed`: targets=, `leader`: the current leader's node). The run
starts the SUT under libfaketime only when a clock fault is scheduled
(`needs_clock_preload`); every stop, and every heal, writes the true clock back.
The harness's own clock (history times, fault windows) is never touched.
"""
from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from faults import targets as selection
from faults.apply import Record, apply_all, undo_all
from faults.context import Applied, FaultContext, FaultError
from faults.options import ClockRate, Direction, NodeNames, SkewMs, StrobePeriod
from faults.registry import lookup, register
from nuclei import clock

SELECTORS = ("random", "fixed", "leader")


class ClockFault:
    """A clock shift in force on the target processes of the chosen nodes until stop."""

    kind = ""
    needs_clock_preload = True

    def __init__(self, selector: str = "random", targets: NodeNames = ()) -> None:
        if selector not in SELECTORS:
            raise ValueError(f"unknown selector {selector!r} (known: {', '.join(SELECTORS)})")
        if selector == "fixed" and not targets:
            raise ValueError("needs the nodes to hit: targets=n1,n2")
        self.selector, self.fixed = selector, list(targets)
        self.name = f"{selector}-clock-{self.kind}"
        self.min_nodes = 1

    def shift(self, ctx: FaultContext) -> clock.ClockShift:
        """The shift for one node (drawn from the fault's RNG where a choice is left)."""
        raise NotImplementedError

    def settings(self) -> dict[str, Any]:
        """The options as recorded in nemesis.jsonl."""
        raise NotImplementedError

    def start(self, ctx: FaultContext) -> Applied:
        leader = ctx.find_leader() if self.selector == "leader" else None
        chosen = selection.choose(self.selector, ctx.candidates(), ctx.rng, self.fixed, leader)
        shifts = {node: self.shift(ctx) for node in chosen}
        files = {node: _clock_files(ctx, node) for node in chosen}
        clocks: dict[str, dict[str, Any]] = {}

        def job(node: str):
            def run(record: Record) -> None:
                pairs = [(path, pidfile) for path, pidfile, _ in files[node]]
                entry, written = clock.shift(ctx.pool, ctx.journal, node, pairs, shifts[node], self.kind)
                record(entry, None)
                for path, _, proc in files[node]:
                    clocks[f"{node}/{proc.name}"] = {
                        "spec": written["specs"].get(path), "skew_ms": round(shifts[node].skew_s * 1000, 3),
                        "rate": shifts[node].rate,
                        "monotonic": "FAKETIME_DONT_FAKE_MONOTONIC" not in (proc.env or {})}
            return run

        actions = apply_all(ctx, f"{self.name} on {', '.join(chosen) or 'no node'}",
                            {node: job(node) for node in chosen})
        details: dict[str, Any] = {"kind": self.kind, **self.settings(), "clocks": dict(sorted(clocks.items())),
                                   "mechanism": "libfaketime"}
        if self.selector == "leader" and leader is None:
            details["note"] = "no leader found"
        return self.applied(ctx, chosen, actions, details, files)

    def applied(self, ctx: FaultContext, chosen: list[str], actions: list[Any], details: dict[str, Any],
                files: dict[str, list[tuple[str, str, Any]]]) -> Applied:
        return Applied(targets=chosen, actions=actions, details=details)

    def stop(self, ctx: FaultContext, handle: Applied) -> None:
        undo_all(ctx, handle.actions)


def _clock_files(ctx: FaultContext, node: str) -> list[tuple[str, str, Any]]:
    """(timestamp file, pidfile, process) of every target process on the node; a process not
    started under libfaketime is refused (the run preloads it only when a clock fault is scheduled)."""
    out = []
    for proc in ctx.target_processes(node):
        path = (getattr(proc, "env", None) or {}).get("FAKETIME_TIMESTAMP_FILE")
        if not path:
            raise FaultError(f"node {node}: process {proc.name} was not started under libfaketime (a run "
                             "preloads it only when its schedule has a clock fault)")
        out.append((path, str(proc.pidfile), proc))
    return out


class ClockSkewFault(ClockFault):
    """The clock jumps ms= forward or back (direction=) and stays there until stop."""

    kind = "skew"

    def __init__(self, selector: str = "random", targets: NodeNames = (), ms: SkewMs = 10_000.0,
                 direction: Direction = "random") -> None:
        super().__init__(selector, targets)
        self.ms, self.direction = float(ms), direction

    def shift(self, ctx: FaultContext) -> clock.ClockShift:
        direction = self.direction if self.direction != "random" else ctx.rng.choice(("forward", "back"))
        return clock.ClockShift(skew_s=self.ms / 1000 * (1 if direction == "forward" else -1))

    def settings(self) -> dict[str, Any]:
        return {"ms": self.ms, "direction": self.direction}


class ClockDriftFault(ClockFault):
    """The clock runs at rate= against the true one from the fault's start until stop."""

    kind = "drift"

    def __init__(self, selector: str = "random", targets: NodeNames = (), rate: ClockRate = 1.05) -> None:
        super().__init__(selector, targets)
        self.rate = float(rate)

    def shift(self, ctx: FaultContext) -> clock.ClockShift:
        return clock.ClockShift(rate=self.rate)

    def settings(self) -> dict[str, Any]:
        return {"rate": self.rate}


@dataclass
class Strobing(Applied):
    """A started strobe: what Applied says, and the thread that flips the clocks."""

    halt: threading.Event = field(default_factory=threading.Event)
    flipper: threading.Thread | None = None
    flips: list[int] = field(default_factory=lambda: [0])


class ClockStrobeFault(ClockFault):
    """The clock flips between ms= ahead and the true time every period= seconds until stop."""

    kind = "strobe"

    def __init__(self, selector: str = "random", targets: NodeNames = (), ms: SkewMs = 5_000.0,
                 period: StrobePeriod = 2.0) -> None:
        super().__init__(selector, targets)
        self.ms, self.period = float(ms), float(period)
        self.name = "clock-strobe" if selector == "random" else f"{selector}-clock-strobe"

    def shift(self, ctx: FaultContext) -> clock.ClockShift:
        return clock.ClockShift(skew_s=self.ms / 1000)

    def settings(self) -> dict[str, Any]:
        return {"ms": self.ms, "period_s": self.period}

    def applied(self, ctx: FaultContext, chosen: list[str], actions: list[Any], details: dict[str, Any],
                files: dict[str, list[tuple[str, str, Any]]]) -> Applied:
        handle = Strobing(targets=chosen, actions=actions, details=details)
        shifts = [clock.ClockShift(), self.shift(ctx)]  # flip 1 goes back to true time

        ids = {action.entry.id for action in actions}

        def in_force() -> bool:
            """Not stopped, and not healed behind the fault's back (a heal, then the next run's files)."""
            return not handle.halt.is_set() and any(entry.id in ids for entry in ctx.journal.pending())

        def flip() -> None:
            while not handle.halt.wait(self.period) and in_force():
                how = shifts[(handle.flips[0] + 1) % 2]
                for node in chosen:  # the journal entry of the start covers every flip: a heal resets
                    if handle.halt.is_set():
                        return
                    try:
                        clock.write(ctx.pool, node, [(p, pid) for p, pid, _ in files[node]], how)
                    except Exception:  # noqa: BLE001 - a node out of reach skips a flip; stop still heals
                        continue
                handle.flips[0] += 1

        handle.flipper = threading.Thread(target=flip, name=f"{self.name}-flipper", daemon=True)
        handle.flipper.start()
        return handle

    def stop(self, ctx: FaultContext, handle: Applied) -> None:
        if isinstance(handle, Strobing):
            handle.halt.set()
            if handle.flipper is not None:
                handle.flipper.join(timeout=60)
        super().stop(ctx, handle)


def needs_clock_preload(fault_names: Iterable[str]) -> bool:
    """Does any of these faults need the SUT started under libfaketime?"""
    return any(getattr(lookup(name).cls, "needs_clock_preload", False) for name in fault_names)


_WHO = {"random": "one random node", "fixed": "the nodes given as targets=",
        "leader": "the current leader's node (broker master or Raft leader)"}
_WHAT = {
    ClockSkewFault: "the clock jumps ms= (10000) forward or back (direction= forward, back, random) and stays",
    ClockDriftFault: "the clock runs at rate= (1.05, i.e. 5 % fast) from the fault's start",
    ClockStrobeFault: "the clock flips between ms= (5000) ahead and true time every period= (2) seconds",
}
for _selector, _who in _WHO.items():
    _fixed = {} if _selector == "fixed" else {"targets": ()}
    for _cls, _what in _WHAT.items():
        _name = f"{_selector}-clock-{_cls.kind}"
        if _cls is ClockStrobeFault and _selector == "random":
            _name = "clock-strobe"
        register(_cls, name=_name, selector=_selector, origin="builtin", **_fixed,
                 description=f"{_what}; for the SUT processes (target roles) on {_who}, through libfaketime; "
                             f"true time again at stop")

__all__ = ["ClockDriftFault", "ClockFault", "ClockSkewFault", "ClockStrobeFault", "needs_clock_preload"]
