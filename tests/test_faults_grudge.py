"""Partition shapes as data: properties of the pure grudge functions (no cluster)."""
from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from faults import grudge

sizes = st.integers(min_value=3, max_value=40)
seeds = st.integers(min_value=0, max_value=2**32)


def names(count: int) -> list[str]:
    return [f"n{i}" for i in range(1, count + 1)]


def assert_symmetric(shape: dict[str, frozenset[str]]) -> None:
    for node, dropped in shape.items():
        assert node not in dropped, f"{node} drops itself"
        for other in dropped:
            assert node in shape[other], f"{node} drops {other} but not the other way round"


@given(sizes, seeds)
def test_majorities_ring_gives_every_node_a_distinct_majority_view(count: int, seed: int) -> None:
    nodes = names(count)
    shape = grudge.majorities_ring(nodes, random.Random(seed))
    views = grudge.views(shape, nodes)
    assert set(shape) == set(nodes)
    assert all(len(view) >= count // 2 + 1 for view in views.values())
    assert len(set(views.values())) == count
    assert all(len(view) < count for view in views.values()) or count == 3
    assert_symmetric(shape)


@pytest.mark.parametrize("count", [5, 7])
def test_majorities_ring_on_5_and_7_nodes_matches_the_ring_picture(count: int) -> None:
    nodes = names(count)
    views = grudge.views(grudge.majorities_ring(nodes), nodes)
    majority = count // 2 + 1
    assert {len(view) for view in views.values()} == {3 if count == 5 else 5}
    assert all(len(view) >= majority for view in views.values())
    # Ring order without shuffling: n1 sees its neighbours n5 and n2 on 5 nodes.
    if count == 5:
        assert views["n1"] == {"n5", "n1", "n2"}
    assert len(set(views.values())) == count


def test_majorities_ring_refuses_fewer_than_three_nodes() -> None:
    with pytest.raises(ValueError, match="at least 3 nodes"):
        grudge.majorities_ring(["a", "b"])


@given(sizes, seeds)
def test_bridge_leaves_exactly_one_node_seeing_both_sides(count: int, seed: int) -> None:
    nodes = names(count)
    shape = grudge.bridge(nodes, random.Random(seed))
    views = grudge.views(shape, nodes)
    seeing_all = [node for node, view in views.items() if len(view) == count]
    assert len(seeing_all) == 1
    hub = seeing_all[0]
    sides = {view - {hub} for node, view in views.items() if node != hub}
    assert len(sides) == 2, "the other nodes form exactly two sides"
    left, right = sides
    assert not left & right and left | right | {hub} == set(nodes)
    assert abs(len(left) - len(right)) <= 1
    assert all(hub in view for view in views.values())
    assert_symmetric(shape)


@given(st.integers(min_value=2, max_value=40), seeds)
def test_random_halves_split_into_a_minority_and_a_majority(count: int, seed: int) -> None:
    nodes = names(count)
    shape = grudge.random_halves(nodes, random.Random(seed))
    halves = set(grudge.views(shape, nodes).values())
    assert len(halves) == 2
    small, big = sorted(halves, key=len)
    assert len(small) == count // 2 and len(big) == count - count // 2
    assert small | big == set(nodes)
    assert_symmetric(shape)


def test_random_halves_are_the_same_for_the_same_seed_and_differ_across_seeds() -> None:
    nodes = names(9)
    first = grudge.random_halves(nodes, random.Random(42))
    assert first == grudge.random_halves(nodes, random.Random(42))
    others = {frozenset(grudge.random_halves(nodes, random.Random(s)).items()) for s in range(20)}
    assert len(others) > 1


def test_isolate_cuts_one_node_from_all_others_in_both_directions() -> None:
    nodes = names(5)
    shape = grudge.isolate("n3", nodes)
    views = grudge.views(shape, nodes)
    assert views["n3"] == {"n3"}
    assert all(views[n] == set(nodes) - {"n3"} for n in nodes if n != "n3")
    assert_symmetric(shape)


def test_split_puts_the_given_side_against_the_rest() -> None:
    nodes = names(5)
    views = grudge.views(grudge.split(nodes, ["n1", "n4"]), nodes)
    assert views["n1"] == views["n4"] == {"n1", "n4"}
    assert views["n2"] == {"n2", "n3", "n5"}


def test_to_json_is_sorted_lists() -> None:
    assert grudge.to_json({"b": frozenset({"c", "a"}), "a": frozenset()}) == {"a": [], "b": ["a", "c"]}
