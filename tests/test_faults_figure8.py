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


def test_a_leader_on_the_nameserver_node_is_paused_not_isolated_then_resumed_before_step_one(monkeypatch, tmp_path) -> None:
    """A node isolated alone moves its term up and may win back the leadership at the heal;
    a paused one keeps its term, so step 0 pauses the brokers there (unit level: nuclei faked)."""
    import random
    import threading
    from types import SimpleNamespace

    import faults.apply
    from faults.context import FaultContext
    from nuclei import Journal, JournalEntry

    events: list[tuple[str, str, tuple[str, ...]]] = []
    paused = threading.Event()
    lock = threading.Lock()

    def entry(action: str, node: str, **params) -> JournalEntry:
        with lock:
            return JournalEntry(f"e{len(events)}", action, node, params)

    def pause(pool, journal, proc):
        events.append(("pause", proc.node, (proc.name,)))
        paused.set()
        return [entry("pause", proc.node, name=proc.name)]

    def drop(pool, journal, node, peers):
        events.append(("drop", node, tuple(peers)))
        return entry("drop", node, peers=list(peers))

    def undo(pool, journal, undone, start=None, proc=None):
        events.append(("undo", undone.node, (undone.action,)))

    monkeypatch.setattr("faults.figure8.nuclei.pause", pause)
    monkeypatch.setattr("faults.figure8.nuclei.drop", drop)
    monkeypatch.setattr(faults.apply, "undo", undo)
    nodes = [SimpleNamespace(name=n, host=f"10.0.0.{i}") for i, n in enumerate(NODES, 1)]

    def processes(node: str):
        broker = SimpleNamespace(node=node, name=f"broker-{node}", role="broker")
        return [SimpleNamespace(node=node, name="namesrv", role="namesrv"), broker] if node == "n1" else [broker]

    ctx = FaultContext(pool=None, nodes=nodes, rng=random.Random(1), journal=Journal(tmp_path / "journal.jsonl"),
                       processes=processes, leader=lambda role: "n3" if paused.is_set() else "n1",
                       target_roles=frozenset({"broker"}))
    fault = Figure8Partition(step_timeout=2.0, lease=0.05, poll=0.01)
    handle = fault.start(ctx)
    deadline = threading.Event()
    for _ in range(200):
        if any(step.startswith("1:") for step in handle.details["steps"]) or deadline.wait(0.01):
            break
    fault.stop(ctx, handle)
    assert handle.details["steps"][:3] == ["0: the leader on the nameserver's node paused",
                                           "0: n3 elected, the paused brokers resumed",
                                           "1: n3 and nameserver cut off"]
    assert events[0] == ("pause", "n1", ("broker-n1",))  # the nameserver itself runs on
    resumed = events.index(("undo", "n1", ("pause",)))
    drops = [i for i, e in enumerate(events) if e[0] == "drop"]
    assert drops and resumed < drops[0], events
    assert not any(e[0] == "drop" and len(e[2]) == 4 for e in events), "no node was isolated alone"
