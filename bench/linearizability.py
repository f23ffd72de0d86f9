"""Benchmark of the linearizability engine (checkers.knossos).

Prints numbers for docs/benchmarks.md:
  1. Knossos' test set (shared/testdata/knossos): JVM start and the first
     (cold) pass in a fresh process, then warm passes: total and per file,
     EDN parsing reported apart; the pure-Python reference on the same files.
  2. Workloads shaped like the anchors (Porcupine: 102 etcd register
     histories; one 3,424-op, 50-client key-value history, partitioned).
  3. Generated histories of growing length, concurrency, crash rate and key
     count, to show how the cost grows; the Python reference beside the small ones.
  4. Adversarial histories (tests/support/knossos_generate.py: one completion made
     impossible) next to the same valid histories, per model, at 5/10/50
     clients and growing size; the Python reference beside them.
  5. Porcupine-shaped kv: 3,424 ops, 50 clients, 10 keys, clients hanging
     over the whole history, valid and with the last possible read made stale.
  6. Batch: 100 small history files in one `chaos lin` call (wall time with
     JVM start), and the Python reference reading and checking the same files.

    .venv/bin/python bench/linearizability.py            # everything (~15 min)
    .venv/bin/python bench/linearizability.py --quick    # smaller grid (~3 min)
    .venv/bin/python bench/linearizability.py --no-growth  # sections 1 and 2 (~1 min)
    .venv/bin/python bench/linearizability.py --adversarial-and-batch  # sections 4-6 (~15 min)
    .venv/bin/python bench/linearizability.py --quick --adversarial-only kv,log  # section 4

Times are wall seconds; "cpu" is the engine threads' CPU time, which a
loaded machine inflates far less than wall time (the load average is printed).
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
sys.path.insert(0, str(ROOT / "tests"))

from checkers.knossos import analysis, analyze_batch, jvm, load_history  # noqa: E402
from checkers.knossos.history import operations  # noqa: E402
from support import knossos_reference as reference  # noqa: E402
from support.knossos_generate import adversarial_history, initial, random_history  # noqa: E402

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


def _engine(model: str, history: list[dict], time_limit: float = 30) -> dict:
    return analysis(model, history, init=initial(model), time_limit=time_limit)


def _reference(model: str, history: list[dict], limit: float = 30) -> str:
    start = time.perf_counter()
    got = reference.check(model, operations(history), initial(model), time_limit=limit)
    return f"{time.perf_counter() - start:.3f}" + ("+" if got["valid"] == "unknown" else "")


def section_adversarial(quick: bool, models: list[str] | None = None, limit: float = 30) -> None:
    print(f"\n== 4. Valid vs adversarial (one impossible completion, the last one), per model ==  "
          f"(load average now: {os.getloadavg()[0]:.1f})")
    print(f"{'model':15} {'ops':>6} {'procs':>5} {'keys':>4} | {'valid s':>8} {'cpu':>6} "
          f"{'ref s':>7} | {'invalid s':>9} {'cpu':>6} {'verdict':>8} {'named':>5} {'ref s':>7}")
    from checkers.knossos import MODELS
    sizes = [(1000, 1)] if quick else [(1000, 1), (10000, 10)]
    for model in models or MODELS:
        for ops, keys in sizes:
            for procs in (5, 10, 50):
                seed = ops + procs
                valid = random_history(model, random.Random(seed), ops=ops, processes=procs,
                                       info=0.05, keys=keys, values=10**9)
                bad, mutation = adversarial_history(model, random.Random(seed), ops=ops,
                                                    processes=procs, info=0.05, keys=keys,
                                                    late=True)
                r_ok, r_bad = _engine(model, valid, limit), _engine(model, bad, limit)
                small = ops <= 1000
                named = r_bad["valid"] is False and mutation.may_blame(r_bad["op"]["index"])
                print(f"{model:15} {ops:>6} {procs:>5} {keys:>4} | {r_ok['engine-seconds']:>8.3f} "
                      f"{r_ok['engine-cpu-seconds']:>6.3f} {_reference(model, valid, limit) if small else '':>7} | "
                      f"{r_bad['engine-seconds']:>9.3f} {r_bad['engine-cpu-seconds']:>6.3f} "
                      f"{str(r_bad['valid']):>8} {str(named):>5} "
                      f"{_reference(model, bad, limit) if small else '':>7}", flush=True)


def section_porcupine_kv(seeds: int) -> None:
    print("\n== 5. Porcupine-shaped kv: 3,424 ops, 50 clients, 10 keys, 10 clients hanging ==")
    print("seed | valid: engine s, cpu, configs | invalid: engine s, cpu, key, stopped keys")
    for seed in range(seeds):
        valid = random_history("kv", random.Random(seed), ops=3424, processes=50, info=0.0,
                               keys=10, stragglers=10)
        bad, _ = adversarial_history("kv", random.Random(seed), ops=3424, processes=50, info=0.0,
                                     keys=10, stragglers=10, late=True)
        ok, no = _engine("kv", valid, 60), _engine("kv", bad, 60)
        print(f"{seed:>4} | {ok['valid']} {ok['engine-seconds']:.3f} s, cpu "
              f"{ok['engine-cpu-seconds']:.3f} | {no['valid']} {no['engine-seconds']:.3f} s, "
              f"cpu {no['engine-cpu-seconds']:.3f}, key {no['key']}, stopped {no['stopped']}",
              flush=True)


def section_batch(files: int = 100) -> None:
    print(f"\n== 6. Batch: {files} small cas-register files in one `chaos lin` call ==  "
          f"(load average now: {os.getloadavg()[0]:.1f})")
    rng = random.Random(100)
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i in range(files):
            history = random_history("cas-register", rng, ops=rng.randint(20, 400), processes=5,
                                     info=0.05) if i % 2 else \
                adversarial_history("cas-register", rng, ops=rng.randint(20, 400), processes=5)[0]
            path = Path(tmp) / f"h{i:03}.edn"
            path.write_text("[" + "\n ".join(_edn(e) for e in history) + "]\n")
            paths.append(path)
        chaos = str(Path(sys.executable).parent / "chaos")
        walls = []
        for _ in range(3):
            start = time.perf_counter()
            done = subprocess.run([chaos, "lin", *map(str, paths), "--init", "0"],
                                  capture_output=True, text=True)
            walls.append(time.perf_counter() - start)
        lines = done.stdout.splitlines()
        print(f"one CLI call (fresh process, JVM start included): best {min(walls):.2f} s, "
              f"median {statistics.median(walls):.2f} s; {len(lines)} verdicts, "
              f"{sum(': INVALID' in x for x in lines)} invalid (exit {done.returncode})")
        start = time.perf_counter()
        loaded = [load_history(p) for p in paths]
        parse = time.perf_counter() - start
        for h in loaded:
            reference.check("cas-register", operations(h), 0, time_limit=30, nil_reads="unknown")
        print(f"Python reference in this process: reading {parse:.2f} s, "
              f"reading + checking {time.perf_counter() - start:.2f} s")


def _edn(event: dict) -> str:
    def value(v: object) -> str:
        if v is None:
            return "nil"
        if isinstance(v, list):
            return "[" + " ".join(value(x) for x in v) + "]"
        return json.dumps(v)
    return "{" + ", ".join(f":{k} {':' + v if k in ('type', 'f') else value(v)}"
                           for k, v in event.items()) + "}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smaller grid")
    parser.add_argument("--rounds", type=int, default=5, help="warm passes over the test set")
    parser.add_argument("--no-growth", action="store_true", help="sections 1 and 2 only")
    parser.add_argument("--growth-only", help="only section 3, for these models (comma list)")
    parser.add_argument("--adversarial-and-batch", action="store_true",
                        help="only sections 4-6 (batch, Porcupine-shaped kv, adversarial)")
    parser.add_argument("--adversarial-only", metavar="MODELS",
                        help="only section 4, for these models (comma list), 10 s caps")
    parser.add_argument("--cold-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cold_child:
        cold_child(args.cold_child)
        return
    if args.adversarial_only:
        section_adversarial(args.quick, args.adversarial_only.split(","), limit=10)
        return
    if args.adversarial_and_batch:
        section_batch()
        section_porcupine_kv(3 if args.quick else 5)
        section_adversarial(args.quick)
        return
    if args.growth_only:
        section_growth(args.quick, set(args.growth_only.split(",")))
        return
    section_testdata(args.rounds)
    section_anchors()
    if not args.no_growth:
        section_growth(args.quick)
        section_batch()
        section_porcupine_kv(3 if args.quick else 5)
        section_adversarial(args.quick)


if __name__ == "__main__":
    main()
