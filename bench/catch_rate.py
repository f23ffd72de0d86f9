"""How often does one seeded run catch an expected-unsafe profile? Prints the catch rate.

Runs `controller-unclean` (master-only ack, unclean election) under
`leader-partition --target brokers` with the run defaults (fault windows of
failure detection plus a margin) for several seeds on a throwaway 5-node
namespace cluster (root), checks all runs with one Spark session, and prints
per seed the verdict, lost acknowledged messages, lost after consume,
inconsistent offsets and failovers, then how many seeds caught it.

    .venv/bin/python bench/catch_rate.py [--seeds 1,2,3,4,5] [--timing fast] [--time 20]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console

from checkers.pipeline import check_runs
from harness.run import RunLifecycle
from harness.spec import build_spec
from inventory import netns


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="controller-unclean")
    parser.add_argument("--fault", default="leader-partition")
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument("--timing", default="fast", help="SUT timing scale (fast = a tenth of RocketMQ's)")
    parser.add_argument("--time", type=float, default=20.0)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--concurrency", type=int, default=10)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    name = f"catch-{os.getpid()}"
    inventory = netns.up(name, 5, persistent=False)
    store = Path(tempfile.mkdtemp(prefix="catch-rate-"))
    runs = []
    try:
        for seed in [int(s) for s in args.seeds.split(",")]:
            spec = build_spec({"profile": args.profile, "workload": "queue", "faults": [args.fault],
                               "targets": ["brokers"], "timing": args.timing, "time": args.time,
                               "rate": args.rate, "concurrency": args.concurrency, "seed": seed,
                               "inventory": inventory.source, "store": store, "check": False})
            began = time.monotonic()
            outcome = RunLifecycle(spec, Console(stderr=True), show_progress=False).execute()
            print(f"seed {seed}: run {outcome.status} in {time.monotonic() - began:.0f}s", flush=True)
            if outcome.status == "complete":
                runs.append((seed, outcome.run.path))
    finally:
        netns.down(name)
    began = time.monotonic()
    results = check_runs([path for _, path in runs])
    print(f"checked {len(runs)} runs in {time.monotonic() - began:.0f}s")
    caught = 0
    print("| seed | verdict | lost | lost after consume | inconsistent offsets | failovers |")
    print("|---|---|---|---|---|---|")
    for (seed, _), result in zip(runs, results):
        counts = result["checkers"]["queue"].get("counts", {})
        caught += result["valid"] is False
        print(f"| {seed} | {json.dumps(result['valid'])} | {counts.get('lost')} | {counts.get('lost_after_consume')} "
              f"| {counts.get('inconsistent_offsets')} | {result['checkers']['rto'].get('failovers')} |")
    print(f"caught {caught} of {len(runs)} ({args.profile}, {args.fault} --target brokers, timing {args.timing}, "
          f"{args.time:g}s, rate {args.rate:g}, concurrency {args.concurrency})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
