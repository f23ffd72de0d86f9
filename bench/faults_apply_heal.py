"""How long faults take to apply and to heal on a local namespace cluster (milliseconds).

    .venv/bin/python bench/faults_apply_heal.py                  # 5 and 9 nodes, 20 rounds each
    .venv/bin/python bench/faults_apply_heal.py --nodes 5 --rounds 50

For each cluster size: a random-partition (apply = every node's rules in
place and counted; heal = every rule removed and verified), a full heal of
the chain (flush + verify + unhook), and a random-kill (apply = kill -9 and
verified gone; heal = started again and verified running). "cold" is the
first fault on a fresh pool, which opens the SSH connections; "warm" reuses
them, as a run does. For scale, the time of one warm SSH command is printed
too. Needs root (creates network namespaces). Prints
numbers only; nothing is asserted.
"""
from __future__ import annotations

import argparse
import os
import random
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import faults  # noqa: E402
import nuclei  # noqa: E402
from faults.registry import create  # noqa: E402
from inventory import Pool, docker, netns  # noqa: E402
from nuclei.process import Proc  # noqa: E402

PROVIDERS = {"netns": netns, "docker": docker}

SLEEPER = "import time\nwhile True: time.sleep(60)\n"


def timed(action: Callable[[], object]) -> tuple[float, object]:
    started = time.perf_counter()
    result = action()
    return (time.perf_counter() - started) * 1000, result


def summary(samples: list[float]) -> str:
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return f"p50 {statistics.median(ordered):7.1f}  p90 {p90:7.1f}  max {ordered[-1]:7.1f}"


def bench_size(size: int, rounds: int, work: Path, provider=netns) -> None:
    name = f"bench{os.getpid()}-{secrets.token_hex(2)}"
    inventory = provider.up(name, size, persistent=False)
    procs = {n.name: Proc(n.name, "sleeper", pidfile=f"{n.workdir}/sleeper.pid",
                                 argv=("python3", "-c", SLEEPER, n.workdir), role="broker",
                                 logfile=f"{n.workdir}/sleeper.log") for n in inventory.nodes}
    try:
        with Pool(inventory) as setup:
            for proc in procs.values():
                setup.start_detached(proc.node, list(proc.argv), proc.pidfile, proc.logfile)
        journal = nuclei.Journal(work / f"journal-{size}.jsonl")

        def context(pool: Pool) -> faults.FaultContext:
            return faults.FaultContext(
                pool=pool, nodes=list(inventory.nodes), rng=random.Random(1), journal=journal,
                processes=lambda node: [procs[node]],
                start_process=lambda proc: pool.start_detached(proc.node, list(proc.argv), proc.pidfile,
                                                               proc.logfile))

        partition, kill = create("random-partition"), create("random-kill")
        # Cold: the first fault on a fresh pool pays for opening the SSH connections.
        cold: dict[str, float] = {}
        for key, nemesis in (("partition apply", partition), ("kill apply", kill)):
            with Pool(inventory) as fresh:
                ctx = context(fresh)
                cold[key], handle = timed(lambda: nemesis.start(ctx))
                nemesis.stop(ctx, handle)
        pool = Pool(inventory)
        ctx = context(pool)
        pool.run(inventory.nodes[0].name, "true")
        baseline = [timed(lambda: pool.run(inventory.nodes[0].name, "true"))[0] for _ in range(20)]
        results: dict[str, list[float]] = {key: [] for key in
                                           ("partition apply", "partition heal", "chain heal",
                                            "kill apply", "kill heal")}
        for _ in range(rounds):
            elapsed, handle = timed(lambda: partition.start(ctx))
            results["partition apply"].append(elapsed)
            results["partition heal"].append(timed(lambda: partition.stop(ctx, handle))[0])
            results["chain heal"].append(timed(lambda: nuclei.heal(pool, journal, nodes=ctx.names))[0])
            elapsed, handle = timed(lambda: kill.start(ctx))
            results["kill apply"].append(elapsed)
            results["kill heal"].append(timed(lambda: kill.stop(ctx, handle))[0])
        print(f"{size} nodes, {rounds} rounds (ms); one SSH command (`true`) takes {summary(baseline)}")
        for key, values in results.items():
            first = f"cold {cold[key]:7.1f}" if key in cold else " " * 12
            print(f"  {key:16} {first}   warm {summary(values)}")
        pool.close()
    finally:
        with Pool(inventory) as cleanup:
            for proc in procs.values():
                cleanup.run(proc.node, f"kill -9 $(cat {proc.pidfile}) 2>/dev/null", check=False)
        provider.down(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, action="append", help="cluster size (repeatable; default 5 and 9)")
    parser.add_argument("--rounds", type=int, default=20, help="warm rounds per size")
    parser.add_argument("--provider", choices=sorted(PROVIDERS), default="netns",
                        help="netns nodes or docker containers (needs a Docker engine)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="chaos-bench-") as work:
        for size in args.nodes or [5, 9]:
            bench_size(size, args.rounds, Path(work), PROVIDERS[args.provider])


if __name__ == "__main__":
    main()
