"""Schedules and target selection: pure functions of the seed (no cluster)."""
from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from faults import targets
from faults.schedule import FaultSpec, ScheduleError, ScheduleSpec, events, plan

KILL, PARTITION, LOSS = FaultSpec("random-kill"), FaultSpec("random-partition"), FaultSpec("random-loss")


def windows(schedule):
    """(start, stop, fault name) of each main fault window."""
    starts = {(e.window, e.slot): e for e in schedule if e.phase == "start"}
    return [(starts[(e.window, e.slot)].offset, e.offset, e.fault.name)
            for e in schedule if e.phase == "stop" and e.slot == 0]


def test_same_seed_gives_the_same_schedule() -> None:
    spec = ScheduleSpec([PARTITION, LOSS], jitter=0.3, order="random", overlap=[KILL])
    assert plan(1234, spec, 600) == plan(1234, spec, 600)
    assert plan(1234, spec, 600) != plan(1235, spec, 600)


def test_defaults_are_30_s_quiet_then_30_s_fault() -> None:
    assert windows(plan(7, ScheduleSpec([KILL]), 150)) == [
        (30.0, 60.0, "random-kill"), (90.0, 120.0, "random-kill")]


def test_several_faults_cycle_in_order() -> None:
    spec = ScheduleSpec([KILL, PARTITION, LOSS], interval=1, duration=2)
    assert [name for _, _, name in windows(plan(3, spec, 30))] == [
        "random-kill", "random-partition", "random-loss"] * 3 + ["random-kill"]


def test_a_kill_overlaps_each_partition_window() -> None:
    spec = ScheduleSpec([PARTITION], interval=10, duration=20, overlap=[KILL], jitter=0.2)
    schedule = plan(99, spec, 200)
    for start, stop, _ in windows(schedule):
        kills = [e for e in schedule if e.fault == KILL and start <= e.offset <= stop]
        assert [e.phase for e in kills] == ["start", "stop"]
        assert start < kills[0].offset < kills[1].offset < stop
        assert kills[1].offset - kills[0].offset >= 0.2 * (stop - start) - 0.01


@given(st.integers(min_value=0, max_value=2**40), st.floats(min_value=0, max_value=0.9))
def test_recovery_gap_and_jitter_bounds_hold_for_any_seed(seed: int, jitter: float) -> None:
    spec = ScheduleSpec([KILL, PARTITION], interval=10, duration=5, recovery=8, jitter=jitter)
    schedule = plan(seed, spec, 300)
    found = windows(schedule)
    assert found, "a 300 s schedule has fault windows"
    for (_, stop, _), (start, _, _) in zip(found, found[1:]):
        assert start - stop >= 8 - 1e-6
    for start, stop, _ in found:
        assert 5 * (1 - jitter) - 1e-3 <= stop - start <= 5 * (1 + jitter) + 1e-3
    assert found[-1][1] + 8 <= 300
    offsets = [e.offset for e in schedule]
    assert offsets == sorted(offsets)


def test_each_fault_start_gets_its_own_seed_and_stop_repeats_it() -> None:
    schedule = plan(5, ScheduleSpec([KILL], interval=1, duration=1, overlap=[KILL]), 20)
    starts = {(e.window, e.slot): e.seed for e in schedule if e.phase == "start"}
    assert all(starts[(e.window, e.slot)] == e.seed for e in schedule if e.phase == "stop")
    assert len(set(starts.values())) == len(starts)


def test_an_unbounded_schedule_keeps_going() -> None:
    stream = events(1, ScheduleSpec([KILL], interval=1, duration=1))
    assert len([next(stream) for _ in range(1000)]) == 1000


@pytest.mark.parametrize("spec, message", [
    (ScheduleSpec([]), "no faults"),
    (ScheduleSpec([KILL], duration=0), "duration"),
    (ScheduleSpec([KILL], interval=-1), "interval"),
    (ScheduleSpec([KILL], jitter=1.5), "jitter"),
    (ScheduleSpec([KILL], order="shuffle"), "order"),  # type: ignore[arg-type]
])
def test_bad_schedule_specs_say_which_field(spec: ScheduleSpec, message: str) -> None:
    with pytest.raises(ScheduleError, match=message):
        plan(1, spec, 100)


def test_fault_spec_text_round_trips_with_options() -> None:
    spec = FaultSpec.parse("fixed-partition:targets=n1,n2")
    assert spec == FaultSpec("fixed-partition", {"targets": ["n1", "n2"]})
    assert FaultSpec.parse(spec.label()) == spec
    assert FaultSpec.parse("random-loss:probability=0.3").options == {"probability": 0.3}
    with pytest.raises(ScheduleError, match="not key=value"):
        FaultSpec.parse("random-loss:0.3")


@pytest.mark.parametrize("count, minor, major", [(3, 1, 2), (4, 1, 3), (5, 2, 3), (7, 3, 4), (9, 4, 5)])
def test_minor_is_a_strict_minority_and_major_a_strict_majority(count: int, minor: int, major: int) -> None:
    nodes = [f"n{i}" for i in range(count)]
    assert len(targets.choose("minor", nodes, random.Random(1))) == minor
    assert len(targets.choose("major", nodes, random.Random(1))) == major
    assert len(targets.choose("random", nodes, random.Random(1))) == 1


def test_target_choice_is_seeded() -> None:
    nodes = [f"n{i}" for i in range(9)]
    picks = {tuple(targets.choose("major", nodes, random.Random(seed))) for seed in range(30)}
    assert len(picks) > 1
    assert targets.choose("major", nodes, random.Random(8)) == targets.choose("major", nodes, random.Random(8))


def test_minor_targets_need_three_nodes() -> None:
    with pytest.raises(targets.TargetError, match="at least 3 nodes"):
        targets.choose("minor", ["a", "b"], random.Random(1))


def test_fixed_targets_that_do_not_exist_are_named() -> None:
    with pytest.raises(targets.TargetError, match=r"n7, n9 not in the cluster \(nodes: n1, n2\)"):
        targets.choose("fixed", ["n1", "n2"], random.Random(1), fixed=["n1", "n7", "n9"])


def test_leader_target_is_whatever_the_sut_reports() -> None:
    assert targets.choose("leader", ["n1", "n2"], random.Random(1), leader="n2") == ["n2"]
    assert targets.choose("leader", ["n1", "n2"], random.Random(1), leader=None) == []


def test_role_names_accept_plurals_and_reject_unknown_roles() -> None:
    assert targets.normalize_roles(["brokers", "nameservers"]) == {"broker", "namesrv"}
    assert targets.normalize_roles([]) is None
    with pytest.raises(targets.TargetError, match="unknown role"):
        targets.normalize_roles(["zookeepers"])
