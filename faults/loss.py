"""random-loss: packets between some nodes and their peers are dropped at random.

iptables `-m statistic --mode random` stands in for netem (not available on
every machine). Each affected pair of nodes gets the rule on one side only,
so every packet between them, in either direction, is lost with exactly the
configured probability.
"""
from __future__ import annotations

import nuclei
from faults.apply import Record, apply_all, undo_all
from faults.context import Applied, FaultContext
from faults.options import Probability
from faults.registry import register
from faults.targets import TargetError

DEFAULT_PROBABILITY = 0.2


@register(origin="builtin")
class LossFault:
    """Drop packets at random between a random set of nodes and all their peers."""

    name = "random-loss"
    description = "lose packets at random (probability=, default 0.2) between random nodes and their peers"
    min_nodes = 2

    def __init__(self, probability: Probability = DEFAULT_PROBABILITY) -> None:
        if not 0 < float(probability) <= 1:
            raise ValueError(f"probability must be in (0, 1], got {probability}")
        self.probability = float(probability)

    def plan(self, ctx: FaultContext) -> tuple[list[str], dict[str, list[str]]]:
        """The targets (a random non-empty subset) and, per node, the peers it loses packets with."""
        nodes = ctx.candidates()
        if len(nodes) < self.min_nodes:
            raise TargetError(f"{self.name} needs at least {self.min_nodes} nodes, there are {len(nodes)}")
        picked = set(ctx.rng.sample(nodes, ctx.rng.randint(1, len(nodes))))
        chosen = [n for n in nodes if n in picked]
        pairs: dict[str, list[str]] = {}
        for node in chosen:
            # A pair of two targets is handled by the first of them only.
            peers = [p for p in ctx.names if p != node and not (p in picked and p < node)]
            if peers:
                pairs[node] = peers
        return chosen, pairs

    def start(self, ctx: FaultContext) -> Applied:
        chosen, pairs = self.plan(ctx)

        def job(node: str):
            peers = [ctx.address(p) for p in pairs[node]]

            def run(record: Record) -> None:
                record(nuclei.loss(ctx.pool, ctx.journal, node, peers, self.probability), None)
            return run

        actions = apply_all(ctx, self.name, {node: job(node) for node in pairs})
        return Applied(targets=chosen, actions=actions,
                       details={"probability": self.probability, "loss": pairs})

    def stop(self, ctx: FaultContext, handle: Applied) -> None:
        undo_all(ctx, handle.actions)
