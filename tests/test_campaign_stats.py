"""Medians with bootstrap CIs and the Mann-Whitney U test behind compare.html."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from reports.stats import compare, median_ci


def test_the_interval_holds_the_median_and_is_the_same_on_every_call():
    values = [2.1, 2.4, 2.2, 3.9, 2.3, 2.6, 2.0, 2.8]
    first, again = median_ci(values), median_ci(values)
    assert first == again
    assert first.low <= first.median <= first.high and first.low < first.high and first.n == 8


def test_one_value_or_none_give_a_degenerate_or_empty_interval():
    assert median_ci([3.0]).as_json() == {"median": 3.0, "low": 3.0, "high": 3.0, "n": 1}
    assert median_ci([]).median is None


def test_clearly_separated_samples_are_significant_and_the_faster_one_is_named():
    dledger = [2.9, 3.1, 3.0, 3.2, 2.8, 3.05, 3.15, 2.95]
    controller = [11.0, 12.5, 11.8, 12.1, 13.0, 11.2, 12.2, 11.9]
    result = compare(dledger, controller, ("dledger-3", "controller-3"))
    assert result.significant and result.p_value < 0.01 and result.faster == "dledger-3"


def test_overlapping_samples_are_not_significant_and_tiny_ones_are_not_tested():
    result = compare([1.0, 2.0, 3.0, 4.0], [1.5, 2.5, 3.5, 4.5], ("a", "b"))
    assert not result.significant and result.faster is None and "no significant" in result.note
    assert compare([1.0], [2.0, 3.0], ("a", "b")).p_value is None


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=100, allow_nan=False), min_size=1, max_size=30))
def test_the_interval_always_brackets_the_median(values):
    estimate = median_ci(values)
    assert estimate.low - 1e-9 <= estimate.median <= estimate.high + 1e-9
