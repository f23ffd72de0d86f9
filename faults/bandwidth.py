"""random-bandwidth: links between some nodes and their peers slowed to a fixed rate.

tc HTB (nuclei.shape) rather than netem, which this kind of machine lacks.
Target selection is random-loss's: a random non-empty subset of nodes, each
with every other SUT node as its peers. Shaping is egress-only, so each
affected pair gets the limit on both ends and the link is slow both ways.
The control node's clients are never shaped.
"""
from __future__ import annotations

import nuclei
from faults.apply import Record, apply_all, undo_all
from faults.context import Applied, FaultContext
from faults.loss import LossFault
from faults.options import Rate
from faults.registry import register

DEFAULT_RATE = "1mbit"


@register(origin="builtin")
class BandwidthFault:
    """Limit the bandwidth between a random set of nodes and all their peers."""

    name = "random-bandwidth"
    description = "limit links between random nodes and their peers to rate= (tc syntax, default 1mbit), both ways"
    min_nodes = 2

    def __init__(self, rate: Rate = DEFAULT_RATE) -> None:
        self.rate = rate

    def plan(self, ctx: FaultContext) -> tuple[list[str], dict[str, list[str]]]:
        """The targets and, per node (targets and their peers alike), whom it sends slowly to."""
        chosen, pairs = LossFault.plan(self, ctx)  # type: ignore[arg-type]  # same selection, same rng draws
        ends: dict[str, list[str]] = {}
        for node, peers in pairs.items():
            for peer in peers:
                ends.setdefault(node, []).append(peer)
                ends.setdefault(peer, []).append(node)
        return chosen, {node: ends[node] for node in ctx.names if node in ends}

    def start(self, ctx: FaultContext) -> Applied:
        chosen, ends = self.plan(ctx)

        def job(node: str):
            peers = [ctx.address(p) for p in ends[node]]

            def run(record: Record) -> None:
                record(nuclei.bandwidth(ctx.pool, ctx.journal, node, peers, self.rate), None)
            return run

        actions = apply_all(ctx, self.name, {node: job(node) for node in ends})
        return Applied(targets=chosen, actions=actions,
                       details={"rate": self.rate, "mechanism": "tc htb", "shaped": ends})

    def stop(self, ctx: FaultContext, handle: Applied) -> None:
        undo_all(ctx, handle.actions)
