"""figure-8-partition: its steps' shapes, order and pacing, and its options (unit level, no cluster)."""
from __future__ import annotations

import random
import threading
import time
from types import SimpleNamespace

import pytest

import faults
import faults.apply
from faults.context import FaultContext
from faults.registry import create
from faults.validate import validate
from faults import grudge as shapes
from faults.figure8 import Figure8Partition
from nuclei import Journal, JournalEntry

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


class _FakeCluster:
    """A FaultContext over five fake nodes (the nameserver on n1) whose nuclei only record
    what they were asked to do; the leader is whatever `leader()` says (unit level)."""

    def __init__(self, monkeypatch, tmp_path, leader) -> None:
        self.events: list[tuple[str, str, tuple[str, ...]]] = []
        self.paused = threading.Event()
        lock = threading.Lock()

        def entry(action: str, node: str, **params) -> JournalEntry:
            with lock:
                return JournalEntry(f"e{len(self.events)}", action, node, params)

        def pause(pool, journal, proc):
            self.events.append(("pause", proc.node, (proc.name,)))
            self.paused.set()
            return [entry("pause", proc.node, name=proc.name)]

        def drop(pool, journal, node, peers):
            self.events.append(("drop", node, tuple(peers)))
            return entry("drop", node, peers=list(peers))

        def undo(pool, journal, undone, start=None, proc=None):
            self.events.append(("undo", undone.node, (undone.action,)))

        monkeypatch.setattr("faults.figure8.nuclei.pause", pause)
        monkeypatch.setattr("faults.figure8.nuclei.drop", drop)
        monkeypatch.setattr(faults.apply, "undo", undo)
        nodes = [SimpleNamespace(name=n, host=f"10.0.0.{i}") for i, n in enumerate(NODES, 1)]

        def processes(node: str):
            broker = SimpleNamespace(node=node, name=f"broker-{node}", role="broker")
            return [SimpleNamespace(node=node, name="namesrv", role="namesrv"), broker] if node == "n1" else [broker]

        self.ctx = FaultContext(pool=None, nodes=nodes, rng=random.Random(1),
                                journal=Journal(tmp_path / "journal.jsonl"), processes=processes,
                                leader=lambda role: leader(), target_roles=frozenset({"broker"}))

    def play_until(self, fault: Figure8Partition, step: str):
        """Start the fault, wait (at most 5 s) until `step` is recorded, stop it."""
        handle = fault.start(self.ctx)
        waited = threading.Event()
        for _ in range(500):
            if any(s.startswith(step) for s in handle.details["steps"]) or waited.wait(0.01):
                break
        fault.stop(self.ctx, handle)
        return handle


def test_a_leader_on_the_nameserver_node_is_paused_not_isolated_then_resumed_before_step_one(monkeypatch, tmp_path) -> None:
    """A node isolated alone moves its term up and may win back the leadership at the heal;
    a paused one keeps its term, so step 0 pauses the brokers there."""
    cluster = _FakeCluster(monkeypatch, tmp_path, lambda: "n3" if cluster.paused.is_set() else "n1")
    handle = cluster.play_until(Figure8Partition(step_timeout=2.0, lease=0.05, poll=0.01), "1:")
    events = cluster.events
    assert handle.details["steps"][:3] == ["0: the leader on the nameserver's node paused",
                                           "0: n3 elected, the paused brokers resumed",
                                           "1: n3 and nameserver cut off"]
    assert events[0] == ("pause", "n1", ("broker-n1",))  # the nameserver itself runs on
    resumed = events.index(("undo", "n1", ("pause",)))
    drops = [i for i, e in enumerate(events) if e[0] == "drop"]
    assert drops and resumed < drops[0], events
    assert not any(e[0] == "drop" and len(e[2]) == 4 for e in events), "no node was isolated alone"


def test_the_old_leader_keeps_the_nameserver_for_a_lease_before_it_is_cut_off(monkeypatch, tmp_path) -> None:
    """Step 3 leaves the old leader L with the nameserver until its leadership lapses, so
    consumers can read its tail, even when the others elect M at once; only then (step 4)
    is L cut off. Here each election happens the moment its step starts."""
    switches: list[tuple[str, float]] = []
    switch = Figure8Partition._switch

    def timed_switch(self, ctx, handle, grudge, step):
        switches.append((step[0], time.monotonic()))
        switch(self, ctx, handle, grudge, step)

    monkeypatch.setattr(Figure8Partition, "_switch", timed_switch)
    leaders = {"1": "n3", "2": "n4", "3": "n3"}   # L = n4, M = n3, the nameserver on n1
    cluster = _FakeCluster(monkeypatch, tmp_path, lambda: leaders[switches[-1][0]] if switches else "n4")
    lease = 0.3
    handle = cluster.play_until(Figure8Partition(step_timeout=2.0, lease=lease, poll=0.01), "4:")
    assert [s[0] for s in handle.details["steps"]] == ["1", "2", "3", "4"]
    at = dict(switches)
    assert at["3"] - at["2"] >= lease and at["4"] - at["3"] >= lease
