"""How big a run may be: refused before anything is created, for `chaos run` and campaigns alike.

One control node records every operation (a history line each) and follows
every fault window: a size far beyond what it can record fails hours into a
run or exhausts its memory before the first operation, so it is refused up
front with the product that is too large.
"""
from __future__ import annotations

MAX_SECONDS = 30 * 24 * 3600        # a month of workload: longer is a typo
MAX_OPERATIONS = 50_000_000         # about 10 GB of history at ~200 bytes a line
# Seeded or read from a schedule file alike; a schedule file's windows cost about
# 1.5 ms each to validate, so this bounds a replay's start to a few minutes.
MAX_FAULT_WINDOWS = 100_000
MIN_RATE = 0.001                    # one operation per 1000 s: lower is a typo, and overflows the gaps
MAX_OP_TIMEOUT = 3600.0             # an hour for one call
MAX_DRAIN_TIMEOUT = 24 * 3600.0     # a day for the final phase
SEED_LIMIT = 2**63                  # seeds are stored and passed on as signed 64-bit integers


def run_size_problem(rate: float, seconds: float, fault_period: float | None,
                     windows: int | None = None) -> str | None:
    """Why a run of `seconds` at `rate` ops/s with a fault every `fault_period` s (or with
    `windows` explicit fault windows) is too big, or None."""
    if windows and (too_many := windows_problem(windows)):
        return too_many
    if seconds > MAX_SECONDS:
        return f"{seconds:g}s of workload is more than the {MAX_SECONDS:g}s (30 days) one run may take"
    operations = rate * seconds
    if operations > MAX_OPERATIONS:
        return (f"rate {rate:g}/s over {seconds:g}s plans {operations:.3g} operations, more than the "
                f"{MAX_OPERATIONS:.3g} one control node can record; lower the rate or the time")
    if fault_period and seconds / fault_period > MAX_FAULT_WINDOWS:
        return (f"a fault every {fault_period:g}s over {seconds:g}s is {seconds / fault_period:.3g} fault "
                f"windows, more than {MAX_FAULT_WINDOWS:.3g}; lengthen the interval or shorten the time")
    return None


def windows_problem(windows: int) -> str | None:
    """Why a schedule of `windows` explicit fault windows is too big, or None."""
    if windows <= MAX_FAULT_WINDOWS:
        return None
    return f"{windows} fault windows, more than the {MAX_FAULT_WINDOWS:.3g} one run may have"
