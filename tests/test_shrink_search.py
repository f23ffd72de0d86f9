"""The shrink search, pure: ddmin, the steps, tries and shares, budgets, anomaly classes
(a fake trial stands in for real runs; tests/test_shrink_cluster.py runs real ones)."""
from __future__ import annotations

import itertools

import pytest

from harness.schedule import Schedule
from harness.shrink import failure
from harness.shrink.search import (MIN_WINDOW_S, Settings, Shrinker, TryResult, compacted, ddmin, size)

from support.shrink import DETECTION, loses_messages, mixed_schedule

def fake(model=loses_messages, log=None):
    def trial(schedule: Schedule) -> TryResult:
        if log is not None:
            log.append(schedule)
        return TryResult(model(schedule))
    return trial


@pytest.mark.parametrize("culprits", [{3}, {0}, {7}, {2, 5}, {0, 7}, {1, 4, 6}])
def test_ddmin_finds_exactly_the_windows_that_together_fail(culprits):
    calls = []

    def fails(subset):
        calls.append(subset)
        return culprits <= set(subset)
    assert sorted(ddmin(list(range(8)), fails)) == sorted(culprits)
    assert len(calls) <= 8 * 8  # ddmin's worst case is quadratic


def test_ddmin_keeps_one_item_and_never_tries_the_empty_set():
    seen = []
    assert ddmin([1], lambda s: seen.append(s) or True) == [1] and not seen
    assert ddmin([1, 2], lambda s: bool(seen.append(s)) or len(s) > 0) in ([1], [2])
    assert [] not in seen


def test_the_mixed_schedule_shrinks_to_one_master_partition_longer_than_detection():
    tried: list[Schedule] = []
    shrinker = Shrinker(mixed_schedule(), fake(log=tried), "lost", Settings(tries=1, confirm=1, max_runs=60),
                        clock=itertools.count().__next__)
    outcome = shrinker.run()
    assert outcome.status == "done"
    (window,) = outcome.minimal.windows
    assert window.name == "leader-partition" and window.targets == ("brokers",) and window.seed == 3
    assert DETECTION < window.length <= 2 * DETECTION  # halved while it still failed
    assert outcome.minimal.shape.concurrency == 2 and outcome.minimal.shape.queues == 1
    assert outcome.minimal.shape.time == pytest.approx(window.end + 0.5)
    assert window.start == 1.0
    assert size(outcome.minimal)["operations"] < size(mixed_schedule())["operations"] / 4
    assert all(s.windows for s in tried)  # never zero faults
    assert outcome.reproduction_rate == 1.0


def test_a_candidate_fails_when_the_stated_share_of_its_tries_fail_and_trying_stops_early():
    results = iter([frozenset({"lost"}), frozenset(), frozenset({"lost"})] * 50)
    shrinker = Shrinker(mixed_schedule(), lambda s: TryResult(next(results)), "lost",
                        Settings(tries=3, share=0.6, max_runs=7, confirm=0), clock=lambda: 0.0)
    outcome = shrinker.run()
    first = shrinker.attempts[1]
    assert [t["same_failure"] for t in first.tries] == [True, False, True] and first.failing is True
    assert outcome.status == "budget" and outcome.runs == 7


def test_a_different_anomaly_class_is_not_the_same_failure():
    shrinker = Shrinker(mixed_schedule(), fake(lambda s: frozenset({"duplicated"})), "lost",
                        Settings(tries=2, share=0.5, max_runs=100, confirm=0), clock=lambda: 0.0)
    outcome = shrinker.run()
    assert outcome.minimal == mixed_schedule()  # nothing smaller fails with `lost`
    assert all(a.failing is False for a in shrinker.attempts if a.step != "original")
    assert all(len(a.tries) == 2 for a in shrinker.attempts if a.step != "original")


def test_the_time_budget_stops_the_search_and_keeps_the_best_so_far():
    clock = iter(range(0, 10_000, 100)).__next__
    shrinker = Shrinker(mixed_schedule(), fake(), "lost", Settings(tries=1, max_seconds=450, max_runs=99),
                        clock=clock)
    outcome = shrinker.run()
    assert outcome.status == "budget" and outcome.runs <= 3
    assert len(outcome.minimal.windows) < len(mixed_schedule().windows)


def test_a_stop_during_a_try_propagates_and_the_best_so_far_is_kept():
    calls = []

    def trial(schedule):
        calls.append(schedule)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return TryResult(loses_messages(schedule))
    shrinker = Shrinker(mixed_schedule(), trial, "lost", Settings(tries=1), clock=lambda: 0.0)
    with pytest.raises(KeyboardInterrupt):
        shrinker.run()
    assert shrinker.outcome("interrupted").minimal == shrinker.best
    assert len(shrinker.best.windows) < 5


def test_compacted_moves_windows_early_and_ends_the_main_phase_after_the_last():
    schedule = mixed_schedule().replace(windows=[mixed_schedule().windows[2].model_dump()])
    short = compacted(schedule)
    assert short.windows[0].start == 1.0 and short.shape.time == 7.5
    assert compacted(short) == short
    assert MIN_WINDOW_S > 0


@pytest.mark.parametrize("results,expected", [
    ({"valid": True, "checkers": {"queue": {"valid": True, "counts": {"lost": 0}}}}, set()),
    ({"valid": False, "checkers": {"queue": {"valid": False, "duplicates_allowed": True,
                                             "counts": {"lost": 3, "inconsistent_offsets": 2, "duplicated": 9}}}},
     {"lost", "inconsistent-offsets"}),
    ({"valid": False, "checkers": {"queue": {"valid": False, "duplicates_allowed": False,
                                             "counts": {"duplicated": 1}}}}, {"duplicated"}),
    ({"valid": False, "checkers": {"queue": {"valid": True}, "linearizable": {"valid": False}}},
     {"non-linearizable"}),
    ({"valid": False, "checkers": {"queue": {"valid": False, "counts": {"lost_after_consume": 1}},
                                   "session": {"valid": False}}}, {"lost-after-consume", "session"}),
])
def test_anomaly_classes_from_results(results, expected):
    assert failure.classes(results) == expected


def test_the_default_target_prefers_lost_then_lost_after_consume():
    assert failure.default_target(frozenset({"inconsistent-offsets", "lost"})) == "lost"
    assert failure.default_target(frozenset({"inconsistent-offsets", "lost-after-consume"})) == "lost-after-consume"
    assert failure.default_target(frozenset()) is None
