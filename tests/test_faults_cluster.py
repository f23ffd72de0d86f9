"""Every fault family applied and healed on a real 5-node namespace cluster.

Effects are checked from inside the nodes: /proc states of the target
processes, TCP connection attempts between every pair of nodes, iptables rules.
"""
from __future__ import annotations

import os
import signal
import threading

import pytest

import nuclei
from faults import grudge as shapes
from faults.registry import create
from faults.runner import ScheduleRunner, run_schedule
from faults.schedule import FaultSpec, ScheduleSpec, plan
from nuclei.net import chain_rules
from nuclei.process import inspect
from support.faults import (chain_is_gone, make_context, proc_state, read_events, server_proc, start_servers,
                            stop_servers, views_measured)

pytestmark = pytest.mark.cluster

LEADER = "n3"


@pytest.fixture(scope="module")
def cluster(make_cluster):
    inventory, pool = make_cluster(5)
    procs = start_servers(inventory, pool)
    # n5 plays a controller, the others brokers: role filters have something to filter.
    procs["n5"] = server_proc(inventory.nodes[4], role="controller")
    try:
        yield inventory, pool, procs
    finally:
        stop_servers(pool, procs)


@pytest.fixture
def ctx(cluster, tmp_path):
    inventory, pool, procs = cluster
    context = make_context(inventory, pool, tmp_path, procs, leader=LEADER)
    yield context
    assert nuclei.heal(pool, context.journal).ok


def states(pool, procs) -> dict[str, str | None]:
    return {name: proc_state(pool, proc) for name, proc in procs.items()}


SELECTIONS = [("random", {}, 1), ("minor", {}, 2), ("major", {}, 3), ("fixed", {"targets": ["n2", "n4"]}, 2),
              ("leader", {}, 1)]


@pytest.mark.parametrize("selector, options, count", SELECTIONS)
def test_kill_faults_kill_exactly_the_targets_and_stop_restarts_them(cluster, ctx, selector, options,
                                                                    count) -> None:
    _, pool, procs = cluster
    pids = {name: inspect(pool, proc)[0].pid for name, proc in procs.items()}
    nemesis = create(f"{selector}-kill", **options)
    handle = nemesis.start(ctx)
    assert len(handle.targets) == count
    if selector == "fixed":
        assert handle.targets == ["n2", "n4"]
    if selector == "leader":
        assert handle.targets == [LEADER]
    during = states(pool, procs)
    assert {name for name, state in during.items() if state is None} == set(handle.targets)
    nemesis.stop(ctx, handle)
    after = {name: inspect(pool, proc) for name, proc in procs.items()}
    assert all(s and s[0].state in "SR" for s in after.values())
    assert {name for name in procs if after[name][0].pid != pids[name]} == set(handle.targets)
    assert ctx.journal.pending() == []


@pytest.mark.parametrize("selector, options, count", SELECTIONS)
def test_suspend_faults_stop_exactly_the_targets_and_stop_resumes_them(cluster, ctx, selector, options,
                                                                       count) -> None:
    _, pool, procs = cluster
    nemesis = create(f"{selector}-suspend", **options)
    handle = nemesis.start(ctx)
    assert len(handle.targets) == count
    during = states(pool, procs)
    assert {name for name, state in during.items() if state == "T"} == set(handle.targets)
    nemesis.stop(ctx, handle)
    assert all(state in ("S", "R") for state in states(pool, procs).values())


def test_role_filter_limits_kills_to_the_controllers(cluster, tmp_path) -> None:
    inventory, pool, procs = cluster
    ctx = make_context(inventory, pool, tmp_path, procs, roles=["controllers"], seed=3)
    nemesis = create("major-kill")
    handle = nemesis.start(ctx)
    try:
        assert handle.targets == ["n5"] and states(pool, procs)["n5"] is None
        assert all(states(pool, procs)[n] in ("S", "R") for n in ("n1", "n2", "n3", "n4"))
    finally:
        nemesis.stop(ctx, handle)


def assert_partition_matches_measurement(cluster, ctx, name: str, **options):
    inventory, pool, _ = cluster
    nemesis = create(name, **options)
    handle = nemesis.start(ctx)
    measured = views_measured(inventory, pool)
    expected = shapes.views({k: set(v) for k, v in handle.grudge.items()}, ctx.names)
    assert measured == expected
    nemesis.stop(ctx, handle)
    assert all(view == set(ctx.names) for view in views_measured(inventory, pool).values())
    assert all(chain_is_gone(pool, node) or chain_rules(pool, node) == [] for node in ctx.names)
    return handle, measured


def test_random_partition_cuts_a_minority_from_a_majority(cluster, ctx) -> None:
    handle, measured = assert_partition_matches_measurement(cluster, ctx, "random-partition")
    assert len(handle.targets) == 2
    assert sorted(map(len, set(measured.values()))) == [2, 3]


def test_fixed_partition_cuts_the_named_side(cluster, ctx) -> None:
    handle, measured = assert_partition_matches_measurement(cluster, ctx, "fixed-partition", targets=["n1", "n5"])
    assert measured["n1"] == {"n1", "n5"} and measured["n2"] == {"n2", "n3", "n4"}


def test_leader_partition_isolates_the_leader(cluster, ctx) -> None:
    handle, measured = assert_partition_matches_measurement(cluster, ctx, "leader-partition")
    assert handle.targets == [LEADER] and measured[LEADER] == {LEADER}


def test_majorities_ring_on_5_nodes_gives_each_node_its_own_majority(cluster, ctx) -> None:
    _, measured = assert_partition_matches_measurement(cluster, ctx, "partition-majorities-ring")
    assert all(len(view) == 3 for view in measured.values())
    assert len(set(measured.values())) == 5


def test_bridge_leaves_exactly_one_node_seeing_both_sides(cluster, ctx) -> None:
    handle, measured = assert_partition_matches_measurement(cluster, ctx, "bridge")
    assert [node for node, view in measured.items() if len(view) == 5] == handle.targets


def test_partitions_restricted_to_brokers_leave_the_controller_connected(cluster, tmp_path) -> None:
    inventory, pool, procs = cluster
    ctx = make_context(inventory, pool, tmp_path, procs, roles=["brokers"])
    nemesis = create("partition-majorities-ring")
    handle = nemesis.start(ctx)
    try:
        measured = views_measured(inventory, pool)
        assert measured["n5"] == set(ctx.names)
        assert all(len(measured[n]) == 4 for n in ("n1", "n2", "n3", "n4")), "3 of the 4 brokers + n5"
    finally:
        nemesis.stop(ctx, handle)


def test_random_loss_puts_statistic_rules_on_the_targets_and_removes_them(cluster, ctx) -> None:
    _, pool, _ = cluster
    nemesis = create("random-loss", probability=0.35)
    handle = nemesis.start(ctx)
    assert handle.details["probability"] == 0.35 and handle.targets
    for node in ctx.names:
        rules = chain_rules(pool, node)
        peers = handle.details["loss"].get(node, [])
        assert len(rules) == 2 * len(peers)
        assert all("--probability 0.35" in rule for rule in rules)
    nemesis.stop(ctx, handle)
    assert all(chain_rules(pool, node) == [] for node in ctx.names)


def run_once(cluster, tmp_path, seed: int):
    inventory, pool, procs = cluster
    ctx = make_context(inventory, pool, tmp_path, procs, leader=LEADER)
    spec = ScheduleSpec([FaultSpec("random-partition"), FaultSpec("random-suspend")], interval=0.2,
                        duration=1.0, overlap=[FaultSpec("random-kill")])
    seen: list[str] = []
    runner = ScheduleRunner(ctx, plan(seed, spec, 3.0), on_change=lambda active: seen.append(
        " + ".join(map(str, active)) or "quiet"))
    runner.run(threading.Event())
    return ctx, read_events(tmp_path), seen


def test_schedule_runner_overlaps_a_kill_with_a_partition_and_records_exact_targets(cluster, tmp_path) -> None:
    _, pool, procs = cluster
    ctx, events, seen = run_once(cluster, tmp_path / "a", seed=11)
    assert [(e["f"], e["value"]["phase"]) for e in events] == [
        ("random-partition", "start"), ("random-kill", "start"), ("random-kill", "stop"),
        ("random-partition", "stop"), ("random-suspend", "start"), ("random-kill", "start"),
        ("random-kill", "stop"), ("random-suspend", "stop")]
    partition = events[0]
    assert partition["process"] == "nemesis" and partition["type"] == "info"
    assert len(partition["value"]["targets"]) == 2 and set(partition["value"]["grudge"]) == set(ctx.names)
    assert all(e["error"] is None for e in events)
    assert [e["time"] for e in events] == sorted(e["time"] for e in events)
    assert any(" + random-kill on " in text for text in seen), "the progress shows both faults at once"
    assert seen[-1] == "quiet"
    assert ctx.journal.pending() == [] and all(chain_is_gone(pool, n) for n in ctx.names)
    assert all(state in ("S", "R") for state in states(pool, procs).values())

    _, again, _ = run_once(cluster, tmp_path / "b", seed=11)
    strip = [(e["f"], e["value"]["phase"], e["value"]["targets"], e["value"]["grudge"]) for e in events]
    assert strip == [(e["f"], e["value"]["phase"], e["value"]["targets"], e["value"]["grudge"]) for e in again]


def test_runner_heals_when_the_run_fails_midway(cluster, tmp_path) -> None:
    inventory, pool, procs = cluster
    ctx = make_context(inventory, pool, tmp_path, procs)
    spec = ScheduleSpec([FaultSpec("random-partition")], interval=0, duration=2,
                        overlap=[FaultSpec("major-suspend")])

    def explode(active):
        if len(active) == 2:
            raise RuntimeError("display crashed")

    with pytest.raises(RuntimeError, match="display crashed"):
        run_schedule(ctx, plan(1, spec, 60), threading.Event(), on_change=explode)
    assert ctx.journal.pending() == [] and all(chain_is_gone(pool, n) for n in ctx.names)
    assert all(state in ("S", "R") for state in states(pool, procs).values())
    assert [e["value"]["phase"] for e in read_events(tmp_path)] == ["start", "start", "stop", "stop"]


def test_runner_heals_on_ctrl_c(cluster, tmp_path) -> None:
    inventory, pool, procs = cluster
    ctx = make_context(inventory, pool, tmp_path, procs)
    spec = ScheduleSpec([FaultSpec("minor-suspend")], interval=0, duration=60)
    timer = None

    def interrupt_soon(active):
        nonlocal timer
        if active and timer is None:
            timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
            timer.start()

    with pytest.raises(KeyboardInterrupt):
        run_schedule(ctx, plan(2, spec, 120), threading.Event(), on_change=interrupt_soon)
    assert ctx.journal.pending() == []
    assert all(state in ("S", "R") for state in states(pool, procs).values())


def test_stop_event_ends_the_schedule_early_and_heals(cluster, tmp_path) -> None:
    inventory, pool, procs = cluster
    ctx = make_context(inventory, pool, tmp_path, procs)
    stop = threading.Event()
    spec = ScheduleSpec([FaultSpec("bridge")], interval=0, duration=60)
    runner = ScheduleRunner(ctx, plan(3, spec, 120), on_change=lambda active: active and stop.set())
    runner.run(stop)
    assert runner.current == "quiet" and runner.heal_report.ok
    assert all(chain_is_gone(pool, n) for n in ctx.names)


def test_majorities_ring_on_7_real_nodes(make_cluster, tmp_path) -> None:
    inventory, pool = make_cluster(7)
    procs = start_servers(inventory, pool)
    try:
        ctx = make_context(inventory, pool, tmp_path, procs)
        nemesis = create("partition-majorities-ring")
        handle = nemesis.start(ctx)
        measured = views_measured(inventory, pool)
        nemesis.stop(ctx, handle)
        assert all(len(view) >= 4 for view in measured.values())
        assert len(set(measured.values())) == 7
    finally:
        stop_servers(pool, procs)
