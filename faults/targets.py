"""Which nodes a fault hits: pure functions of the candidates and a seeded RNG.

The selector names follow OpenChaos: `random` (one node), `minor` (a strict
minority), `major` (a strict majority), `fixed` (nodes the user names) and
`leader` (the current broker master or Raft leader, found by the SUT).
"""
from __future__ import annotations

import random
from collections.abc import Sequence

SELECTORS = ("random", "minor", "major", "fixed", "leader")

# Role tags users write, mapped to the SUT's process roles (sut: namesrv,
# broker, controller): one place for the spelling variants.
ROLE_ALIASES = {
    "broker": "broker", "brokers": "broker",
    "controller": "controller", "controllers": "controller",
    "namesrv": "namesrv", "nameserver": "namesrv", "nameservers": "namesrv",
}


class TargetError(ValueError):
    """The requested targets cannot be chosen (too few nodes, unknown node names)."""


def minority_size(count: int) -> int:
    """Largest group that is not a majority and never half: (N - 1) // 2."""
    return (count - 1) // 2


def majority_size(count: int) -> int:
    """Smallest majority: N // 2 + 1."""
    return count // 2 + 1


def min_nodes(selector: str) -> int:
    """Cluster size a selector needs to pick at least one node."""
    return 3 if selector == "minor" else 1


def choose(selector: str, candidates: Sequence[str], rng: random.Random,
           fixed: Sequence[str] = (), leader: str | None = None) -> list[str]:
    """The target nodes, in a stable order, for one fault start."""
    nodes = list(candidates)
    if selector == "fixed":
        check_fixed(fixed, nodes)
        return list(dict.fromkeys(fixed))
    if selector == "leader":
        return [leader] if leader is not None else []
    if selector not in SELECTORS:
        raise TargetError(f"unknown target selector {selector!r} (known: {', '.join(SELECTORS)})")
    size = {"random": 1, "minor": minority_size(len(nodes)), "major": majority_size(len(nodes))}[selector]
    if len(nodes) < min_nodes(selector) or size > len(nodes):
        raise TargetError(f"{selector} targets need at least {min_nodes(selector)} nodes, "
                          f"there are {len(nodes)}")
    picked = set(rng.sample(nodes, size))
    return [node for node in nodes if node in picked]


def most_hit(selector: str, candidates: Sequence[str], group: Sequence[str], fixed: Sequence[str] = ()) -> int:
    """The most nodes of `group` one start of a `selector` fault can hit, choosing among
    `candidates` (fixed: the nodes it names), whatever the seed or the leader."""
    if selector == "fixed":
        return len(set(fixed) & set(group))
    if selector not in SELECTORS:
        raise TargetError(f"unknown target selector {selector!r} (known: {', '.join(SELECTORS)})")
    size = {"random": 1, "leader": 1, "minor": minority_size(len(candidates)),
            "major": majority_size(len(candidates))}[selector]
    return min(size, len(set(candidates) & set(group)))


def check_fixed(fixed: Sequence[str], nodes: Sequence[str]) -> None:
    """Fixed targets must exist; the error names the missing ones and the known nodes."""
    if not fixed:
        raise TargetError("fixed targets are empty: name at least one node (targets=n1,n2)")
    missing = [name for name in fixed if name not in nodes]
    if missing:
        raise TargetError(f"fixed target(s) {', '.join(missing)} not in the cluster "
                          f"(nodes: {', '.join(nodes)})")


def normalize_roles(roles: Sequence[str] | None) -> frozenset[str] | None:
    """User role names -> SUT process roles; None or empty means every role."""
    if not roles:
        return None
    unknown = [role for role in roles if role.lower() not in ROLE_ALIASES]
    if unknown:
        raise TargetError(f"unknown role(s) {', '.join(unknown)} "
                          f"(known: brokers, controllers, nameservers)")
    return frozenset(ROLE_ALIASES[role.lower()] for role in roles)
