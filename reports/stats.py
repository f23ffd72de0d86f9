"""Statistics for campaign pages: medians with bootstrap confidence intervals, and
the Mann-Whitney U test for "is this mode's RTO different from that one's".

Repeats turn a campaign into a measurement. RTO samples are few and skewed
(most windows recover in one election, a few wait for a second one), so we use
rank- and resampling-based statistics that assume no distribution: the
percentile bootstrap of the median (scipy.stats.bootstrap) and the two-sided
Mann-Whitney U test (scipy.stats.mannwhitneyu).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
ALPHA = 0.05
RESAMPLES = 2000
# Below this many values a percentile-bootstrap "95 % interval" of the median is little more
# than the sample's range: the pages show the n and no interval.
MIN_CI_N = 6


@dataclass(frozen=True)
class Estimate:
    """A median with its confidence interval (None bounds: too few samples for one)."""

    median: float | None
    low: float | None
    high: float | None
    n: int

    def as_json(self) -> dict[str, float | int | None]:
        return {"median": self.median, "low": self.low, "high": self.high, "n": self.n}


@dataclass(frozen=True)
class Comparison:
    """Two samples compared: U statistic, p-value and the verdict at ALPHA."""

    u: float | None
    p_value: float | None
    significant: bool
    faster: str | None     # the label of the sample with the lower median, if significant
    note: str
    tested: bool = True    # False: too few samples for the test to reach ALPHA at all


def quantile(values: Sequence[float], q: float) -> float | None:
    """The q-quantile (linear interpolation), None for no values."""
    return float(np.quantile(np.asarray(values, dtype=float), q)) if len(values) else None


def median_ci(values: Sequence[float], seed: int = 0, confidence: float = CONFIDENCE) -> Estimate:
    """The median and its percentile-bootstrap confidence interval.

    Fewer than two distinct values have no spread to resample: the interval is
    then the value itself (one value) or undefined (none). The seed makes the
    interval (and so the page) the same on every render.
    """
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return Estimate(None, None, None, 0)
    median = float(np.median(data))
    if data.size < 2 or np.all(data == data[0]):
        return Estimate(median, median, median, int(data.size))
    result = stats.bootstrap((data,), np.median, confidence_level=confidence, n_resamples=RESAMPLES,
                             method="percentile", random_state=np.random.default_rng(seed))
    low, high = result.confidence_interval
    # The interval reported always holds the point estimate it goes with.
    return Estimate(median, min(_finite(low, median), median), max(_finite(high, median), median), int(data.size))


def _finite(value: float, fallback: float) -> float:
    return fallback if math.isnan(value) else float(value)


def smallest_p(n_a: int, n_b: int) -> float:
    """The smallest two-sided p-value the exact Mann-Whitney test can give for these
    sample sizes (the most extreme ordering of all): 2 / C(n_a + n_b, n_a)."""
    if n_a < 1 or n_b < 1:
        return 1.0
    return min(1.0, 2 / math.comb(n_a + n_b, n_a))


def min_samples(alpha: float = ALPHA) -> int:
    """The least n per sample (equal sizes) at which the test can reach `alpha` at all."""
    n = 1
    while smallest_p(n, n) >= alpha:
        n += 1
    return n


def compare(a: Sequence[float], b: Sequence[float], labels: tuple[str, str], alpha: float = ALPHA) -> Comparison:
    """Two-sided Mann-Whitney U test of sample `a` against `b`; not run when the sizes
    are too small for any ordering of the values to reach `alpha` (then no p-value could
    ever say "different", and "no significant difference" would say nothing)."""
    if smallest_p(len(a), len(b)) >= alpha:
        return Comparison(None, None, False, None,
                          f"too few samples to test (n = {len(a)} vs {len(b)}; the two-sided Mann-Whitney test "
                          f"needs at least {min_samples(alpha)} per side to reach p < {alpha})", tested=False)
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if np.all(x == x[0]) and np.all(y == y[0]) and x[0] == y[0]:
        return Comparison(None, 1.0, False, None, "identical samples")
    result = stats.mannwhitneyu(x, y, alternative="two-sided")
    p = float(result.pvalue)
    significant = p < alpha
    faster = None
    if significant:
        faster = labels[0] if np.median(x) < np.median(y) else labels[1]
    note = (f"{faster} lower (p = {p:.3g} < {alpha})" if significant
            else f"no significant difference (p = {p:.3g})")
    return Comparison(float(result.statistic), p, significant, faster, note)
