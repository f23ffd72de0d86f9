"""State-triggered nemeses without a cluster: the trigger predicates on hand-made samples,
the feed they wait on, the runner firing (and replaying) an armed window, and the
schedule file that records the instant."""
from __future__ import annotations

import random
import threading
import time
from typing import Any

import pytest

import nuclei
from faults import registry
from faults.context import Applied, FaultContext
from faults.runner import ScheduleRunner
from faults.schedule import FaultSpec, ScheduledEvent
from faults.triggers import NEVER, TRIGGERS, Firing, StateFeed, TriggeredFault, live_slaves
from harness import schedule as schedule_file
from harness.plan import window_events


def state(master: str | None = "n1", sss: list[str] | None = None, leader: str | None = "n2",
          members: dict[str, str] | None = None) -> dict[str, Any]:
    members = members or {"n1": "master" if master == "n1" else "slave", "n2": "slave", "n3": "slave"}
    return {"groups": {"broker-a": {"master": master, "epoch": 1, "term": None, "sync_state_set": sss,
                                    "members": members}},
            "controller": {"leader": leader, "term": 1, "members": {}},
            "nodes": {}}


def test_master_and_controller_leader_needs_both_known():
    trigger = TRIGGERS["master-and-controller-leader"]
    assert trigger.find(None, state()) == "broker-a"
    assert trigger.find(None, state(leader=None)) is None
    assert trigger.find(None, state(master=None)) is None
    assert trigger.find(None, {"error": "TimeoutError: x"}) is None


def test_sss_grown_fires_only_when_the_same_master_gains_a_member():
    trigger = TRIGGERS["sss-grown"]
    assert trigger.find(state(sss=["n1"]), state(sss=["n1", "n2"])) == "broker-a"
    assert trigger.find(state(sss=["n1", "n2"]), state(sss=["n1", "n2"])) is None
    assert trigger.find(state(sss=["n1", "n2"]), state(sss=["n1"])) is None
    assert trigger.find(None, state(sss=["n1", "n2"])) is None
    # A new master with a bigger set is a failover, not an expansion.
    other = state(master="n2", sss=["n2", "n3"], members={"n1": "down", "n2": "master", "n3": "slave"})
    assert trigger.find(state(sss=["n1"]), other) is None


def test_sss_master_alone_fires_when_the_set_is_just_the_master():
    trigger = TRIGGERS["sss-master-alone"]
    assert trigger.find(None, state(sss=["n1"])) == "broker-a"
    assert trigger.find(None, state(sss=["n1", "n3"])) is None
    assert trigger.find(None, state(sss=None)) is None


def test_master_with_slave_prefers_sync_state_set_members():
    trigger = TRIGGERS["master-with-slave"]
    members = {"n1": "master", "n2": "slave", "n3": "slave"}
    assert live_slaves(state(sss=["n1", "n3"], members=members), "broker-a") == ["n3", "n2"]
    assert trigger.find(None, state(members={"n1": "master", "n2": "down", "n3": "down"})) is None
    assert trigger.find(None, state(sss=["n1"], members=members)) == "broker-a"


def ctx_for(tmp_path, feed: StateFeed | None) -> FaultContext:
    return FaultContext(pool=None, nodes=[], rng=random.Random(1), journal=nuclei.Journal(tmp_path / "journal"),
                        states=feed)


def test_master_controller_kill_targets_one_node_when_they_share_it(tmp_path):
    from faults.triggers import MasterControllerKill
    nemesis, ctx = MasterControllerKill(), ctx_for(tmp_path, None)
    assert nemesis.targets(state(leader="n2"), "broker-a", ctx).nodes == ("n1", "n2")
    assert nemesis.targets(state(leader="n1"), "broker-a", ctx).nodes == ("n1",)


def test_group_controller_kill_hits_the_master_its_slaves_and_the_controller_leader(tmp_path):
    from faults.triggers import GroupControllerKill
    nemesis, ctx = GroupControllerKill(), ctx_for(tmp_path, None)
    firing = nemesis.targets(state(sss=["n1", "n2"], leader="n4"), "broker-a", ctx)
    assert set(firing.nodes) == {"n1", "n2", "n3", "n4"} and firing.facts["controller_leader"] == "n4"
    assert set(nemesis.targets(state(leader="n2"), "broker-a", ctx).nodes) == {"n1", "n2", "n3"}
    assert nemesis.targets(state(leader=None), "broker-a", ctx) is None


def test_slaves_pause_resumes_the_slaves_only_once_the_restarted_old_master_is_master(tmp_path, monkeypatch):
    from types import SimpleNamespace as Ns

    import faults.triggers as triggers
    nemesis = registry.create("master-controller-kill-slaves-pause", master_wait="5")
    firing = nemesis.targets(state(sss=["n1", "n2", "n3"], leader="n4"), "broker-a", ctx_for(tmp_path, None))
    assert set(firing.nodes) == {"n1", "n2", "n3", "n4"} and firing.facts["slaves"] == ["n2", "n3"]
    steps: list[Any] = []

    def signal(ctx, what, kills, pauses, firing):
        steps.append((dict(kills), dict(pauses)))
        return Applied(targets=[], actions=[], details={"processes": [what]})
    monkeypatch.setattr(triggers, "signal_roles", signal)
    monkeypatch.setattr(triggers.time, "sleep", steps.append)
    fired = nemesis.fire(ctx_for(tmp_path, None), firing)
    assert steps == [({}, {"n2": {"broker"}, "n3": {"broker"}}), 3.0,
                     ({"n1": {"broker"}, "n4": {"controller"}}, {})]
    assert fired.details["kill_after_s"] == 3.0 and len(fired.details["processes"]) == 2
    monkeypatch.undo()
    actions = [(Ns(node=node, action=action), None) for node, action in
               (("n1", "kill"), ("n4", "kill"), ("n2", "pause"), ("n3", "pause"))]
    feed, calls = StateFeed(), []
    feed.push(0, state(master=None, members={"n1": "down", "n2": "down", "n3": "down"}))
    monkeypatch.setattr(triggers, "undo_all", lambda ctx, done: calls.append(
        (round(time.monotonic() - began, 1), sorted((a[0].node, a[0].action) for a in done))))
    # the old master reports itself master 0.5 s after its restart; a slave claiming it first is not enough
    threading.Timer(0.2, feed.push, (1, state(master="n2", members={"n1": "down", "n2": "master"}))).start()
    threading.Timer(0.5, feed.push, (2, state(master="n1", members={"n1": "master", "n2": "down"}))).start()
    began = time.monotonic()
    nemesis.stop(ctx_for(tmp_path, feed), Applied(targets=[], actions=actions,
                                                  details={"group": "broker-a", "master": "n1"}))
    assert [done for _, done in calls] == [[("n1", "kill"), ("n4", "kill")], [("n2", "pause"), ("n3", "pause")]]
    assert calls[0][0] < 0.2 and 0.4 <= calls[1][0] < 2.0
    with pytest.raises(Exception, match="master_wait"):
        registry.create("master-controller-kill-slaves-pause", master_wait="0")


def test_rekill_kills_the_old_master_again_and_restarts_it_only_once_another_is_elected(tmp_path, monkeypatch):
    from types import SimpleNamespace as Ns

    import faults.triggers as triggers
    nemesis = registry.create("master-controller-kill-slaves-pause", master_wait="5", rekill_after="0.3")
    actions = [(Ns(node=node, action=action), None) for node, action in
               (("n1", "kill"), ("n4", "kill"), ("n2", "pause"), ("n3", "pause"))]
    feed, calls, began = StateFeed(), [], time.monotonic()
    feed.push(0, state(master=None, sss=["n1", "n2", "n3"], members={"n1": "down", "n2": "down", "n3": "down"}))

    def signal(ctx, what, kills, pauses, firing):
        calls.append((round(time.monotonic() - began, 1), "kill", sorted(kills)))
        return Applied(targets=[], actions=[(Ns(node="n1", action="kill"), None)], details={})
    monkeypatch.setattr(triggers, "signal_roles", signal)
    monkeypatch.setattr(triggers, "undo_all", lambda ctx, done: calls.append(
        (round(time.monotonic() - began, 1), "undo", sorted((a[0].node, a[0].action) for a in done))))
    back = state(master="n1", sss=["n1", "n2", "n3"], members={"n1": "master", "n2": "down", "n3": "down"})
    threading.Timer(0.2, feed.push, (1, back)).start()
    # the old master is killed again at 0.5 s; with the set still [n1, n2, n3] it stays down until n3 is elected
    gone = state(master=None, sss=["n1", "n2", "n3"], members={"n1": "down", "n2": "slave", "n3": "slave"})
    threading.Timer(0.7, feed.push, (2, gone)).start()
    threading.Timer(1.2, feed.push, (3, state(master="n3", sss=["n3"],
                                              members={"n1": "down", "n2": "slave", "n3": "master"}))).start()
    nemesis.stop(ctx_for(tmp_path, feed), Applied(targets=[], actions=actions,
                                                  details={"group": "broker-a", "master": "n1"}))
    assert [(what, done) for _, what, done in calls] == [
        ("undo", [("n1", "kill"), ("n4", "kill")]), ("kill", ["n1"]),
        ("undo", [("n2", "pause"), ("n3", "pause")]), ("undo", [("n1", "kill")])]
    assert 0.4 <= calls[1][0] < 1.0 and 1.1 <= calls[3][0] < 3.0
    # a SyncStateSet of the old master alone: nobody else is electable, so it restarts at once
    calls.clear()
    feed.push(4, back)
    threading.Timer(0.5, feed.push, (5, state(master=None, sss=["n1"], members={"n1": "down"}))).start()
    began = time.monotonic()
    nemesis.stop(ctx_for(tmp_path, feed), Applied(targets=[], actions=actions,
                                                  details={"group": "broker-a", "master": "n1"}))
    assert calls[-1][1:] == ("undo", [("n1", "kill")]) and calls[-1][0] < 1.5


def test_old_master_serves_alone_makes_it_the_only_broker_before_it_can_truncate(tmp_path, monkeypatch):
    from types import SimpleNamespace as Ns

    import faults.triggers as triggers
    nemesis = registry.create("old-master-serves-alone", kill_after="0.1", wait="5", ha_port="10912")
    firing = nemesis.targets(state(sss=["n1", "n3"]), "broker-a", ctx_for(tmp_path, None))
    assert firing.nodes == ("n1", "n3", "n2") and firing.facts["keeper"] == "n3"   # a set member is kept
    steps: list[Any] = []

    def signal(ctx, what, kills, pauses, firing):
        steps.append(("kill", sorted(kills)) if kills else ("pause", sorted(pauses)))
        how = "kill" if kills else "pause"
        return Applied(targets=[], actions=[Ns(entry=Ns(node=n, action=how, params={})) for n in (kills or pauses)])
    monkeypatch.setattr(triggers, "signal_roles", signal)
    monkeypatch.setattr(triggers, "undo_all", lambda ctx, done: steps.append(
        ("undo", sorted((a.entry.node, a.entry.action) for a in done))))

    def cut(ctx, what, jobs):
        steps.append(("cut", what))
        return [Ns(entry=Ns(node=node, action="drop", params={"port": 10912})) for node in jobs]
    monkeypatch.setattr(triggers, "apply_all", cut)
    monkeypatch.setattr(triggers.nuclei.net, "control_address", lambda pool, node: "10.0.0.100")
    feed = StateFeed()
    feed.push(0, state(master=None, members={"n1": "down", "n2": "down", "n3": "slave"}))
    threading.Timer(0.3, feed.push, (1, state(master="n3", sss=["n3"],
                                              members={"n1": "down", "n2": "down", "n3": "master"}))).start()
    threading.Timer(0.6, feed.push, (2, state(master="n3", sss=["n3"],
                                              members={"n1": "slave", "n2": "down", "n3": "master"}))).start()
    ctx = ctx_for(tmp_path, feed)
    ctx.address = lambda node: f"10.0.0.{node[1:]}"
    fired = nemesis.fire(ctx, firing)
    assert steps == [("cut", "old-master-serves-alone: cut n3 from n1:10912"), ("pause", ["n2"]),
                     ("kill", ["n1", "n2"]),
                     ("cut", "old-master-serves-alone: cut the clients from n3:10911 and n1 from n3:10912"),
                     ("undo", [("n1", "kill")]), ("kill", ["n3"])]
    assert fired.details["new_master"] == "n3" and "stopped_early" not in fired.details
    held = sorted((a.entry.node, a.entry.action) for a in fired.actions)
    assert held == [("n1", "drop"), ("n2", "kill"), ("n2", "pause"), ("n3", "drop"), ("n3", "drop"), ("n3", "kill")]
    steps.clear()
    nemesis.stop(ctx, fired)
    assert steps == [("undo", [("n1", "drop"), ("n3", "drop"), ("n3", "drop")]),
                     ("undo", [("n2", "kill"), ("n2", "pause"), ("n3", "kill")])]
    # no other broker elected in time: the firing ends there, everything held is undone at stop
    steps.clear()
    feed.push(3, state(master=None, members={"n1": "down", "n2": "down", "n3": "slave"}))
    nemesis.wait = 0.3
    early = nemesis.fire(ctx, firing)
    assert early.details["stopped_early"] == "no other broker became master"
    assert [s[0] for s in steps] == ["cut", "pause", "kill"]


def test_sss_growth_unheard_loses_the_master_once_the_controllers_added_the_lagging_slave(tmp_path, monkeypatch):
    from types import SimpleNamespace as Ns

    import faults.triggers as triggers
    nemesis = registry.create("sss-growth-unheard", lag="0.1", wait="5", controller_port="9878")
    firing = nemesis.targets(state(sss=["n1", "n3", "n2"]), "broker-a", ctx_for(tmp_path, None))
    assert firing.facts["lagger"] == "n2" and firing.nodes == ("n1", "n2", "n3")
    steps: list[Any] = []

    def signal(ctx, what, kills, pauses, firing):
        steps.append(("kill", sorted(kills)))
        return Applied(targets=[], actions=[Ns(entry=Ns(node=n, action="kill", params={})) for n in kills])
    monkeypatch.setattr(triggers, "signal_roles", signal)
    monkeypatch.setattr(triggers, "undo_all", lambda ctx, done: steps.append(
        ("undo", sorted((a.entry.node, a.entry.action) for a in done))))
    cuts: dict[str, Any] = {}

    def cut(ctx, what, jobs):
        steps.append(("cut", what))
        cuts.update(jobs)
        return [Ns(entry=Ns(node=node, action="drop", params={})) for node in jobs]
    monkeypatch.setattr(triggers.CutsAndKills, "_cut", lambda self, ctx, what, jobs: cut(ctx, what, jobs))
    listed = iter([set(), set(), {("10.0.0.2", 40001)}])   # before the heal, then the lagger back
    monkeypatch.setattr(triggers.nuclei.net, "connections", lambda pool, node, port: next(listed, set()))
    monkeypatch.setattr(triggers.time, "sleep", lambda s: None)
    feed = StateFeed()
    feed.push(0, state(sss=["n1", "n2"]))
    for at, sample in ((0.2, state(sss=["n1"])), (0.4, state(sss=["n1", "n2"])),
                       (0.6, state(master="n2", sss=["n2"], members={"n1": "down", "n2": "master", "n3": "down"}))):
        threading.Timer(at, feed.push, (1, sample)).start()
    ctx = ctx_for(tmp_path, feed)
    ctx.address = lambda node: f"10.0.0.{node[1:]}"
    ctx.nodes = [Ns(name=n, host=f"10.0.0.{n[1:]}") for n in ("n1", "n2", "n3", "n4")]
    ctx.processes = lambda node: [Ns(role="controller")] if node != "n1" else [Ns(role="broker")]
    fired = nemesis.fire(ctx, firing)
    assert steps == [("kill", ["n3"]), ("cut", "cut n2 from n1:10912"), ("undo", [("n2", "drop")]),
                     ("cut", "drop the controllers' answers to n1"), ("cut", "cut n2 from n1:10912"),
                     ("kill", ["n1"])]
    assert cuts["n1"] == (["10.0.0.2", "10.0.0.3", "10.0.0.4"], {"port": 9878, "answers": True})
    assert cuts["n2"] == (["10.0.0.1"], {"port": 10912})
    assert fired.details["new_master"] == "n2" and "stopped_early" not in fired.details
    held = sorted((a.entry.node, a.entry.action) for a in fired.actions)
    assert held == [("n1", "drop"), ("n1", "kill"), ("n2", "drop"), ("n3", "kill")]
    steps.clear()
    nemesis.stop(ctx, fired)
    assert steps == [("undo", [("n1", "drop"), ("n2", "drop")]), ("undo", [("n1", "kill"), ("n3", "kill")])]
    # a set that never shrinks to the master alone: the firing ends there, the rest is undone at stop
    steps.clear()
    nemesis.wait = 0.3
    early = nemesis.fire(ctx, nemesis.targets(state(sss=["n1", "n2"]), "broker-a", ctx))
    assert early.details["stopped_early"] == "the SyncStateSet never shrank to n1 alone"

def test_slaves_kill_hits_every_live_slave_of_the_group_and_never_the_master(tmp_path):
    from faults.triggers import SlavesKill
    nemesis, ctx = SlavesKill(), ctx_for(tmp_path, None)
    members = {"n1": "master", "n2": "slave", "n3": "slave"}
    assert set(nemesis.targets(state(sss=["n1", "n2"], members=members), "broker-a", ctx).nodes) == {"n2", "n3"}
    assert nemesis.targets(state(members={**members, "n3": "down"}), "broker-a", ctx).nodes == ("n2",)
    assert nemesis.targets(state(members={**members, "n2": "down", "n3": "down"}), "broker-a", ctx) is None


def test_master_slave_isolate_picks_a_seeded_slave_of_the_set(tmp_path):
    from faults.triggers import MasterSlaveIsolate
    nemesis = MasterSlaveIsolate()
    sample = state(sss=["n1", "n2", "n3"], members={"n1": "master", "n2": "slave", "n3": "slave"})
    picks = {nemesis.targets(sample, "broker-a", ctx_for(tmp_path, None).with_rng(seed)).nodes for seed in range(20)}
    assert picks == {("n1", "n2"), ("n1", "n3")}
    assert nemesis.targets(sample, "broker-a", ctx_for(tmp_path, None).with_rng(7)) == \
        nemesis.targets(sample, "broker-a", ctx_for(tmp_path, None).with_rng(7))


def test_the_feed_returns_the_first_sample_meeting_the_trigger_or_none_at_the_deadline():
    feed = StateFeed()
    feed.push(0, state(sss=["n1", "n2"]))
    trigger = TRIGGERS["sss-master-alone"]
    assert feed.wait_for(trigger, time.monotonic() + 0.3) is None

    def later() -> None:
        time.sleep(0.2)
        feed.push(1, state(sss=["n1"]))

    threading.Thread(target=later).start()
    found = feed.wait_for(trigger, time.monotonic() + 5)
    assert found is not None and found[0] == "broker-a" and found[1]["groups"]["broker-a"]["sync_state_set"] == ["n1"]


class Recorder(TriggeredFault):
    """A triggered fault that hits nothing: what it fired on is kept."""

    name = "test-alone-fault"
    trigger_name = "sss-master-alone"
    fired: list[Firing] = []

    def fire(self, ctx: FaultContext, firing: Firing) -> Applied:
        Recorder.fired.append(firing)
        return Applied(targets=list(firing.nodes), details={"group": firing.group})


@pytest.fixture
def recorder_fault(monkeypatch):
    Recorder.fired = []
    monkeypatch.setitem(registry._registry, Recorder.name,
                        registry.Registration(Recorder.name, "test", Recorder, "test", Recorder))
    return Recorder


def window(start: float, stop: float, fired_at: Any = None) -> list[ScheduledEvent]:
    spec = FaultSpec("test-alone-fault")
    return [ScheduledEvent(start, spec, "start", 0, 0, 5, None, fired_at),
            ScheduledEvent(stop, spec, "stop", 0, 0, 5, None, fired_at)]


def run(tmp_path, feed: StateFeed, events: list[ScheduledEvent]) -> tuple[ScheduleRunner, list[dict]]:
    emitted: list[dict] = []
    ctx = ctx_for(tmp_path, feed)
    ctx.emit = emitted.append
    runner = ScheduleRunner(ctx, events)
    runner.run(threading.Event())
    return runner, emitted


def test_an_armed_window_fires_when_the_state_meets_the_trigger_and_records_the_instant(tmp_path, recorder_fault):
    feed = StateFeed()
    feed.push(0, state(sss=["n1", "n2"]))
    threading.Timer(0.6, lambda: feed.push(1, state(sss=["n1"]))).start()
    runner, emitted = run(tmp_path, feed, window(0.1, 2.0))
    [firing] = runner.firings
    assert firing["trigger"] == "sss-master-alone" and 0.5 <= firing["fired_at"] < 1.5, firing
    assert [f.nodes for f in recorder_fault.fired] == [("n1",)]
    start = next(e for e in emitted if e["value"]["phase"] == "start")
    assert start["value"]["fired_at_s"] == firing["fired_at"] and start["value"]["trigger_held"] is True
    assert start["value"]["targets"] == ["n1"]


def test_a_trigger_that_never_holds_is_recorded_as_never_fired(tmp_path, recorder_fault):
    feed = StateFeed()
    feed.push(0, state(sss=["n1", "n2"]))
    runner, emitted = run(tmp_path, feed, window(0.1, 0.6))
    assert runner.firings[0]["fired_at"] == NEVER
    assert recorder_fault.fired == [] and emitted == []


def test_a_replay_fires_at_the_recorded_offset_without_watching(tmp_path, recorder_fault):
    feed = StateFeed()
    feed.push(0, state(sss=["n1", "n2"]))  # the trigger does not hold: the replay fires anyway
    began = time.monotonic()
    runner, emitted = run(tmp_path, feed, window(0.1, 2.0, fired_at=0.8))
    assert runner.firings[0]["fired_at"] == 0.8
    start = next(e for e in emitted if e["value"]["phase"] == "start")
    assert start["value"]["trigger_held"] is False and start["value"]["targets"] == ["n1"]
    assert time.monotonic() - began >= 0.8
    never, emitted = run(tmp_path, feed, window(0.1, 0.5, fired_at=NEVER))
    assert never.firings[0]["fired_at"] == NEVER and emitted == []
    # A window shrunk to end before the recorded instant fires nothing (and ends on time).
    began = time.monotonic()
    cut, emitted = run(tmp_path, feed, window(0.1, 0.4, fired_at=0.8))
    assert cut.firings[0]["fired_at"] == NEVER and emitted == [] and time.monotonic() - began < 0.75


def test_the_machine_crash_trigger_asks_for_the_crash_file_system():
    from faults.crash import needs_crash_fs
    assert needs_crash_fs(["sss-alone-master-crash"])
    assert not needs_crash_fs(["master-controller-kill", "master-slave-isolate", "sss-grown-master-kill"])


def test_schedule_yaml_keeps_the_trigger_and_instant_and_replays_them(tmp_path):
    base = schedule_file.Schedule(
        profile="controller-3", workload="queue", seed=3,
        shape=schedule_file.Shape(time=30, recovery=5, rate=10, concurrency=2, queues=2, keys=4),
        windows=(schedule_file.FaultWindow(fault="master-controller-kill", start=5, length=10, seed=9),
                 schedule_file.FaultWindow(fault="sss-grown-master-kill", start=18, length=10)))
    recorded = base.with_firings([
        {"fault": "master-controller-kill", "start": 5.0, "trigger": "master-and-controller-leader", "fired_at": 5.251},
        {"fault": "sss-grown-master-kill", "start": 18.0, "trigger": "sss-grown", "fired_at": NEVER}])
    text = schedule_file.dump(recorded)
    assert "fired_at: 5.251" in text and "fired_at: never" in text and "trigger: sss-grown" in text
    again = schedule_file.parse(text)
    assert again == recorded and [w.fault for w in again.unfired()] == ["sss-grown-master-kill"]
    starts = [e for e in window_events(again.windows, again.seed) if e.phase == "start"]
    assert [e.fired_at for e in starts] == [5.251, NEVER]
    with pytest.raises(schedule_file.ScheduleFileError, match="fired_at"):
        schedule_file.parse(text.replace("fired_at: never", "fired_at: later"))


def test_the_run_page_flags_a_trigger_that_never_fired(tmp_path):
    from reports.run_report import unfired_triggers
    base = schedule_file.Schedule(
        profile="controller-3", workload="queue", seed=3,
        shape=schedule_file.Shape(time=30, recovery=5, rate=10, concurrency=2, queues=2, keys=4),
        windows=(schedule_file.FaultWindow(fault="sss-grown-master-kill", start=18, length=10),))
    schedule_file.save(tmp_path / "schedule.yaml", base)
    assert unfired_triggers(tmp_path) == []
    never = [{"fault": "sss-grown-master-kill", "start": 18.0, "trigger": "sss-grown", "fired_at": NEVER}]
    schedule_file.save(tmp_path / "schedule.yaml", base.with_firings(never))
    [flag] = unfired_triggers(tmp_path)
    assert "sss-grown" in flag and "never fired" in flag


def test_the_broker_identity_recipe_kills_the_slaves_and_arms_the_master_crash_on_rmq_controller_3(tmp_path):
    from pathlib import Path
    from harness import plan as plan_of_run
    from harness.spec import build_spec
    text = (Path(__file__).resolve().parents[1] / "sut" / "rocketmq" / "recipes" / "broker-identity.yaml").read_text()
    values = plan_of_run.spec_values(schedule_file.parse(text))
    spec = build_spec({**values, "store": tmp_path})   # a triggered crash hits one node: not refused as a majority crash
    assert spec.profile == "rmq-controller-3"
    assert [(w.fault, w.start) for w in spec.windows] == [("slaves-kill", 20.0), ("sss-alone-master-crash", 20.0)]
