"""How small does `chaos shrink` get a failing run, against the hand-known minimal schedule?

For each expected-unsafe profile (and each bug of the bug library, when the harness has
one: `--bugs`), one seeded run with a mixed schedule of several fault windows (a
nameserver kill, a controller or slave suspend, the profile's known-bad fault, packet
loss) on a throwaway namespace cluster; if it fails, `chaos shrink`'s search on it.
Prints per profile the size of the original and the shrunk schedule (fault windows,
fault seconds, run seconds, planned operations), the hand-known minimal schedule (the
known-bad fault alone, one window of failure detection plus margin, on a main phase
just long enough), the ratio shrunk/minimal, the runs (tries) and the time spent.

    .venv/bin/python bench/shrink.py [--profiles controller-unclean,single-broker] [--max-runs 16]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console

from harness import schedule as schedule_file
from harness.plan import spec_values
from harness.run import RunLifecycle, check
from harness.shrink import failure
from harness.shrink import original as original_run
from harness.shrink.search import LEAD_S, TAIL_S, Settings, size
from harness.shrink.session import shrink
from harness.spec import RunSpec, SpecError, build_spec
from inventory import netns
from sut import bugs as bug_library
from sut import systems

# The fault each unsafe profile is known to fail under, and the roles it hits.
KNOWN_BAD = {"partition": ("leader-partition", ("brokers",)), "crash": ("leader-crash", ("brokers",))}


def profile_for(bug: str) -> str:
    """The safe profile a bug is shrunk on: the first of the bug's mode."""
    mode = bug_library.get(bug).modes[0]
    return next(name for name, p in systems.profiles().items() if p.mode == mode and p.expected_safe)


def known_bad(profile: str) -> tuple[str, tuple[str, ...]]:
    families = systems.profile(profile).unsafe_under
    family = "partition" if "partition" in families or not families else families[0]
    return KNOWN_BAD.get(family, (f"leader-{family}", ("brokers",)))


def mixed(profile: str, seed: int, timing: str, bug: str | None = None) -> schedule_file.Schedule:
    """Four windows: noise around the known-bad fault, which lasts a failover window."""
    fault, roles = known_bad(profile)
    window = systems.failover_window_s(profile, timing)
    other = ("controllers",) if systems.profile(profile).mode == "controller" else ("nameservers",)
    # packet loss needs two nodes; a one-node profile gets a second nameserver kill instead
    noise = "random-loss:probability=0.3" if systems.profile(profile).nodes_needed > 1 else "random-kill"
    W = schedule_file.FaultWindow
    windows = (W(fault="random-kill", targets=("nameservers",), start=1.0, length=round(window / 2, 3)),
               W(fault="random-suspend", targets=other, start=round(2 + window / 2, 3), length=1.0),
               W(fault=fault, targets=roles, start=round(4 + window / 2, 3), length=round(window + 0.5, 3)),
               W(fault=noise, targets=other, start=round(5.5 + 1.5 * window, 3), length=round(window, 3)))
    time_s = round(windows[-1].end + 1.0, 3)
    return schedule_file.Schedule(profile=profile, workload="queue", seed=seed, timing=timing,
                                  shape=schedule_file.Shape(time=time_s, recovery=window, rate=100, concurrency=6,
                                                            queues=4, keys=3),
                                  windows=windows, bugs=(bug,) if bug else ())


def hand_minimal(original: schedule_file.Schedule) -> schedule_file.Schedule:
    """The known-bad fault alone, one failover window long, LEAD_S in, TAIL_S after."""
    fault, roles = known_bad(original.profile)
    length = systems.failover_window_s(original.profile, original.timing)
    window = schedule_file.FaultWindow(fault=fault, targets=roles, start=LEAD_S, length=length)
    return original.replace(windows=[window.model_dump()], shape={"time": round(LEAD_S + length + TAIL_S, 3),
                                                                   "concurrency": 2, "queues": 1})


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "-"


def one(profile: str, args: argparse.Namespace, inventory: Path, store: Path, bug: str | None = None) -> str:
    plan = mixed(profile, args.seed, args.timing, bug)
    values = {**spec_values(plan), "inventory": inventory, "store": store, "check": False}
    try:
        spec: RunSpec = build_spec(values)
    except SpecError as exc:
        return f"| {profile} | refused: {exc} |"
    began = time.monotonic()
    outcome = RunLifecycle(spec, Console(stderr=True), show_progress=False).execute()
    if outcome.status != "complete":
        return f"| {profile} | original run {outcome.status}: {outcome.error} |"
    results = check([outcome.run.path])[0]
    if not failure.classes(results):
        return f"| {profile}{' + ' + bug if bug else ''} | original run valid: nothing to shrink |"
    settings = Settings(tries=args.tries, max_runs=args.max_runs, max_seconds=args.max_minutes * 60,
                        confirm=args.confirm)
    result = shrink(original_run.load(outcome.run.path), settings, Console(stderr=True),
                    log=lambda line: print(line, file=sys.stderr, flush=True))
    o, s, m = size(plan), size(result.outcome.minimal), size(hand_minimal(plan))
    fmt = lambda z: f"{z['windows']} / {z['fault_seconds']:g} s / {z['seconds']:g} s / {z['operations']}"  # noqa: E731
    return (f"| {profile}{' + ' + bug if bug else ''} | {', '.join(sorted(failure.classes(results)))} "
            f"| {fmt(o)} | {fmt(s)} | {fmt(m)} | {ratio(s['windows'], m['windows'])} / "
            f"{ratio(s['fault_seconds'], m['fault_seconds'])} / {ratio(s['seconds'], m['seconds'])} / "
            f"{ratio(s['operations'], m['operations'])} "
            f"| {result.outcome.minimal_failed}/{result.outcome.minimal_tries} "
            f"| {result.outcome.runs} | {time.monotonic() - began:.0f} s |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    unsafe = [name for name, p in systems.profiles().items() if not p.expected_safe]
    parser.add_argument("--profiles", default=",".join(unsafe))
    parser.add_argument("--bugs", default="", help="bug library names, each shrunk on a safe profile of its mode")
    parser.add_argument("--seed", type=int, default=21)
    parser.add_argument("--timing", default="fast")
    parser.add_argument("--tries", type=int, default=1)
    parser.add_argument("--max-runs", type=int, default=16)
    parser.add_argument("--max-minutes", type=float, default=15.0)
    parser.add_argument("--confirm", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    bugs = bug_library.check(b for b in args.bugs.split(",") if b)
    name = f"shrink-{os.getpid()}"
    inventory = netns.up(name, 5, persistent=False)
    store = Path(tempfile.mkdtemp(prefix="bench-shrink-"))
    rows = []
    try:
        for profile in [p for p in args.profiles.split(",") if p]:
            rows.append(one(profile, args, Path(inventory.source), store))
            print(rows[-1], file=sys.stderr, flush=True)
        for bug in bugs:
            rows.append(one(profile_for(bug), args, Path(inventory.source), store, bug))
    finally:
        netns.down(name)
    print("| run | anomalies | original: windows / fault s / run s / ops | shrunk | hand-known minimal "
          "| shrunk/minimal | reproduced | runs | time |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print(f"(timing {args.timing}, seed {args.seed}, tries {args.tries}, budget {args.max_runs} runs / "
          f"{args.max_minutes:g} min per shrink; store {store})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
