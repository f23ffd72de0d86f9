"""Partition nemeses: compute a grudge (faults.grudge), apply it with one nucleus per node.

Only the candidate nodes (those running a target role) take part; other
nodes keep talking to everyone. The control node is never cut off.
"""
from __future__ import annotations

import nuclei
from faults import grudge as shapes
from faults import targets as selection
from faults.apply import Record, apply_all, undo_all
from faults.context import Applied, FaultContext
from faults.options import NodeNames
from faults.registry import register

# shape -> (registered name, fewest nodes, description)
SHAPES = {
    "random": ("random-partition", 2, "cut the cluster into a random minority and majority half"),
    "fixed": ("fixed-partition", 2, "cut the nodes given as targets= off from the rest"),
    "leader": ("leader-partition", 2, "isolate the current leader (broker master or Raft leader)"),
    "ring": ("partition-majorities-ring", 3,
             "every node sees a majority, no two nodes the same one (any N >= 3)"),
    "bridge": ("bridge", 3, "two halves that cannot talk, joined by one node that sees both (N >= 3)"),
}


class PartitionFault:
    """Drop traffic both ways between the node pairs of a grudge; stop removes the rules."""

    def __init__(self, shape: str = "random", targets: NodeNames = ()) -> None:
        if shape not in SHAPES:
            raise ValueError(f"unknown partition shape {shape!r}")
        if shape == "fixed" and not targets:
            raise ValueError("needs the nodes of one side: targets=n1,n2")
        self.shape = shape
        self.fixed = list(targets)
        self.name, self.min_nodes, self.description = SHAPES[shape]

    def plan(self, ctx: FaultContext) -> tuple[list[str], shapes.Grudge]:
        """The targets (the side that is cut off, or the bridge) and the grudge."""
        nodes = ctx.candidates()
        if self.shape == "fixed":
            selection.check_fixed(self.fixed, ctx.names)
            rest = [n for n in nodes if n not in self.fixed]
            if not rest:
                raise selection.TargetError(f"{self.name}: targets {', '.join(self.fixed)} are every node; "
                                            f"nothing is left on the other side")
            return list(self.fixed), shapes.split(list(self.fixed) + rest, self.fixed)
        if self.shape == "leader":
            leader = ctx.find_leader()
            if leader is None:
                return [], {}
            return [leader], shapes.isolate(leader, list(dict.fromkeys([*nodes, leader])))
        if len(nodes) < self.min_nodes:
            raise selection.TargetError(f"{self.name} needs at least {self.min_nodes} nodes, "
                                        f"there are {len(nodes)} candidates")
        if self.shape == "random":
            grudge = shapes.random_halves(nodes, ctx.rng)
            halves = set(shapes.views(grudge, nodes).values())
            minority = min(halves, key=lambda half: (len(half), sorted(half)))
            return [n for n in nodes if n in minority], grudge
        if self.shape == "ring":
            grudge = shapes.majorities_ring(nodes, ctx.rng)
            return list(nodes), grudge
        grudge = shapes.bridge(nodes, ctx.rng)
        return [n for n in nodes if not grudge[n]], grudge

    def start(self, ctx: FaultContext) -> Applied:
        chosen, grudge = self.plan(ctx)

        def job(node: str):
            peers = [ctx.address(other) for other in sorted(grudge[node])]

            def run(record: Record) -> None:
                record(nuclei.drop(ctx.pool, ctx.journal, node, peers), None)
            return run

        cut = [node for node in grudge if grudge[node]]
        actions = apply_all(ctx, self.name, {node: job(node) for node in cut})
        details = {} if grudge else {"note": "no leader found"}
        return Applied(targets=chosen, grudge=shapes.to_json(grudge), actions=actions, details=details)

    def stop(self, ctx: FaultContext, handle: Applied) -> None:
        undo_all(ctx, handle.actions)


for _shape, (_name, _, _text) in SHAPES.items():
    _fixed = {} if _shape == "fixed" else {"targets": ()}
    register(PartitionFault, name=_name, shape=_shape, origin="builtin", description=_text, **_fixed)
