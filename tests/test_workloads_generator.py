"""The generator model: schedules are pure functions of (seed, spec)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import workloads
from workloads.base import WorkloadOptions
from workloads.generator import NS_PER_S, GeneratorSpec, per_worker, plan
from workloads.queue import QueueWorkload, role_counts

NAMES = sorted(workloads.known())


def schedule(name: str, seed: int, concurrency: int = 5, rate: float = 50.0, duration: float = 10.0,
             **options):
    workload = workloads.get(name)(WorkloadOptions(concurrency=concurrency, **options))
    return plan(GeneratorSpec(seed=seed, rate=rate, concurrency=concurrency, duration=duration), workload)


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_gives_the_same_operations_values_and_offsets(name):
    first, second = schedule(name, seed=42), schedule(name, seed=42)
    assert first == second
    assert [(op.at, op.f, op.key, op.value) for op in first] == \
           [(op.at, op.f, op.key, op.value) for op in second]


@pytest.mark.parametrize("name", NAMES)
def test_another_seed_gives_another_schedule(name):
    assert schedule(name, seed=1) != schedule(name, seed=2)


@given(seed=st.integers(0, 2**31), rate=st.floats(1, 200), duration=st.floats(0.5, 20),
       concurrency=st.integers(2, 12))
@settings(max_examples=50, deadline=None)
def test_offsets_are_increasing_and_inside_the_duration(seed, rate, duration, concurrency):
    ops = schedule("queue", seed, concurrency=concurrency, rate=rate, duration=duration)
    offsets = [op.at for op in ops]
    assert offsets == sorted(offsets)
    assert all(0 <= at < duration * NS_PER_S for at in offsets)
    assert [op.index for op in ops] == list(range(len(ops)))
    assert all(op.worker == op.index % concurrency for op in ops)


def test_rate_is_kept_on_average():
    ops = schedule("register", seed=7, rate=100, duration=60)
    assert 5400 <= len(ops) <= 6600


def test_mix_is_followed_on_average():
    ops = schedule("register", seed=3, rate=200, duration=30)
    counts = {f: sum(op.f == f for op in ops) for f in ("read", "write", "cas")}
    total = sum(counts.values())
    assert abs(counts["read"] / total - 0.5) < 0.05
    assert abs(counts["write"] / total - 0.25) < 0.05


def test_a_custom_mix_replaces_the_default():
    ops = schedule("register", seed=3, mix={"read": 0, "write": 1})
    assert {op.f for op in ops} == {"write"}


def test_unknown_operation_in_the_mix_is_refused():
    with pytest.raises(ValueError, match="unknown operation.*fly"):
        workloads.get("register")(WorkloadOptions(mix={"fly": 1}))


def test_timing_does_not_depend_on_the_values_drawn():
    # Arrivals have their own generator: another mix changes values, not offsets.
    a = [op.at for op in schedule("register", 9)]
    b = [op.at for op in schedule("register", 9, mix={"write": 1})]
    assert a == b


def test_queue_sends_have_unique_ids_and_polls_go_to_owned_queues():
    ops = schedule("queue", seed=5, concurrency=6, queues=4)
    workload = QueueWorkload(WorkloadOptions(concurrency=6, queues=4))
    ids = [op.value["id"] for op in ops if op.f == "send"]
    assert len(ids) == len(set(ids)) > 0
    for op in ops:
        if op.f == "poll":
            assert op.key in workload.owned_queues(op.worker)
        else:
            assert op.worker < workload.producers
    owned = sorted(q for w in range(6) for q in workload.owned_queues(w))
    assert owned == [0, 1, 2, 3]


def test_ordered_queue_mode_gives_each_shard_key_one_producer_and_one_queue():
    ops = [op for op in schedule("queue", seed=5, concurrency=6, queues=3, ordered=True) if op.f == "send"]
    producers: dict[str, set[int]] = {}
    queues: dict[str, set[int]] = {}
    for op in ops:
        producers.setdefault(op.value["shard"], set()).add(op.worker)
        queues.setdefault(op.value["shard"], set()).add(op.key)
    assert all(len(p) == 1 for p in producers.values())
    assert all(len(q) == 1 for q in queues.values())


@pytest.mark.parametrize("concurrency,queues,expected", [(2, 4, (1, 1)), (6, 4, (4, 2)), (12, 2, (10, 2))])
def test_queue_roles_keep_a_producer_and_at_most_one_consumer_per_queue(concurrency, queues, expected):
    assert role_counts(concurrency, queues, QueueWorkload.default_mix) == expected


def test_per_worker_streams_keep_the_plan_order():
    ops = schedule("log", seed=11, concurrency=4)
    streams = per_worker(ops, 4)
    assert sum(map(len, streams)) == len(ops)
    for worker, stream in enumerate(streams):
        assert all(op.worker == worker for op in stream)
        assert [op.at for op in stream] == sorted(op.at for op in stream)


def test_generator_spec_rejects_nonsense():
    with pytest.raises(ValueError, match="rate"):
        GeneratorSpec(seed=1, rate=0, concurrency=1, duration=1)
    with pytest.raises(ValueError, match="concurrency"):
        GeneratorSpec(seed=1, rate=1, concurrency=0, duration=1)
