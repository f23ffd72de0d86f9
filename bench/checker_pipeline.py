"""Benchmark of the checker pipeline: synthetic queue histories of 1 M and 10 M events.

    .venv/bin/python bench/checker_pipeline.py                 # 1 M and 10 M events
    .venv/bin/python bench/checker_pipeline.py --events 1000000 --master 'local[2]'
    .venv/bin/python bench/checker_pipeline.py --events 1000000 --standalone   # 2-worker cluster
    .venv/bin/python bench/checker_pipeline.py --events 1000 --runs 1 10 50    # fixed cost per run
    .venv/bin/python bench/checker_pipeline.py --events 1000 --runs 1 50 --repeat 5   # ... warm

Each size is generated once (cached under --data, default /tmp/chaos-bench) and
checked in a fresh process, so that memory and JIT warm-up are per size. The
check is the real `check_runs`: reconstruction, stats, queue + order, RTO,
perf (the queue workload has no linearizability model, so that step is a
no-op). Printed per size: a JSON line (events, wall time per step, events per
second, and peak resident memory of the whole process tree: driver Python,
Spark JVM, Python workers, sampled every 0.2 s; `cpu_ref_s`, the seconds of a
fixed pure-Python loop run just before, says how fast the box was), then one
line `N events/s`.
`--runs K`: K copies of the run checked in ONE check_runs call after the
session is up (the fixed cost per check and how it scales with runs per call).
`--repeat R`: the same check R times in the session; `again_s` lists the
checks after the first, which find Spark's planner and generated code
already JIT-compiled, as every check of a campaign after its first does.
`--standalone`: a Spark standalone master and two 1-core workers started from
pyspark's bin/spark-class on loopback (tests/support/spark_standalone.py), stopped after.

The synthetic run mimics the queue workload: 96 producers and 32 consumers
(one queue each), ~20 000 ops/s, sends:polls = 3:1, a fault window of 10 s
every 30 s during which sends fail or time out for ~2 s, timeouts retire the
process (Jepsen's rule), a few lost and duplicated messages, a final drain.
Acknowledged sends carry no offset (the generator cannot know it when it
writes the send; polled items carry their offsets), so the offset checks see
the polls only: a fixed offset on every send would make each queue one huge
"inconsistent offset" and measure that pathology instead of the pipeline.
`spark_jobs` in the JSON: the Spark jobs of the measured check_runs call.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from records import CheckInputs, RunJson  # noqa: E402

MS = 1_000_000
PRODUCERS, CONSUMERS = 96, 32
OPS_PER_SECOND = 20_000
SEND_SHARE = 0.75
FAULT_EVERY_S, FAULT_FOR_S, OUTAGE_S = 30, 10, 2
TIMEOUT_MS = 1000
PULL_BATCH = 32
LOSS, DUPLICATE, BACKGROUND_INFO = 1e-4, 1e-4, 1e-3
JOB_GROUP = "chaos-bench-check"  # the Spark jobs of the measured check_runs call are counted


# -- generation --------------------------------------------------------------------------

def _in_outage(t_ns: int) -> bool:
    into = (t_ns / 1e9) % FAULT_EVERY_S - (FAULT_EVERY_S - FAULT_FOR_S)
    return 0 <= into < OUTAGE_S


def _producer(worker: int, ops: int, duration_ns: int, rng: random.Random, out, stored: list[list]) -> int:
    """One producer's sends, written in its own time order; returns events written."""
    process, t, gap = worker, rng.randrange(MS), duration_ns // ops
    for n in range(ops):
        t += rng.randrange(gap // 2, gap + gap // 2)
        msg, queue = worker * 10_000_000 + n, rng.randrange(CONSUMERS)
        value = f'{{"id":{msg},"shard":"s{worker}","payload":"p{n:08d}"}}'
        out.write(f'{{"process":{process},"type":"invoke","f":"send","key":{queue},"value":{value},"time":{t}}}\n')
        r = rng.random()
        if _in_outage(t) and r < 0.9:
            kind = "info" if r < 0.45 else "fail"
        else:
            kind = "info" if r < BACKGROUND_INFO else "ok"
        if kind == "ok":
            done = t + rng.randrange(MS, 5 * MS)
            out.write(f'{{"process":{process},"type":"ok","f":"send","key":{queue},"value":'
                      f'{{"id":{msg},"shard":"s{worker}","payload":"p{n:08d}","queue":{queue},"offset":null}},'
                      f'"time":{done},"node":"n{queue % 5 + 1}"}}\n')
            if rng.random() >= LOSS:
                stored[queue].append((done, msg, worker, n))
        else:
            done = t + (TIMEOUT_MS * MS if kind == "info" else 2 * MS)
            out.write(f'{{"process":{process},"type":"{kind}","f":"send","key":{queue},"value":{value},'
                      f'"time":{done},"error":"{"timeout" if kind == "info" else "not master"}"}}\n')
            if kind == "info":
                process += PRODUCERS + CONSUMERS  # retired: the worker goes on as a new process
                if rng.random() < 0.5:
                    stored[queue].append((done, msg, worker, n))
        t = done
    return 2 * ops


def _consumer(worker: int, queue: int, polls: int, duration_ns: int, rng: random.Random, out,
              messages: list) -> int:
    """Polls of one queue at a steady pace, then a drain until the queue is empty."""
    process, t, gap, head, offset, written = worker, rng.randrange(MS), duration_ns // polls, 0, 0, 0
    while head < len(messages) or t < duration_ns:
        t += gap
        batch = []
        while head < len(messages) and messages[head][0] < t and len(batch) < PULL_BATCH:
            batch.append(messages[head])
            head += 1
            if rng.random() < DUPLICATE:
                batch.append(batch[-1])
        items = []
        for _, msg, producer, n in batch:
            items.append(f'{{"id":{msg},"shard":"s{producer}","payload":"p{n:08d}","key":{queue},'
                         f'"queue":{queue},"offset":{offset}}}')
            offset += 1
        done = t + rng.randrange(MS, 3 * MS)
        out.write(f'{{"process":{process},"type":"invoke","f":"poll","key":{queue},'
                  f'"value":{{"offset":{offset}}},"time":{t}}}\n')
        out.write(f'{{"process":{process},"type":"ok","f":"poll","key":{queue},"value":[{",".join(items)}],'
                  f'"time":{done},"node":"n{queue % 5 + 1}"}}\n')
        t, written = done, written + 2
    return written


def generate(run_dir: Path, events: int, seed: int = 7) -> int:
    """Write a synthetic queue run of about `events` events; returns the exact count."""
    rng = random.Random(seed)
    ops = events // 2
    duration_ns = int(ops / OPS_PER_SECOND * 1e9)
    history = run_dir / "history"
    history.mkdir(parents=True, exist_ok=True)
    stored: list[list] = [[] for _ in range(CONSUMERS)]
    sends = int(ops * SEND_SHARE)
    written = 0
    for worker in range(PRODUCERS):
        with open(history / f"producer-{worker}.jsonl", "w") as out:
            written += _producer(worker, sends // PRODUCERS, duration_ns, rng, out, stored)
    polls_each = max(1, (ops - sends) // CONSUMERS)
    for queue in range(CONSUMERS):
        messages = sorted(stored[queue])
        stored[queue] = []
        with open(history / f"consumer-{queue}.jsonl", "w") as out:
            written += _consumer(PRODUCERS + queue, queue, polls_each, duration_ns, rng, out, messages)
    with open(run_dir / "nemesis.jsonl", "w") as out:
        for i, start in enumerate(range(FAULT_EVERY_S - FAULT_FOR_S, int(duration_ns / 1e9), FAULT_EVERY_S)):
            fault = ("random-kill", "random-partition")[i % 2]
            for phase, at in (("start", start), ("stop", start + FAULT_FOR_S)):
                out.write(json.dumps({"process": "nemesis", "type": "info", "f": fault,
                                      "value": {"phase": phase, "targets": [f"n{i % 5 + 1}"]},
                                      "time": at * 1_000_000_000}) + "\n")
    checks = CheckInputs(workload="queue", profile="synthetic", seed=seed, rto_threshold_s=5)
    (run_dir / "run.json").write_text(json.dumps(
        RunJson(workload="queue", profile="synthetic", seed=seed, checks=checks).as_json()))
    return written


def ensure_run(data: Path, events: int) -> tuple[Path, int]:
    run_dir = data / f"queue-{events}"
    marker = run_dir / "generated.json"
    if marker.exists():
        return run_dir, json.loads(marker.read_text())["events"]
    started = time.perf_counter()
    written = generate(run_dir, events)
    marker.write_text(json.dumps({"events": written}))
    print(f"generated {written:,} events in {time.perf_counter() - started:.0f}s -> {run_dir}", flush=True)
    return run_dir, written


# -- measuring ----------------------------------------------------------------------------

def _tree_usage(root: int) -> tuple[int, float]:
    """Resident bytes and CPU seconds (own + reaped children) of `root` and its descendants."""
    children: dict[int, list[int]] = {}
    usage: dict[int, tuple[int, float]] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry.name))
            cpu = sum(int(v) for v in fields[11:15]) / tick  # utime stime cutime cstime
            usage[int(entry.name)] = (int(fields[21]) * os.sysconf("SC_PAGE_SIZE"), cpu)
        except (OSError, IndexError, ValueError):
            continue
    rss, cpu, todo = 0, 0.0, [root]
    while todo:
        pid = todo.pop()
        rss += usage.get(pid, (0, 0.0))[0]
        cpu += usage.get(pid, (0, 0.0))[1]
        todo += children.get(pid, [])
    return rss, cpu


class Usage(threading.Thread):
    """Samples the process tree: peak resident memory and CPU seconds used."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak = 0
        self.cpu = 0.0
        self.running = True

    def run(self) -> None:
        while self.running:
            rss, cpu = _tree_usage(os.getpid())
            self.peak, self.cpu = max(self.peak, rss), max(self.cpu, cpu)
            time.sleep(0.2)


def cpu_reference_s(loops: int = 10_000_000, tries: int = 3) -> float:
    """Seconds for a fixed pure-Python loop, the best of `tries`: how fast this box is
    at the moment of measuring. The box is a shared VM whose speed changes between days
    and hours, so a number of this script is comparable with another only next to
    this one (docs/benchmarks.md, "The machines")."""
    best = float("inf")
    for _ in range(tries):
        started, total = time.perf_counter(), 0
        for i in range(loops):
            total += i
        best = min(best, time.perf_counter() - started)
    return round(best, 3)


def copies(run_dir: Path, runs: int) -> list[Path]:
    """`runs` run directories with the same history (hard links: no extra disk)."""
    if runs == 1:
        return [run_dir]
    import shutil

    base = run_dir.parent / f"{run_dir.name}-x{runs}"
    dirs = [base / f"run-{i}" for i in range(runs)]
    for target in dirs:
        if not target.exists():
            shutil.copytree(run_dir, target, copy_function=os.link,
                            ignore=shutil.ignore_patterns("checked", "results.json", "spark.log"))
    return dirs


def _timed_check(spark, dirs: list[Path], master: str, conf: dict[str, str], group: str) -> tuple[float, dict, dict, int]:
    """One check_runs call: wall seconds, step seconds, the first run's result, Spark jobs."""
    from checkers.pipeline import check_runs

    steps: dict[str, float] = {}
    last = [time.perf_counter(), None]

    def progress(name: str) -> None:
        now = time.perf_counter()
        if last[1]:
            steps[last[1]] = round(now - last[0], 1)
        last[:] = [now, name]

    started = time.perf_counter()
    spark.sparkContext.setJobGroup(group, "a measured check")
    result = check_runs(dirs, master, conf, progress=progress)[0]
    progress("done")
    jobs = len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))
    return time.perf_counter() - started, steps, result, jobs


def check_one(run_dir: Path, events: int, master: str, conf: dict[str, str], runs: int = 1,
              repeat: int = 1) -> dict:
    """Runs in its own process: time check_runs on `runs` copies of one run, `repeat` times
    in the same session (the first pays the JIT warm-up of a fresh JVM, the others do not)."""
    from checkers.pipeline import input_size
    from checkers.spark.session import session_for

    reference = cpu_reference_s()
    usage = Usage()
    usage.start()
    dirs = copies(run_dir, runs)
    started = time.perf_counter()
    # the session check_runs would start for this input (a quick JVM for small ones)
    spark = session_for(master, conf, run_dir / "spark.log", input_size(dirs)[0])
    session_s = time.perf_counter() - started
    cpu_before = usage.cpu
    total, steps, result, jobs = _timed_check(spark, dirs, master, conf, JOB_GROUP)
    cpu = usage.cpu - cpu_before
    again = [round(_timed_check(spark, dirs, master, conf, f"{JOB_GROUP}-{i}")[0], 1)
             for i in range(1, repeat)]
    events *= runs
    usage.running = False
    usage.join()
    queue = result["checkers"]["queue"]["counts"]
    return {"events": events, "runs": runs, "check_s": round(total, 1), "spark_jobs": jobs,
            "events_per_s": round(events / total), "again_s": again,
            "spark_start_s": round(session_s, 1), "peak_rss_gib": round(usage.peak / 2**30, 2),
            "cpu_s": round(cpu), "load_avg": os.getloadavg()[0], "cpu_ref_s": reference,
            "steps_s": steps, "valid": result["valid"],
            "lost": queue["lost"], "duplicated": queue["duplicated"],
            "windows": len(result["checkers"]["rto"]["windows"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--data", type=Path, default=Path("/tmp/chaos-bench"))
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--runs", type=int, nargs="+", default=[1],
                        help="runs per check_runs call (copies of each size's run)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="check each size this many times in the same session (again_s: the checks "
                             "after the first, with Spark's code already compiled)")
    parser.add_argument("--standalone", action="store_true",
                        help="check on a 2-worker Spark standalone cluster on loopback")
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    conf = dict(pair.split("=", 1) for pair in args.conf)
    if args.one:
        print(json.dumps(check_one(args.one, args.events[0], args.master, conf, args.runs[0], args.repeat)))
        return
    if args.standalone:
        sys.path.insert(0, str(ROOT / "tests"))
        from support.spark_standalone import StandaloneCluster

        (args.data / "standalone").mkdir(parents=True, exist_ok=True)
        with StandaloneCluster(args.data / "standalone", workers=2, cores=1, memory="2g") as cluster:
            conf = {"spark.driver.host": "127.0.0.1", "spark.pyspark.python": sys.executable,
                    "spark.executor.memory": "1500m", **conf}
            measure(args, cluster.master_url, conf)
    else:
        measure(args, args.master, conf)


def measure(args: argparse.Namespace, master: str, conf: dict[str, str]) -> None:
    """Each size (times each runs-per-call) checked in a fresh process; JSON, then `N events/s`."""
    for events in args.events:
        run_dir, written = ensure_run(args.data, events)
        for runs in args.runs:
            done = subprocess.run([sys.executable, __file__, "--one", str(run_dir), "--events", str(written),
                                   "--runs", str(runs), "--repeat", str(args.repeat), "--master", master,
                                   *[f"--conf={k}={v}" for k, v in conf.items()]],
                                  capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"checking {run_dir} failed:\n{done.stderr[-3000:]}")
            row = json.loads(done.stdout.strip().splitlines()[-1])
            print(json.dumps(row), flush=True)
            print(f"{row['events_per_s']} events/s", flush=True)


if __name__ == "__main__":
    main()
