"""Benchmark of the linearizability engine (checkers.knossos).

Prints numbers for docs/benchmarks.md:
  1. Knossos' test set (shared/testdata/knossos): JVM start and the first
     (cold) pass in a fresh process, then warm passes: total and per file,
     EDN parsing reported apart; the pure-Python reference on the same files.
  2. Workloads shaped like the anchors (Porcupine: 102 etcd register
     histories; one 3,424-op, 50-client key-value history, partitioned).
  3. Generated histories of growing length, concurrency, crash rate and key
     count, to show how the cost grows; the Python reference beside the small ones.

    .venv/bin/python bench/linearizability.py            # everything (~15 min)
    .venv/bin/python bench/linearizability.py --quick    # smaller grid (~3 min)
    .venv/bin/python bench/linearizability.py --no-growth  # sections 1 and 2 (~1 min)
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from checkers.knossos import analysis, analyze_batch, jvm, load_history, reference  # noqa: E402
from checkers.knossos.generate import initial, random_history  # noqa: E402
from checkers.knossos.history import operations  # noqa: E402

TESTDATA = ROOT.parent / "shared" / "testdata" / "knossos"
INIT = {"cas-register": 0, "multi-register": {"x": 0, "y": 0}, "mutex": None}


def load_testdata() -> tuple[list[tuple[str, str, list[dict]]], float]:
    files = sorted(TESTDATA.glob("*/*/*.edn"))
    start = time.perf_counter()
    loaded = [(str(f.relative_to(TESTDATA)), f.parts[-3], load_history(f)) for f in files]
    return loaded, time.perf_counter() - start


def check_testdata(histories: list[tuple[str, str, list[dict]]]) -> tuple[float, dict[str, float]]:
    """One pass over the test set; asserts every verdict matches its folder."""
    per_file = {}
    cpu = time.process_time()
    start = time.perf_counter()
    for name, model, history in histories:
        t = time.perf_counter()
        result = analysis(model, history, init=INIT[model], time_limit=60, nil_reads="unknown")
        per_file[name] = time.perf_counter() - t
        if result["valid"] is not ("/good/" in name):
            raise SystemExit(f"wrong verdict for {name}: {result['valid']}")
    per_file["(cpu)"] = time.process_time() - cpu
    return time.perf_counter() - start, per_file


def cold_child(pickled: str) -> None:
    """Runs in a fresh process: JVM start, then the first pass (JIT still cold)."""
    histories = pickle.loads(Path(pickled).read_bytes())
    start = time.perf_counter()
    jvm.engine()
    started = time.perf_counter() - start
    first, _ = check_testdata(histories)
    print(json.dumps({"jvm_start": started, "first_pass": first}))


def section_testdata(rounds: int) -> None:
    print(f"== 1. Knossos test set ==  (load average now: {os.getloadavg()[0]:.1f})")
    histories, parse = load_testdata()
    ops = sum(len(h) for _, _, h in histories)
    print(f"{len(histories)} files, {ops} events; EDN parsing (edn_format): {parse:.2f} s")
    with tempfile.NamedTemporaryFile(suffix=".pickle", delete=False) as f:
        pickle.dump(histories, f)
    child = subprocess.run([sys.executable, __file__, "--cold-child", f.name],
                           capture_output=True, text=True, check=True)
    Path(f.name).unlink()
    cold = json.loads(child.stdout.strip().splitlines()[-1])
    print(f"cold (fresh process): JVM start + engine load {cold['jvm_start']:.2f} s, "
          f"first pass {cold['first_pass']:.3f} s")
    jvm.engine()
    totals, per_files = [], []
    for _ in range(rounds):
        total, per_file = check_testdata(histories)
        totals.append(total)
        per_files.append(per_file)
    best = min(range(rounds), key=lambda i: totals[i])
    print(f"warm: total over {rounds} passes: best {min(totals):.3f} s, "
          f"median {statistics.median(totals):.3f} s, CPU of the best pass "
          f"{per_files[best].pop('(cpu)'):.3f} s (anchor: Knossos wgl 0.44 s)")
    per_file = per_files[best]
    slowest = sorted(per_file.items(), key=lambda kv: -kv[1])
    print("warm per file (best pass), slowest first:")
    for name, seconds in slowest:
        print(f"  {seconds * 1000:8.2f} ms  {name}")
    start = time.perf_counter()
    unknown = 0
    for name, model, history in histories:
        got = reference.check(model, operations(history), INIT[model], time_limit=30,
                              nil_reads="unknown")
        unknown += got["valid"] == "unknown"
        if got["valid"] not in ("unknown", "/good/" in name):
            raise SystemExit(f"reference gives a wrong verdict for {name}")
    print(f"Python reference on the same set: {time.perf_counter() - start:.2f} s "
          f"({unknown} files over its 30 s cap)")


def timed(model: str, histories: list[list[dict]], time_limit: float = 30) -> tuple[float, list[dict]]:
    start = time.perf_counter()
    results = analyze_batch(model, histories, init=initial(model), time_limit=time_limit)
    return time.perf_counter() - start, results


def timed_cpu(model: str, histories: list[list[dict]]) -> tuple[float, float]:
    """(wall, CPU) seconds; CPU counts the in-process JVM's threads too."""
    cpu = time.process_time()
    wall, _ = timed(model, histories)
    return wall, time.process_time() - cpu


def section_anchors() -> None:
    print("\n== 2. Anchor-shaped workloads (generated, not the anchors' own files) ==")
    rng = random.Random(102)
    etcd_like = [random_history("cas-register", rng, ops=500, processes=10, info=0.05)
                 for _ in range(102)]
    wall, cpu = min(timed_cpu("cas-register", etcd_like) for _ in range(5))
    print(f"102 cas-register histories x 500 ops, 10 clients, 5% crashed: {wall:.3f} s "
          f"(CPU {cpu:.3f} s) (anchor: Porcupine, 102 etcd histories, 0.33 s)")
    for keys in (1, 10):
        kv = [random_history("kv", random.Random(3424), ops=3424, processes=50, info=0.0,
                             keys=keys)]
        runs = [timed("kv", kv) for _ in range(5 if keys > 1 else 1)]
        seconds = min(r[0] for r in runs)
        verdict = runs[0][1][0]
        cpu = min(timed_cpu("kv", kv)[1] for _ in range(3)) if keys > 1 else float("nan")
        print(f"kv 3,424 ops, 50 clients, {keys} key(s): {seconds:.3f} s (CPU {cpu:.3f} s), "
              f"valid={verdict['valid']} partitions={verdict['partitions']} "
              "(anchor: Porcupine 0.12-0.16 s, partitioned)")


def section_growth(quick: bool, models: set[str] | None = None) -> None:
    print("\n== 3. Growth: generated histories (cas-register unless noted; time limit 30 s) ==")
    print(f"{'model':13} {'ops':>7} {'procs':>5} {'info':>5} {'keys':>4} | {'engine s':>9} "
          f"{'verdict':>8} {'configs':>9} | {'reference s':>11}")
    sizes = [1000, 10000] if quick else [1000, 10000, 100000]
    grid = [("cas-register", n, p, info, 1) for n in sizes for p in (5, 20, 50) for info in (0, 0.05)]
    grid += [("kv", sizes[-1], 50, 0.05, k) for k in (1, 10, 100)]
    grid += [("log", sizes[-1], 20, 0.05, k) for k in (1, 10, 100)]
    for model, n, procs, info, keys in grid:
        if models and model not in models:
            continue
        history = random_history(model, random.Random(n * procs + keys), ops=n, processes=procs,
                                 info=info, keys=keys)
        seconds, (result,) = timed(model, [history])
        ref = ""
        if n <= 1000 and keys == 1:
            start = time.perf_counter()
            got = reference.check(model, operations(history), initial(model), time_limit=60)
            ref = f"{time.perf_counter() - start:.3f}" + ("" if got["valid"] != "unknown" else "+")
        print(f"{model:13} {n:>7} {procs:>5} {info:>5} {keys:>4} | {seconds:>9.3f} "
              f"{str(result['valid']):>8} {result.get('configs-explored') or 0:>9} | {ref:>11}",
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smaller grid")
    parser.add_argument("--rounds", type=int, default=5, help="warm passes over the test set")
    parser.add_argument("--no-growth", action="store_true", help="sections 1 and 2 only")
    parser.add_argument("--growth-only", help="only section 3, for these models (comma list)")
    parser.add_argument("--cold-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cold_child:
        cold_child(args.cold_child)
        return
    if args.growth_only:
        section_growth(args.quick, set(args.growth_only.split(",")))
        return
    section_testdata(args.rounds)
    section_anchors()
    if not args.no_growth:
        section_growth(args.quick)


if __name__ == "__main__":
    main()
