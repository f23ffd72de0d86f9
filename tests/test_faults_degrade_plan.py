"""Degraded links without a cluster: which links, what each packet gets, what netem is told.

The decisions are pure (links from the selector, the degrader's per-packet
choice, netem's arguments, the netlink encoding), so they are checked here
cheaply; tests/test_faults_degrade.py applies them on real nodes.
"""
from __future__ import annotations

import argparse
import random
import struct
from types import SimpleNamespace

import pytest

from faults.context import FaultContext
from faults.loss import LossFault
from faults.registry import create
from nuclei import Journal, NucleusError
from nuclei import degrade_node as node_program
from nuclei.degrade import Degradation, queue_rules

NODES = ["n1", "n2", "n3", "n4", "n5"]


def context(tmp_path, leader: str | None = None, seed: int = 1) -> FaultContext:
    nodes = [SimpleNamespace(name=n, host=f"10.0.0.{i}", workdir=f"/w/{n}") for i, n in enumerate(NODES, 1)]
    return FaultContext(pool=None, nodes=nodes, rng=random.Random(seed), journal=Journal(tmp_path / "j.jsonl"),
                        leader=lambda role: leader)


def symmetric(ends: dict[str, list[str]]) -> bool:
    return all(node in ends.get(peer, []) for node, peers in ends.items() for peer in peers)


def test_fixed_degrades_every_link_between_the_targets_and_the_rest_at_both_ends(tmp_path) -> None:
    chosen, ends = create("fixed-delay", targets=["n1", "n2"]).plan(context(tmp_path))
    assert chosen == ["n1", "n2"]
    assert ends == {"n1": ["n3", "n4", "n5"], "n2": ["n3", "n4", "n5"], "n3": ["n1", "n2"],
                    "n4": ["n1", "n2"], "n5": ["n1", "n2"]}


def test_leader_degrades_the_leaders_links_only_and_no_leader_means_nothing(tmp_path, monkeypatch) -> None:
    chosen, ends = create("leader-corrupt").plan(context(tmp_path, leader="n3"))
    assert chosen == ["n3"] and ends["n3"] == ["n1", "n2", "n4", "n5"] and ends["n1"] == ["n3"]
    monkeypatch.setattr(FaultContext, "find_leader", lambda self, timeout=10.0: None)
    assert create("leader-corrupt").start(context(tmp_path)).targets == []


@pytest.mark.parametrize("seed", range(6))
def test_random_picks_the_same_nodes_as_random_loss_and_degrades_both_ends(tmp_path, seed: int) -> None:
    chosen, ends = create("random-reorder").plan(context(tmp_path, seed=seed))
    loss_chosen, pairs = LossFault().plan(context(tmp_path, seed=seed))
    assert chosen == loss_chosen and symmetric(ends)
    assert {(a, b) for a, peers in pairs.items() for b in peers} <= {(a, b) for a, peers in ends.items() for b in peers}


@pytest.mark.parametrize("kind, numbers, message", [
    ("delay", {"ms": 10, "jitter": 20}, "jitter .* must not exceed ms"),
    ("delay", {"ms": 0}, "ms must be > 0"),
    ("reorder", {"ms": 5}, "probability must be in"),
    ("corrupt", {"probability": 1.5}, r"probability must be a number in \[0, 1\]"),
    ("jam", {}, "kind must be one of"),
])
def test_bad_degradations_are_refused_with_what_is_wrong(kind: str, numbers: dict, message: str) -> None:
    with pytest.raises(NucleusError, match=message):
        Degradation(kind, **numbers)


def test_netem_is_told_numbers_only() -> None:
    assert Degradation("delay", ms=100, jitter=20).netem() == "delay 100.000ms 20.000ms"
    assert Degradation("reorder", ms=20, probability=0.25).netem() == "delay 20.000ms reorder 25.0000%"
    assert Degradation("duplicate", probability=0.1).netem() == "duplicate 10.0000%"
    assert Degradation("corrupt", probability=0.05).netem() == "corrupt 5.0000%"


def test_queue_rules_let_the_degraders_own_duplicates_and_a_dead_degraders_packets_pass() -> None:
    rules = queue_rules(["10.0.0.2", "10.0.0.3"], "chaos-x-1")
    assert len(rules) == 2 and all("! --mark 0xc4a1" in r and r.endswith("--queue-bypass") for r in rules)
    assert all("--comment chaos-x-1 " in r for r in rules)


def test_flip_bit_damages_exactly_one_bit_after_the_ip_header() -> None:
    packet = bytes([0x45]) + bytes(19) + bytes(range(40))
    rng = random.Random(3)
    for _ in range(200):
        damaged = node_program.flip_bit(packet, rng)
        diff = [i for i, (a, b) in enumerate(zip(packet, damaged)) if a != b]
        assert len(diff) == 1 and diff[0] >= 20 and bin(packet[diff[0]] ^ damaged[diff[0]]).count("1") == 1


def test_the_degraders_holds_stay_in_their_bounds() -> None:
    def degrader(**values):
        base = {"kind": "delay", "ms": 0.0, "jitter": 0.0, "probability": 0.0, "seed": 1}
        return node_program.Degrader(argparse.Namespace(**{**base, **values}))

    delay = degrader(ms=50, jitter=10)
    assert all(0.040 <= delay.hold_s() <= 0.060 for _ in range(1000))
    reorder = degrader(kind="reorder", ms=20, probability=0.25)
    holds = [reorder.hold_s() for _ in range(4000)]
    assert set(holds) == {0.0, 0.02} and 0.2 < holds.count(0.0) / len(holds) < 0.3
    duplicate = degrader(kind="duplicate", probability=0.1)
    assert duplicate.hold_s() == 0 and 0.07 < sum(duplicate.hit() for _ in range(4000)) / 4000 < 0.13


def test_netlink_messages_and_attributes_round_trip() -> None:
    payload = node_program.attr(node_program.ATTR_PACKET_HDR, struct.pack("!IHB", 77, 0x0800, 3)) + \
        node_program.attr(node_program.ATTR_PAYLOAD, b"abcde")
    data = node_program.message(node_program.MSG_PACKET, 3146, payload)
    [(kind, body)] = list(node_program.messages(data + b""))
    assert kind == (node_program.NFNL_SUBSYS_QUEUE << 8) | node_program.MSG_PACKET
    assert struct.unpack("!H", body[2:4])[0] == 3146
    found = node_program.attributes(body[4:])
    assert struct.unpack_from("!I", found[node_program.ATTR_PACKET_HDR])[0] == 77
    assert found[node_program.ATTR_PAYLOAD] == b"abcde"
