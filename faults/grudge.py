"""Partition shapes as data: a grudge maps each node to the nodes it drops traffic from.

Every function here is pure, so the shape of a partition can be unit-tested
without a cluster; applying a grudge is one nucleus per node (nuclei.drop).
Grudges made here are symmetric because partitions cut both directions:
if a drops b, b drops a.
"""
from __future__ import annotations

import random
from collections.abc import Collection, Mapping, Sequence

Grudge = dict[str, frozenset[str]]


def from_components(components: Sequence[Collection[str]]) -> Grudge:
    """Each node drops every node that is not in its own component."""
    everyone = {node for component in components for node in component}
    grudge: Grudge = {}
    for component in components:
        for node in component:
            grudge[node] = frozenset(everyone - set(component))
    return grudge


def isolate(node: str, nodes: Sequence[str]) -> Grudge:
    """One node cut off from all others (leader-partition)."""
    return from_components([[node], [other for other in nodes if other != node]])


def split(nodes: Sequence[str], side: Collection[str]) -> Grudge:
    """The given side against the rest of the nodes (fixed-partition)."""
    rest = [node for node in nodes if node not in side]
    return from_components([[node for node in nodes if node in side], rest])


def random_halves(nodes: Sequence[str], rng: random.Random) -> Grudge:
    """A random minority half against the majority half (random-partition)."""
    shuffled = list(nodes)
    rng.shuffle(shuffled)
    cut = len(shuffled) // 2
    return from_components([shuffled[:cut], shuffled[cut:]])


def majorities_ring(nodes: Sequence[str], rng: random.Random | None = None) -> Grudge:
    """Every node sees a majority, and no two nodes see the same majority.

    Nodes sit on a ring (shuffled if an RNG is given) and each one keeps its k
    nearest neighbours on either side, k = ceil((N // 2) / 2): its view of
    2k + 1 nodes is a majority, and for N >= 4 it is shorter than the ring, so
    views centred on different nodes differ. With 3 nodes no ring works (two
    links per node already connect everyone); the only shape is a path, whose
    middle node sees all three and each end sees two.
    """
    order = list(nodes)
    if len(order) < 3:
        raise ValueError(f"a majorities ring needs at least 3 nodes, got {len(order)}")
    if rng is not None:
        rng.shuffle(order)
    if len(order) == 3:
        return bridge(order)
    size = len(order)
    reach = -(-(size // 2) // 2)
    grudge: Grudge = {}
    for index, node in enumerate(order):
        seen = {order[(index + step) % size] for step in range(-reach, reach + 1)}
        grudge[node] = frozenset(set(order) - seen)
    return grudge


def bridge(nodes: Sequence[str], rng: random.Random | None = None) -> Grudge:
    """Two halves that cannot talk, joined by one bridge node that sees both."""
    order = list(nodes)
    if len(order) < 3:
        raise ValueError(f"a bridge needs at least 3 nodes, got {len(order)}")
    if rng is not None:
        rng.shuffle(order)
    middle = (len(order) - 1) // 2
    left, hub, right = order[:middle], order[middle], order[middle + 1:]
    grudge: Grudge = {hub: frozenset()}
    grudge.update({node: frozenset(right) for node in left})
    grudge.update({node: frozenset(left) for node in right})
    return grudge


def views(grudge: Mapping[str, Collection[str]], nodes: Sequence[str]) -> dict[str, frozenset[str]]:
    """Whom each node can talk to (itself included): both directions must be open."""
    def blocked(a: str, b: str) -> bool:
        return b in grudge.get(a, ()) or a in grudge.get(b, ())

    return {a: frozenset(b for b in nodes if a == b or not blocked(a, b)) for a in nodes}


def to_json(grudge: Mapping[str, Collection[str]]) -> dict[str, list[str]]:
    """The grudge as it is written to nemesis.jsonl: sorted lists, stable output."""
    return {node: sorted(dropped) for node, dropped in sorted(grudge.items())}

