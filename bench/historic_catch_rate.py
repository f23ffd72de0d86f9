"""How often does one seeded run catch a historic RocketMQ bug on its buggy release, and how
often is the same recipe valid on the fixed release? Prints the catch rate per bug.

Runs the regressions file (campaigns/rocketmq-regressions.yaml: each bug's recipe from
sut/rocketmq/bugs.yaml on both releases, the same seeds on both) with `--seeds` runs per
release, on a throwaway local cluster per bug, as `chaos teeth` does. A seed is caught when
its run on the buggy release shows a safety anomaly (harness/campaign/teeth.py); a run that
did not complete counts as not caught over the seeds attempted, and as not valid on the
fixed release. The load average before and after is the same-box reference (a loaded box
stretches the runs, not the verdicts).

    .venv/bin/python bench/historic_catch_rate.py [--seeds 5] [--bug ID ...] [--store DIR]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from rich.console import Console

from harness.campaign import regressions

FILE = Path(__file__).resolve().parents[1] / "campaigns" / "rocketmq-regressions.yaml"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path, default=FILE)
    parser.add_argument("--seeds", type=int, default=5, help="runs per release and bug")
    parser.add_argument("--bug", action="append", default=[], help="registry id, repeatable [every reachable bug]")
    parser.add_argument("--store", type=Path, help="where the runs go [a temporary directory]")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    spec = regressions.load(args.file, tuple(args.bug))
    spec = spec.model_copy(update={"seeds": args.seeds,
                                   "bugs": tuple(b.id for b in spec.selected() if b.reachable)})
    store = args.store or Path(tempfile.mkdtemp(prefix="historic-catch-"))
    verdicts = regressions.run_regressions(spec, args.file.resolve(), store, Console(stderr=True),
                                           show_progress=False)
    print("| bug | buggy release | caught (of seeds attempted) | fixed release | valid (of seeds attempted) "
          "| verdict | seeds caught: safety anomalies |")
    print("|---|---|---|---|---|---|---|")
    for v in verdicts:
        shown = "; ".join(f"{r['seed']}: {', '.join(r['safety'])}" for r in v.buggy if r["seed"] in v.caught_seeds)
        print(f"| #{v.issue} {v.bug} | {v.buggy_version} | {len(v.caught_seeds)} of {v.seeds} "
              f"({len(v.caught_seeds) / v.seeds:.0%}) | {v.fixed_version} | {len(v.valid_controls)} of {v.seeds} "
              f"| {v.status} | {shown or '–'} |")
    own = "".join(f", #{b.issue} at {b.recipe.rate:g} with {b.recipe.concurrency or spec.concurrency} clients "
                  f"(its recipe's own)" for b in spec.selected() if b.recipe.rate)
    print(f"store {store}; {args.seeds} seed(s) per release, file {args.file.name} (seed {spec.seed}, rate "
          f"{spec.rate:g}{own}, concurrency {spec.concurrency}); "
          f"reference: load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
