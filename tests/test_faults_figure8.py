"""figure-8-partition's shapes: who can talk to whom in each step (pure, no cluster)."""
from __future__ import annotations

import pytest

import faults
from faults import grudge as shapes
from faults.figure8 import Figure8Partition, hub_grudge

NODES = ["n1", "n2", "n3", "n4", "n5"]


def test_hub_sees_its_spokes_and_the_spokes_only_the_hub() -> None:
    grudge = hub_grudge(NODES, [["n3", "n1"]], "n2", ["n4", "n5"])
    views = shapes.views(grudge, NODES)
    assert views["n2"] == {"n2", "n4", "n5"}
    assert views["n4"] == {"n4", "n2"} and views["n5"] == {"n5", "n2"}
    assert views["n1"] == {"n1", "n3"} and views["n3"] == {"n3", "n1"}
    assert all(b in grudge[a] for a in grudge for b in grudge[a] if a in grudge.get(b, ()))  # symmetric


def test_only_the_hub_can_gather_a_majority() -> None:
    views = shapes.views(hub_grudge(NODES, [["n3", "n1"]], "n2", ["n4", "n5"]), NODES)
    assert [node for node, seen in views.items() if len(seen) >= 3] == ["n2"]


def test_step_one_puts_the_leader_with_the_nameserver_node() -> None:
    views = shapes.views(Figure8Partition._step1(NODES, "n1", "n4"), NODES)
    assert views["n4"] == {"n1", "n4"} and views["n2"] == {"n2", "n3", "n5"}


def test_options_are_checked_and_fewer_than_five_members_are_refused() -> None:
    with pytest.raises(faults.FaultError, match="lease"):
        faults.create("figure-8-partition", lease=0)
    assert faults.create("figure-8-partition").min_nodes == 5
    with pytest.raises(faults.FaultError, match="needs at least 5 nodes"):
        faults.validate(["figure-8-partition"], NODES[:3])
