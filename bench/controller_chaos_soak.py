"""The seeded controller chaos test, N times in a row (not in CI).

    .venv/bin/python bench/controller_chaos_soak.py                 # seed 190, 20 runs, 12 steps
    .venv/bin/python bench/controller_chaos_soak.py --runs 5 --seed 7

Each run is tests/test_controller_chaos.py's schedule (tests/support/controller_chaos.py) on `controller-3` with real
processes on loopback (kills and suspends of masters, brokers and controllers
while two producers send), then the same checks: every acknowledged message is
read back, nothing read was never sent, and the group is whole again (one
master, every broker in the SyncStateSet, equal logs) within 90 s. Prints one
line per run and the pass count with the convergence times (seconds from the
last heal until whole). Nothing is retried.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from support.controller_chaos import run_schedule  # noqa: E402


def one_run(seed: int, index: int) -> tuple[bool, float | None, str]:
    """(passed, seconds until whole, a one-line verdict)."""
    with tempfile.TemporaryDirectory(prefix=f"soak-{index}-") as tmp:
        try:
            ok, attempted, read, log = run_schedule("controller-3", Path(tmp), seed)
        except AssertionError as exc:
            return False, None, str(exc).splitlines()[0][:300]
    converged = float(log[-1].split()[-1].rstrip("s"))
    missing = set(ok) - set(read)
    invented = set(read) - set(attempted)
    if missing or invented or len(ok) <= 20:
        return False, converged, (f"{len(missing)} acked lost, {len(invented)} never sent, "
                                  f"{len(ok)} acked")
    return True, converged, f"{len(ok)} acked, {len(read)} read"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=190)
    args = parser.parse_args()
    passed, times = 0, []
    for i in range(1, args.runs + 1):
        started = time.monotonic()
        good, converged, verdict = one_run(args.seed, i)
        passed += good
        if converged is not None:
            times.append(converged)
        print(f"run {i:2d}: {'PASS' if good else 'FAIL'} in {time.monotonic() - started:5.1f}s, "
              f"whole after {converged if converged is not None else '-'}s: {verdict}", flush=True)
    print(f"seed {args.seed}: {passed}/{args.runs} passed")
    if times:
        print(f"convergence after the last heal: p50 {statistics.median(times):.1f}s, "
              f"max {max(times):.1f}s, min {min(times):.1f}s")
    return 0 if passed == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
