"""How often does one seeded run catch an expected-unsafe profile or a library bug?
Prints the catch rate.

Runs `controller-unclean` (master-only ack, unclean election) under
`leader-partition --target brokers` with the run defaults (fault windows of
failure detection plus a margin) for several seeds on a throwaway namespace
cluster of 5 nodes, or of as many as the profile needs (root), checks all
runs with one Spark session, and prints per seed the verdict, lost
acknowledged messages, lost after consume, inconsistent offsets, failovers
and, for crash faults, the unsynced bytes the crash dropped, then how many
seeds caught it: over every seed attempted (a run that did not complete did
not catch anything) and over the completed ones, both printed. A catch is a
safety anomaly (harness/campaign/teeth.py), as `chaos teeth` counts it; the
invalid runs are printed beside. `--bug NAME` switches a library
bug on (sut/bugs.py, docs/teeth.md); the load average before and after is the
same-box reference (a loaded box stretches the runs, not the verdicts).

    .venv/bin/python bench/catch_rate.py [--seeds 1,2,3,4,5] [--timing fast] [--time 20]
    .venv/bin/python bench/catch_rate.py --profile master-slave-async --fault leader-crash \
        --timing default --time 60 --interval 20 --recovery 20 --seeds 1,2,3,4,5,6,7,8,9,10
    .venv/bin/python bench/catch_rate.py --profile controller-3 --bug read-beyond-confirm-offset
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
from harness.campaign.teeth import safety_anomalies
from harness.run import RunLifecycle
from harness.spec import build_spec
from inventory import netns
from sut import systems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="controller-unclean")
    parser.add_argument("--fault", default="leader-partition", help="fault, or faults joined by + as a campaign entry")
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument("--timing", default="fast", help="SUT timing scale (fast = a tenth of RocketMQ's)")
    parser.add_argument("--time", type=float, default=20.0)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--interval", type=float, help="quiet seconds before each fault [run default]")
    parser.add_argument("--fault-duration", type=float, help="seconds each fault lasts [run default]")
    parser.add_argument("--recovery", type=float, help="seconds after the last fault [run default]")
    parser.add_argument("--target", default="brokers", help="roles faults may hit ('' for every role)")
    parser.add_argument("--bug", action="append", default=[], help="library bug to switch on, repeatable")
    parser.add_argument("--workload", default="queue", help="queue, log or register")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    name = f"catch-{os.getpid()}"
    inventory = netns.up(name, max(5, systems.profile(args.profile).nodes_needed), persistent=False)
    store = Path(tempfile.mkdtemp(prefix="catch-rate-"))
    runs, attempted = [], []
    try:
        for seed in [int(s) for s in args.seeds.split(",")]:
            spec = build_spec({"profile": args.profile, "workload": args.workload, "faults": args.fault.split("+"),
                               "targets": [args.target] if args.target else None, "timing": args.timing,
                               "time": args.time, "interval": args.interval, "duration": args.fault_duration,
                               "recovery": args.recovery, "rate": args.rate, "concurrency": args.concurrency,
                               "seed": seed, "bugs": args.bug or None,
                               "inventory": inventory.source, "store": store, "check": False})
            began = time.monotonic()
            outcome = RunLifecycle(spec, Console(stderr=True), show_progress=False).execute()
            print(f"seed {seed}: run {outcome.status} in {time.monotonic() - began:.0f}s", flush=True)
            attempted.append(seed)
            if outcome.status == "complete":
                runs.append((seed, outcome.run.path))
    finally:
        netns.down(name)
    began = time.monotonic()
    results = check_runs([path for _, path in runs])
    print(f"checked {len(runs)} runs in {time.monotonic() - began:.0f}s")
    print("| seed | verdict | acknowledged | lost | lost after consume | inconsistent offsets | failovers "
          "| crash: unsynced bytes dropped (tries) | invalid by | safety anomalies |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (seed, path), result in zip(runs, results):
        counts = (result["checkers"].get("queue") or {}).get("counts", {})
        invalid = [name for name, section in result["checkers"].items()
                   if isinstance(section, dict) and section.get("valid") is False]
        print(f"| {seed} | {json.dumps(result['valid'])} | {counts.get('acknowledged')} | {counts.get('lost')} "
              f"| {counts.get('lost_after_consume')} | {counts.get('inconsistent_offsets')} "
              f"| {result['checkers']['rto'].get('failovers')} | {crash_losses(path)} "
              f"| {', '.join(invalid) or '–'} | {'; '.join(safety_anomalies(result['checkers'])) or '–'} |")
    bugs = f", bugs {'+'.join(args.bug)}" if args.bug else ""
    print(f"{rate_line(tally(attempted, [seed for seed, _ in runs], results))} ({args.profile}, {args.workload}{bugs}, "
          f"{args.fault} --target {args.target or 'all'}, timing {args.timing}, {args.time:g}s, rate {args.rate:g}, "
          f"concurrency {args.concurrency}); reference: load average {load_before:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after")
    return 0


def tally(attempted: list[int], completed: list[int], results: list[dict]) -> dict[str, int]:
    """Catches over every attempted seed: a seed whose run did not complete is not caught."""
    caught = sum(bool(safety_anomalies(r["checkers"])) for r in results)
    invalid = sum(r["valid"] is False for r in results)
    return {"attempted": len(attempted), "completed": len(completed), "caught": caught, "invalid": invalid}


def rate_line(t: dict[str, int]) -> str:
    """`caught 3 of 5 seeds (60%); 3 of 4 completed runs (75%); 4 invalid`."""
    def share(n: int, of: int) -> str:
        return f"{n / of:.0%}" if of else "–"
    return (f"caught {t['caught']} of {t['attempted']} seeds ({share(t['caught'], t['attempted'])}); "
            f"{t['caught']} of {t['completed']} completed runs ({share(t['caught'], t['completed'])}); "
            f"{t['invalid']} invalid")


def crash_losses(run_dir: Path) -> str:
    """What every crash of the run dropped: `1145 (1)`-style, from nemesis.jsonl."""
    shown = []
    try:
        lines = (run_dir / "nemesis.jsonl").read_text().splitlines()
    except OSError:
        return "–"
    for line in lines:
        event = json.loads(line)
        for loss in ((event.get("value") or {}).get("lost") or {}).values():
            shown.append(f"{loss.get('unsynced_bytes')} ({loss.get('instant_tries', '–')})")
    return ", ".join(shown) or "–"


if __name__ == "__main__":
    sys.exit(main())
