"""How big a run may be: refused before anything is created, for `chaos run` and campaigns alike.

One control node records every operation (a history line each) and follows
every fault window: a size far beyond what it can record fails hours into a
run or exhausts its memory before the first operation, so it is refused up
front with the product that is too large.
"""
from __future__ import annotations

MAX_SECONDS = 30 * 24 * 3600        # a month of workload: longer is a typo
MAX_OPERATIONS = 50_000_000         # about 10 GB of history at ~200 bytes a line
MAX_FAULT_WINDOWS = 1_000_000


def run_size_problem(rate: float, seconds: float, fault_period: float | None) -> str | None:
    """Why a run of `seconds` at `rate` ops/s with a fault every `fault_period` s is too big, or None."""
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
