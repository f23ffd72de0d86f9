"""figure-8-partition: its first step's shape and its options (pure, no cluster)."""
from __future__ import annotations

import pytest

import faults
from faults.registry import create
from faults.validate import validate
from faults import grudge as shapes
from faults.figure8 import Figure8Partition

NODES = ["n1", "n2", "n3", "n4", "n5"]


def test_step_one_puts_the_leader_with_the_nameserver_node() -> None:
    views = shapes.views(Figure8Partition._step1(NODES, "n1", "n4"), NODES)
    assert views["n4"] == {"n1", "n4"} and views["n2"] == {"n2", "n3", "n5"}


def test_options_are_checked_and_fewer_than_five_members_are_refused() -> None:
    with pytest.raises(faults.FaultError, match="lease"):
        create("figure-8-partition", lease=0)
    assert create("figure-8-partition").min_nodes == 5
    with pytest.raises(faults.FaultError, match="needs at least 5 nodes"):
        validate(["figure-8-partition"], NODES[:3])
