"""Degraded links: delay, reorder, duplicate or corrupt packets between SUT nodes, both ways.

`random-*` picks its links as random-loss and random-bandwidth do (a random
non-empty set of nodes, each with every other SUT node); `fixed-*` degrades the
links between the nodes given as targets= and the other candidates, `leader-*`
those between the current leader and everyone else: the same sides as the
partitions of that name, with slow links instead of cut ones. Each affected
link is degraded at both ends (the nucleus is egress-only), so both
directions suffer. The control node's clients are never affected.

The mechanism (netem where the kernel has it, else an NFQUEUE degrader on the
node: nuclei/degrade.py) is recorded per start, and delay faults measure the
round trip they add (a TCP connect from a target to a degraded peer before and
after applying) into the start event.
"""
from __future__ import annotations

import json
import shlex
import statistics
from typing import Any

from faults.apply import Record, apply_all, undo_all
from faults.bandwidth import BandwidthFault
from faults.context import Applied, FaultContext
from faults.options import Milliseconds, NodeNames, Probability
from faults.partition import PartitionFault
from faults.registry import register
from nuclei import degrade as nucleus
from nuclei.remote import sh

SELECTORS = ("random", "fixed", "leader")
# A closed port on the peer: a connect there is one SYN out and one RST back, both degraded.
PROBE_PORT = 9
PROBE = ("import socket,sys,time\n"
         "out=[]\n"
         "for _ in range(int(sys.argv[3])):\n"
         "    t=time.perf_counter()\n"
         "    try: socket.create_connection((sys.argv[1],int(sys.argv[2])),timeout=3).close()\n"
         "    except ConnectionRefusedError: pass\n"
         "    except OSError: continue\n"
         "    out.append((time.perf_counter()-t)*1000)\n"
         "print(out)\n")


class LinkDegradation:
    """Shared by the four kinds: targets, links, apply on both ends, measure, undo."""

    kind = ""
    min_nodes = 2

    def __init__(self, selector: str, targets: tuple[str, ...]) -> None:
        if selector not in SELECTORS:
            raise ValueError(f"unknown selector {selector!r} (known: {', '.join(SELECTORS)})")
        if selector == "fixed" and not targets:
            raise ValueError("needs the nodes of one side: targets=n1,n2")
        self.selector = selector
        self.fixed = list(targets)
        self.name = f"{selector}-{self.kind}"

    def degradation(self) -> nucleus.Degradation:
        raise NotImplementedError

    def plan(self, ctx: FaultContext) -> tuple[list[str], dict[str, list[str]]]:
        """The targets and, per node (both ends of every degraded link), the peers it degrades."""
        if self.selector == "random":
            return BandwidthFault.plan(self, ctx)  # type: ignore[arg-type]  # same draws as random-loss
        # The sides of fixed-partition and leader-partition, with slow links instead of cut ones.
        sides = PartitionFault(self.selector, tuple(self.fixed))
        sides.name = self.name  # its errors name this fault
        chosen, grudge = sides.plan(ctx)
        if not grudge:
            return [], {}
        return chosen, {node: sorted(grudge[node]) for node in ctx.names if grudge.get(node)}

    def start(self, ctx: FaultContext) -> Applied:
        chosen, ends = self.plan(ctx)
        if not ends:
            return Applied(targets=[], details={"note": "no leader found"})
        degradation = self.degradation()
        seeds = {node: ctx.rng.randrange(1 << 31) for node in ends}
        workdirs = {node.name: node.workdir for node in ctx.nodes}
        probe = self._probe_pair(ends)
        before = _round_trip_ms(ctx, *probe) if probe else None

        def job(node: str):
            peers = [ctx.address(p) for p in ends[node]]

            def run(record: Record) -> None:
                record(nucleus.degrade(ctx.pool, ctx.journal, node, peers, degradation,
                                       workdirs[node], seed=seeds[node]), None)
            return run

        actions = apply_all(ctx, self.name, {node: job(node) for node in ends})
        mechanisms = sorted({action.entry.params.get("mechanism", "?") for action in actions})
        details: dict[str, Any] = {"kind": self.kind, "mechanism": "+".join(mechanisms), "degraded": ends,
                                   **{k: v for k, v in vars(degradation).items() if k != "kind" and v}}
        if probe:
            during = _round_trip_ms(ctx, *probe)
            details["measured"] = {"from": probe[0], "to": probe[1], "rtt_ms_before": before,
                                   "rtt_ms_during": during,
                                   "added_rtt_ms": None if before is None or during is None
                                   else round(during - before, 3)}
        return Applied(targets=chosen, actions=actions, details=details)

    def _probe_pair(self, ends: dict[str, list[str]]) -> tuple[str, str] | None:
        """Which link a delay fault measures: the first degraded node and its first peer."""
        if self.kind not in ("delay", "reorder"):
            return None
        node = next(iter(ends))
        return node, ends[node][0]

    def stop(self, ctx: FaultContext, handle: Applied) -> None:
        undo_all(ctx, handle.actions)


def _round_trip_ms(ctx: FaultContext, node: str, peer: str, samples: int = 5) -> float | None:
    """Median TCP connect time in ms from `node` to `peer`'s closed probe port (None if no answer)."""
    script = shlex.join(["python3", "-c", PROBE, ctx.address(peer), str(PROBE_PORT), str(samples)])
    result = sh(ctx.pool, node, script, timeout=60)
    try:
        values = json.loads(result.stdout.strip() or "[]")
    except ValueError:
        return None
    return round(statistics.median(values), 3) if values else None


class DelayFault(LinkDegradation):
    """Hold every packet on the links ms (+- jitter) before it leaves."""

    kind = "delay"

    def __init__(self, selector: str = "random", targets: NodeNames = (), ms: Milliseconds = 50.0,
                 jitter: Milliseconds = 10.0) -> None:
        super().__init__(selector, targets)
        self.ms, self.jitter = float(ms), float(jitter)
        self.degradation()  # refuse bad numbers before anything starts

    def degradation(self) -> nucleus.Degradation:
        return _checked(nucleus.Degradation, "delay", ms=self.ms, jitter=self.jitter)


class ReorderFault(LinkDegradation):
    """Send a share of the packets at once and hold the others ms: the early ones overtake."""

    kind = "reorder"

    def __init__(self, selector: str = "random", targets: NodeNames = (), probability: Probability = 0.25,
                 ms: Milliseconds = 20.0) -> None:
        super().__init__(selector, targets)
        self.probability, self.ms = float(probability), float(ms)
        self.degradation()

    def degradation(self) -> nucleus.Degradation:
        return _checked(nucleus.Degradation, "reorder", ms=self.ms, probability=self.probability)


class DuplicateFault(LinkDegradation):
    """Send a share of the packets twice."""

    kind = "duplicate"

    def __init__(self, selector: str = "random", targets: NodeNames = (), probability: Probability = 0.1) -> None:
        super().__init__(selector, targets)
        self.probability = float(probability)
        self.degradation()

    def degradation(self) -> nucleus.Degradation:
        return _checked(nucleus.Degradation, "duplicate", probability=self.probability)


class CorruptFault(LinkDegradation):
    """Flip one bit in a share of the packets (after the IP header)."""

    kind = "corrupt"

    def __init__(self, selector: str = "random", targets: NodeNames = (), probability: Probability = 0.05) -> None:
        super().__init__(selector, targets)
        self.probability = float(probability)
        self.degradation()

    def degradation(self) -> nucleus.Degradation:
        return _checked(nucleus.Degradation, "corrupt", probability=self.probability)


def _checked(make: Any, kind: str, **numbers: float) -> nucleus.Degradation:
    try:
        return make(kind, **numbers)
    except nucleus.NucleusError as error:
        raise ValueError(str(error)) from None


_WHERE = {
    "random": "between random nodes and their peers",
    "fixed": "between the nodes given as targets= and the rest",
    "leader": "between the current leader and every other node",
}
_WHAT = {
    DelayFault: "delay packets by ms= (default 50) +- jitter= (default 10)",
    ReorderFault: "reorder packets: probability= (default 0.25) go at once, the rest wait ms= (default 20)",
    DuplicateFault: "duplicate packets with probability= (default 0.1)",
    CorruptFault: "corrupt one bit of packets with probability= (default 0.05)",
}
for _cls, _what in _WHAT.items():
    for _selector, _where in _WHERE.items():
        _fixed = {} if _selector == "fixed" else {"targets": ()}
        register(_cls, name=f"{_selector}-{_cls.kind}", selector=_selector, origin="builtin",
                 description=f"{_what} {_where}, both ways (netem, else NFQUEUE)", **_fixed)
