"""Real Apache RocketMQ on this machine: cluster start time and memory per mode, and
failover time per mode and fault over several seeds, each beside the model's figure
for the same profile on the same box (the same-box reference).

    .venv/bin/python bench/rocketmq.py start                       # start time, memory
    .venv/bin/python bench/rocketmq.py failover --seeds 3          # RTO per mode x fault
    .venv/bin/python bench/rocketmq.py failover --faults leader-kill --modes controller --seeds 1
    .venv/bin/python bench/rocketmq.py failover --store /tmp/rmq-runs   # keep the runs and their logs
    .venv/bin/python bench/rocketmq.py releases --versions 5.5.0 --rounds 2   # start per release
    .venv/bin/python bench/rocketmq.py archive --rounds 3          # start with / without CDS archives

Root (a 4-node network-namespace cluster, brought up and taken down here).
`start`: install (first upload, then the content-addressed skip), start -> healthy
(every broker routed, the group has a master), the resident memory of every SUT
process. `failover`: `chaos run` (queue workload, timing fast, 40 s with two 12 s
fault windows, 15 s recovery) per seed; the figure is the rto checker's
unavailable time per fault window (first failed write after the fault starts to
the next successful one), p50 and max over every window. `releases`: start ->
healthy and memory of rmq-controller-3 on each release, rounds interleaved with
the pinned release's (the same-box reference), and the ratio. `archive`: start ->
healthy of rmq-controller-3 with each JVM mapping its class-data-sharing archive,
rounds interleaved with starts without (the same-box reference), and the ratio;
the first install's archive making is timed too. Nothing is asserted.
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from inventory import Pool, netns

MODES = {"dledger": ("rmq-dledger-3", "dledger-3"), "controller": ("rmq-controller-3", "controller-3")}


def rss_mb(root: str) -> float:
    """Resident memory of every process whose command line names a path under root."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if root.encode() not in (entry / "cmdline").read_bytes():
                continue
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def measure_start(inventory: Any, pool: Pool, profile: str, run_dir: str,
                  version: str | None = None, class_archive: bool = True) -> dict[str, float]:
    from sut.deploy import make_deployer
    if class_archive:
        deployer = make_deployer(pool, inventory, profile, run_dir, timing="fast", release=version)
    else:
        from sut.rocketmq.deploy import RocketMQDeployer
        deployer = RocketMQDeployer(pool, inventory, profile, run_dir, timing="fast", version=version,
                                    class_archives=False)
    out: dict[str, float] = {}
    started = time.monotonic()
    deployer.install()
    out["install_s"] = time.monotonic() - started
    started = time.monotonic()
    deployer.install()
    out["install_again_s"] = time.monotonic() - started
    try:
        started = time.monotonic()
        deployer.start()
        deployer.wait_healthy(180)
        out["healthy_s"] = time.monotonic() - started
        time.sleep(2)
        root = str(Path(inventory.nodes[0].workdir).parent)
        out["rss_mb"] = rss_mb(root)
    finally:
        deployer.stop()
    return out


def bench_start(inventory: Any, pool: Pool, modes: list[str]) -> None:
    print(f"{'profile':<18} {'install':>8} {'again':>6} {'healthy':>8} {'RSS MB':>7}   "
          f"same-box reference (the model's profile: healthy, RSS MB)")
    with tempfile.TemporaryDirectory() as base:
        for mode in modes:
            real, model = MODES[mode]
            r = measure_start(inventory, pool, real, f"{base}/{real}")
            m = measure_start(inventory, pool, model, f"{base}/{model}")
            print(f"{real:<18} {r['install_s']:>7.1f}s {r['install_again_s']:>5.1f}s {r['healthy_s']:>7.1f}s "
                  f"{r['rss_mb']:>7.0f}   {model}: {m['healthy_s']:.1f}s, {m['rss_mb']:.0f} MB", flush=True)


def bench_releases(inventory: Any, pool: Pool, versions: list[str], rounds: int) -> None:
    from sut.rocketmq.release import ensure, pinned
    reference = pinned()
    for version in [reference, *versions]:
        ensure(version)
    healthy: dict[str, list[float]] = {v: [] for v in [reference, *versions]}
    rss: dict[str, list[float]] = {v: [] for v in healthy}
    with tempfile.TemporaryDirectory() as base:
        for round_ in range(rounds):
            for version in healthy:
                out = measure_start(inventory, pool, "rmq-controller-3", f"{base}/{version}-{round_}", version)
                healthy[version].append(out["healthy_s"])
                rss[version].append(out["rss_mb"])
    ref = statistics.median(healthy[reference])
    print(f"rmq-controller-3 start -> healthy (median of {rounds}), same-box reference RocketMQ {reference}: "
          f"{ref:.1f}s, {statistics.median(rss[reference]):.0f} MB")
    for version in versions:
        mid = statistics.median(healthy[version])
        print(f"  RocketMQ {version:<7} {mid:5.1f}s  ratio {mid / ref:4.2f}  RSS {statistics.median(rss[version]):.0f} MB "
              f"(rounds: {', '.join(f'{v:.1f}' for v in healthy[version])}; reference: "
              f"{', '.join(f'{v:.1f}' for v in healthy[reference])})", flush=True)


def bench_archive(inventory: Any, pool: Pool, rounds: int) -> None:
    healthy: dict[bool, list[float]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as base:
        first = measure_start(inventory, pool, "rmq-controller-3", f"{base}/first", class_archive=True)
        print(f"first install with archives (upload if needed, class lists, dumps): {first['install_s']:.1f}s; "
              f"again {first['install_again_s']:.1f}s", flush=True)
        for round_ in range(rounds):
            for archive in (False, True):
                out = measure_start(inventory, pool, "rmq-controller-3", f"{base}/{archive}-{round_}",
                                    class_archive=archive)
                healthy[archive].append(out["healthy_s"])
    ref, mid = statistics.median(healthy[False]), statistics.median(healthy[True])
    print(f"rmq-controller-3 start -> healthy (median of {rounds}): with archives {mid:.1f}s, ratio "
          f"{mid / ref:.2f} against the same-box reference without them {ref:.1f}s "
          f"(with: {', '.join(f'{v:.1f}' for v in healthy[True])}; without: "
          f"{', '.join(f'{v:.1f}' for v in healthy[False])})", flush=True)


def run_rto(inventory: Any, profile: str, fault: str, seed: int, store: Path) -> list[float]:
    from harness.run import RunLifecycle
    from harness.spec import build_spec
    spec = build_spec({"profile": profile, "workload": "queue", "faults": [fault], "time": 40, "interval": 8,
                       "duration": 12, "recovery": 15, "rate": 20, "concurrency": 4, "timing": "fast",
                       "targets": ["brokers"], "seed": seed, "inventory": inventory.source, "store": store,
                       "route_refresh": 1.0})
    outcome = RunLifecycle(spec, Console(stderr=True), show_progress=False).execute()
    if outcome.status != "complete":
        print(f"  {profile} {fault} seed {seed}: {outcome.status} {outcome.error}")
        return []
    rto = json.loads((outcome.run.path / "results.json").read_text())["checkers"]["rto"]
    return [w["unavailable_s"] for w in rto["windows"] if w.get("exercises_failover")]


def describe(values: list[float]) -> str:
    if not values:
        return "no windows"
    return f"p50 {statistics.median(values):5.2f}s  max {max(values):5.2f}s  ({len(values)} windows)"


def bench_failover(inventory: Any, modes: list[str], faults: list[str], seeds: int, store: Path | None) -> None:
    with tempfile.TemporaryDirectory() as base:
        store = store or Path(base) / "store"
        for mode in modes:
            real, model = MODES[mode]
            for fault in faults:
                real_rto, model_rto = [], []
                for seed in range(1, seeds + 1):
                    real_rto += run_rto(inventory, real, fault, seed, store)
                    model_rto += run_rto(inventory, model, fault, seed, store)
                print(f"{real:<18} {fault:<17} {describe(real_rto)}   same-box reference {model}: "
                      f"{describe(model_rto)}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["start", "failover", "releases", "archive"])
    parser.add_argument("--versions", default="5.5.0", help="releases: the releases beside the pinned one")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--modes", default="dledger,controller")
    parser.add_argument("--faults", default="leader-kill,leader-partition")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--store", type=Path, help="failover: keep the runs (logs, histories) here")
    args = parser.parse_args()
    modes = args.modes.split(",")
    name = f"bench-rmq-{int(time.time()) % 100000}"
    inventory = netns.up(name, 4, persistent=False)
    try:
        with Pool(inventory) as pool:
            if args.what == "start":
                bench_start(inventory, pool, modes)
            elif args.what == "archive":
                bench_archive(inventory, pool, args.rounds)
            elif args.what == "releases":
                bench_releases(inventory, pool, args.versions.split(","), args.rounds)
            else:
                bench_failover(inventory, modes, args.faults.split(","), args.seeds, args.store)
    finally:
        netns.down(name)


if __name__ == "__main__":
    main()
