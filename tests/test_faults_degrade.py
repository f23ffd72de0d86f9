"""Degraded links (delay, reorder, duplicate, corrupt) applied and healed on a real 3-node cluster.

The effects are measured from inside the nodes: the round trip a TCP connect
takes, and numbered UDP datagrams counted and ordered at the receiver. After
every stop nothing of ours may be left on any node: no mangle rule or chain,
no c4a1 qdisc, no degrader program. The last test is one short controller-3
run under random-delay on the same cluster: valid, with the added delay recorded.
"""
from __future__ import annotations

import json
import shlex
import threading

import pytest
from rich.console import Console

import nuclei
from faults.registry import create
from harness.run import RunLifecycle
from harness.spec import build_spec
from nuclei import degrade
from support.faults import make_context
from workloads.history import read_events

pytestmark = pytest.mark.cluster

UDP_PORT = 7393
RECEIVE = ("import socket,sys,json\n"
           "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.bind((sys.argv[1],int(sys.argv[2])))\n"
           "s.settimeout(float(sys.argv[3]));got=[]\n"
           "try:\n"
           "    while True: got.append(int(s.recv(64)))\n"
           "except OSError: pass\n"
           "print(json.dumps(got))\n")
SEND = ("import socket,sys,time\n"
        "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
        "for i in range(int(sys.argv[3])):\n"
        "    s.sendto(str(i).encode(),(sys.argv[1],int(sys.argv[2])));time.sleep(0.001)\n")


@pytest.fixture(scope="module")
def cluster(make_cluster):
    return make_cluster(3)


def host(inventory, name: str) -> str:
    return next(n.host for n in inventory.nodes if n.name == name)


def datagrams(inventory, pool, source: str, target: str, count: int = 20) -> list[int]:
    """Numbers of the datagrams `target` received, in arrival order, of `count` sent by `source`."""
    received: list[list[int]] = []
    listen = threading.Thread(target=lambda: received.append(json.loads(pool.run(
        target, ["python3", "-c", RECEIVE, host(inventory, target), str(UDP_PORT), "1.5"], timeout=60).stdout)))
    listen.start()
    pool.run(source, f"sleep 0.3; python3 -c {shlex.quote(SEND)} {host(inventory, target)} {UDP_PORT} {count}",
             timeout=60)
    listen.join()
    return received[0]


def assert_nothing_left(inventory, pool, ctx) -> None:
    for node in inventory.nodes:
        assert degrade.leftovers(pool, node.name, node.workdir) == [], node.name
    assert ctx.journal.pending() == []


def test_delay_adds_twice_its_ms_to_a_round_trip_and_heals_leaving_nothing(cluster, tmp_path) -> None:
    inventory, pool = cluster
    ctx = make_context(inventory, pool, tmp_path, {})
    nemesis = create("fixed-delay", targets=["n1"], ms=40, jitter=0)
    handle = nemesis.start(ctx)
    try:
        measured = handle.details["measured"]
        assert handle.details["mechanism"] == degrade.mechanism(pool, "n1")
        assert handle.details["degraded"] == {"n1": ["n2", "n3"], "n2": ["n1"], "n3": ["n1"]}
        # One SYN out and one RST back, each held 40 ms at its sender.
        assert 70 <= measured["added_rtt_ms"] <= 400, measured
        assert measured["rtt_ms_before"] < 20, measured
    finally:
        nemesis.stop(ctx, handle)
    assert_nothing_left(inventory, pool, ctx)
    undo = [json.loads(line) for line in (tmp_path / "journal.jsonl").read_text().splitlines()
            if '"undo"' in line]
    counters = [line["note"]["counters"] for line in undo if "counters" in line.get("note", {})]
    assert counters and all(c["held"] == c["packets"] for c in counters), counters
    assert sum(c["packets"] for c in counters) >= 10, counters


def test_duplicate_at_probability_one_delivers_every_datagram_twice(cluster, tmp_path) -> None:
    inventory, pool = cluster
    ctx = make_context(inventory, pool, tmp_path, {})
    nemesis = create("fixed-duplicate", targets=["n1"], probability=1.0)
    handle = nemesis.start(ctx)
    try:
        got = datagrams(inventory, pool, "n1", "n2")
        assert sorted(got) == sorted(list(range(20)) * 2), got
    finally:
        nemesis.stop(ctx, handle)
    assert_nothing_left(inventory, pool, ctx)
    assert datagrams(inventory, pool, "n1", "n2") == list(range(20))


def test_corrupt_at_probability_one_loses_every_datagram_to_the_receivers_checksum(cluster, tmp_path) -> None:
    inventory, pool = cluster
    ctx = make_context(inventory, pool, tmp_path, {})
    nemesis = create("random-corrupt", probability=1.0)
    handle = nemesis.start(ctx)
    try:
        source = handle.targets[0]
        target = handle.details["degraded"][source][0]
        assert datagrams(inventory, pool, source, target) == []
    finally:
        nemesis.stop(ctx, handle)
    assert_nothing_left(inventory, pool, ctx)
    assert datagrams(inventory, pool, source, target) == list(range(20))


def test_reorder_lets_some_datagrams_overtake_the_held_ones(cluster, tmp_path) -> None:
    inventory, pool = cluster
    ctx = make_context(inventory, pool, tmp_path, {}, leader="n2")
    nemesis = create("leader-reorder", probability=0.5, ms=30)
    handle = nemesis.start(ctx)
    try:
        assert handle.targets == ["n2"]
        got = datagrams(inventory, pool, "n2", "n3", count=100)
        assert sorted(got) == list(range(100))  # nothing lost or doubled
        inversions = sum(1 for a, b in zip(got, got[1:]) if a > b)
        assert inversions >= 5, got
    finally:
        nemesis.stop(ctx, handle)
    assert_nothing_left(inventory, pool, ctx)


def test_heal_removes_a_degradation_left_by_a_crashed_run_and_a_second_one_is_refused(cluster, tmp_path) -> None:
    inventory, pool = cluster
    ctx = make_context(inventory, pool, tmp_path, {})
    node = inventory.nodes[2]
    peers = [n.host for n in inventory.nodes if n.name != node.name]
    nuclei_delay = degrade.Degradation("delay", ms=20)
    degrade.degrade(pool, ctx.journal, node.name, peers, nuclei_delay, node.workdir)
    assert len(ctx.journal.pending()) == 1 and degrade.leftovers(pool, node.name, node.workdir)
    with pytest.raises(nuclei.NucleusError, match="one link degradation per node"):
        degrade.degrade(pool, ctx.journal, node.name, peers, degrade.Degradation("corrupt", probability=0.5),
                        node.workdir)
    assert len(ctx.journal.pending()) == 1
    # A fresh Journal on the same file is what `chaos heal` sees after a crash.
    report = nuclei.heal(pool, nuclei.Journal(tmp_path / "journal.jsonl"))
    assert report.ok, report.errors
    assert any("delay degradation" in line for line in report.done)
    assert degrade.leftovers(pool, node.name, node.workdir) == []
    assert nuclei.Journal(tmp_path / "journal.jsonl").pending() == []


def test_a_degrader_that_died_lets_packets_through_instead_of_cutting_the_link(cluster, tmp_path) -> None:
    inventory, pool = cluster
    ctx = make_context(inventory, pool, tmp_path, {})
    entry = degrade.degrade(pool, ctx.journal, "n1", [host(inventory, "n2")],
                            degrade.Degradation("delay", ms=20), inventory.nodes[0].workdir)
    pool.run("n1", f"kill -9 $(cat {shlex.quote(entry.params['pidfile'])})")
    try:
        assert datagrams(inventory, pool, "n1", "n2") == list(range(20))
    finally:
        report = nuclei.heal(pool, ctx.journal)
    assert report.ok, report.errors
    assert degrade.leftovers(pool, "n1", inventory.nodes[0].workdir) == []


@pytest.mark.long
@pytest.mark.root
@pytest.mark.spark
def test_a_controller_3_queue_run_under_random_delay_is_valid_and_records_the_added_delay(cluster, tmp_path) -> None:
    inventory, pool = cluster
    spec = build_spec({"profile": "controller-3", "workload": "queue", "faults": ["random-delay:ms=50"],
                       "time": 16, "interval": 5, "recovery": 4, "rate": 20, "concurrency": 4, "seed": 44,
                       "inventory": inventory.source, "store": tmp_path / "store"})
    outcome = RunLifecycle(spec, Console(stderr=True, force_terminal=False), show_progress=False).execute()
    assert outcome.status == "complete", outcome.error
    results = json.loads((outcome.run.path / "results.json").read_text())
    assert outcome.valid is True, {k: v.get("valid") for k, v in results["checkers"].items()}
    starts = [event["value"] for event in read_events(outcome.run.path / "nemesis.jsonl")
              if event["f"] == "random-delay" and event["value"]["phase"] == "start"]
    assert starts and all(start["mechanism"] in ("nfqueue", "netem") for start in starts)
    # Each degraded link is delayed at both ends: a round trip gains about 2 x 50 ms.
    assert all(75 <= start["measured"]["added_rtt_ms"] <= 500 for start in starts), starts
    assert nuclei.Journal(outcome.run.path / "journal.jsonl").pending() == []
    for node in inventory.nodes:
        assert degrade.leftovers(pool, node.name, node.workdir) == [], node.name
