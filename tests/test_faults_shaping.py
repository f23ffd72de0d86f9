"""random-bandwidth applied and healed on a real 3-node namespace cluster.

The effect is measured from inside the nodes: seconds to push a block of bytes
to a peer over TCP with and without the limit, and the tc classes the packets
went through (SSH from the control node must stay in the unlimited class).
"""
from __future__ import annotations

import shlex
import time

import pytest

import nuclei
from faults.registry import create
from nuclei.shape import HANDLE, shaped
from support.faults import make_context

pytestmark = pytest.mark.cluster

SINK_PORT = 7391
BLOCK = 200_000  # bytes: 1.6 s at 1mbit, a few ms unshaped
SINK = ("import socket,sys\n"
        "s=socket.create_server((sys.argv[1],int(sys.argv[2])));s.settimeout(60)\n"
        "while True:\n"
        "    c,_=s.accept()\n"
        "    while c.recv(65536): pass\n"
        "    c.sendall(b'k');c.close()\n")
PUSH = ("import socket,sys,time\n"
        "t=time.monotonic();c=socket.create_connection((sys.argv[1],int(sys.argv[2])),timeout=30)\n"
        "c.sendall(b'x'*int(sys.argv[3]));c.shutdown(socket.SHUT_WR);c.recv(1)\n"
        "print(time.monotonic()-t)\n")


@pytest.fixture(scope="module")
def cluster(make_cluster):
    inventory, pool = make_cluster(3)
    pids = {}
    try:
        for node in inventory.nodes:
            pids[node.name] = pool.run(node.name, f"nohup timeout 600 python3 -c {shlex.quote(SINK)} {node.host} "
                                                  f"{SINK_PORT} >/dev/null 2>&1 & echo $!").stdout.strip()
        time.sleep(1.0)
        yield inventory, pool
    finally:
        for node, pid in pids.items():
            if pid.isdigit():
                pool.run(node, f"kill {pid}", check=False)


def push_seconds(inventory, pool, source: str, target: str) -> float:
    host = next(n.host for n in inventory.nodes if n.name == target)
    out = pool.run(source, ["python3", "-c", PUSH, host, str(SINK_PORT), str(BLOCK)], timeout=60).stdout
    return float(out.strip())


def test_bandwidth_limit_slows_links_between_sut_nodes_both_ways_and_heals(cluster, tmp_path) -> None:
    inventory, pool = cluster
    ctx = make_context(inventory, pool, tmp_path, {}, seed=3)
    before = push_seconds(inventory, pool, "n1", "n2")
    nemesis = create("random-bandwidth", rate="1mbit")
    handle = nemesis.start(ctx)
    try:
        shaped_pairs = handle.details["shaped"]
        assert handle.details["mechanism"] == "tc htb" and handle.targets
        source = handle.targets[0]
        target = shaped_pairs[source][0]
        for node, peers in shaped_pairs.items():
            lines = shaped(pool, node)
            assert sum("flowid" in line and f"{HANDLE}:2" in line for line in lines) == len(peers)
            assert any("rate 1Mbit" in line for line in lines)
        slow = push_seconds(inventory, pool, source, target)
        back = push_seconds(inventory, pool, target, source)
        # 200 kB at 1 Mbit/s is 1.6 s; unshaped it takes milliseconds.
        assert slow > 1.2 and back > 1.2, (before, slow, back)
        assert before < 0.5, before
        # SSH from the control node is not shaped: it stays fast while the limit is on.
        started = time.monotonic()
        pool.run(source, "head -c 300000 /dev/zero", timeout=30)
        assert time.monotonic() - started < 1.2
    finally:
        nemesis.stop(ctx, handle)
    assert all(shaped(pool, node.name) == [] for node in inventory.nodes)
    assert push_seconds(inventory, pool, source, target) < 0.5
    assert nuclei.heal(pool, ctx.journal).ok and ctx.journal.pending() == []


def test_heal_removes_a_bandwidth_limit_left_by_a_crashed_run(cluster, tmp_path) -> None:
    inventory, pool = cluster
    ctx = make_context(inventory, pool, tmp_path, {}, seed=5)
    peers = [n.host for n in inventory.nodes if n.name != "n3"]
    nuclei.bandwidth(pool, ctx.journal, "n3", peers, "500kbit")
    assert len(ctx.journal.pending()) == 1 and shaped(pool, "n3")
    # A second limit on the same node is refused, and the first one is left intact.
    with pytest.raises(nuclei.NucleusError, match="one bandwidth limit per node"):
        nuclei.bandwidth(pool, ctx.journal, "n3", peers, "2mbit")
    assert any("rate 500Kbit" in line for line in shaped(pool, "n3"))
    # A fresh Journal on the same file is what `chaos heal` sees after a crash.
    report = nuclei.heal(pool, nuclei.Journal(tmp_path / "journal.jsonl"))
    assert report.ok, report.errors
    assert any("bandwidth limit" in line for line in report.done)
    assert shaped(pool, "n3") == [] and nuclei.Journal(tmp_path / "journal.jsonl").pending() == []


def test_bandwidth_rate_that_is_not_tc_syntax_is_refused_before_anything_runs(cluster, tmp_path) -> None:
    inventory, pool = cluster
    ctx = make_context(inventory, pool, tmp_path, {})
    with pytest.raises(nuclei.NucleusError, match="rate must look like"):
        nuclei.bandwidth(pool, ctx.journal, "n1", [inventory.nodes[1].host], "1mbit; reboot")
    assert ctx.journal.entries() == []
