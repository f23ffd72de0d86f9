"""Randomized, seeded fault schedules against Controller mode (real processes).

The same seed gives the same schedule of kills and suspends on loopback; a
suspended process keeps its sockets but stops answering, which is how a
partitioned node looks to its peers. Afterwards every message acknowledged
SEND_OK must be readable in `controller-3`, and nothing read may be a message
nobody sent. Real iptables partitions, and the same schedule on
`controller-unclean`, are in test_controller_partitions.py.
"""
from __future__ import annotations

import pytest

from support.controller_chaos import FAULTS, run_schedule, schedule


@pytest.mark.long
@pytest.mark.parametrize("seed", [190])
def test_seeded_kills_and_suspends_never_lose_an_acknowledged_message(tmp_path, seed):
    ok, attempted, read, log = run_schedule("controller-3", tmp_path, seed)
    assert len(ok) > 20, f"too few successful sends to mean anything: {len(ok)} ({log})"
    missing = set(ok) - set(read)
    assert not missing, f"seed {seed}: {len(missing)} acknowledged messages lost; faults {log}"
    assert set(read) <= set(attempted), "read a message nobody sent"


def test_a_seed_always_gives_the_same_schedule():
    assert schedule(5, 6) == schedule(5, 6)
    assert schedule(5, 6) != schedule(6, 6)
    assert {s.fault for s in schedule(1, 200)} == set(FAULTS)
