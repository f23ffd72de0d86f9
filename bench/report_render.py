"""Benchmark of the run report as runs grow: 1,000, 100,000 and 1,000,000 operations.

    .venv/bin/python bench/report_render.py                       # 1,000 / 100,000 / 1,000,000
    .venv/bin/python bench/report_render.py --ops 1000 100000 10000000 --data /tmp/chaos-bench-report

A synthetic queue run (64 client processes, ~330 ops/s for 300 s, sends:polls
3:1, a 20 s fault window every 60 s in which some sends time out and retire
their process, a few lost messages) is generated once and checked once by the
real checkers (cached under --data). Then, each in a fresh process:
rendering report/index.html + timeline.html (`reports.render_run`; above
20,000 operations the pages draw the checkers' aggregates and the timeline's
detail goes to range pages), and loading each page in Debian's Chromium
(headless, Playwright) until every chart is drawn. Printed per size: render
time, page load times, sizes; then the ratios the docs state as aims (render
vs the 100,000-op run, page loads vs the 1,000-op run, on the same box).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from records import RunJson  # noqa: E402

MS = 1_000_000
PROCESSES = 64
DURATION_S = 300
FAULT_EVERY_S, FAULT_FOR_S = 60, 20
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def in_fault(t_ms: float) -> bool:
    return (t_ms / 1000) % FAULT_EVERY_S >= FAULT_EVERY_S - FAULT_FOR_S


def generate(run: Path, ops: int, seed: int = 1) -> None:
    """Raw events of a queue run with `ops` operations, one file per client worker."""
    rng = random.Random(seed)
    (run / "history").mkdir(parents=True, exist_ok=True)
    files = [open(run / "history" / f"worker-{w}.jsonl", "w") for w in range(PROCESSES)]
    process = list(range(PROCESSES))
    sent: list[tuple[int, int]] = []
    step_ms = DURATION_S * 1000 / ops
    next_id = 0
    for n in range(ops):
        worker, t = n % PROCESSES, n * step_ms
        out, p = files[worker], process[worker]

        def write(kind: str, f: str, key, value, at: float, **extra) -> None:
            out.write(json.dumps({"process": p, "type": kind, "f": f, "key": key, "value": value,
                                  "time": int(at * MS), **extra}) + "\n")
        latency = rng.uniform(1, 8) * (20 if in_fault(t) else 1)
        if rng.random() < 0.75 or not sent:
            key, message = next_id % 8, {"id": next_id, "payload": f"m{next_id}"}
            next_id += 1
            write("invoke", "send", key, message, t)
            if in_fault(t) and rng.random() < 0.05:
                write("info", "send", key, message, t + latency, node=f"n{1 + worker % 3}", error="timeout")
                process[worker] += PROCESSES  # Jepsen's rule: an info retires the process
                continue
            write("ok", "send", key, {**message, "queue": key, "offset": n}, t + latency, node=f"n{1 + worker % 3}")
            if rng.random() > 0.0005:
                sent.append((message["id"], key))
        else:
            batch, sent = sent[:8], sent[8:]
            write("invoke", "poll", None, {"offset": 0}, t)
            write("ok", "poll", None, [{"id": i, "key": k, "queue": k, "offset": 0} for i, k in batch],
                  t + latency, node=f"n{1 + worker % 3}")
    for out in files:
        out.close()
    with open(run / "nemesis.jsonl", "w") as out:
        for start in range(FAULT_EVERY_S - FAULT_FOR_S, DURATION_S, FAULT_EVERY_S):
            for phase, at in (("start", start), ("stop", start + FAULT_FOR_S)):
                out.write(json.dumps({"process": "nemesis", "type": "info", "f": "random-partition",
                                      "value": {"phase": phase, "targets": ["n2"]}, "time": at * 1000 * MS}) + "\n")
    (run / "run.json").write_text(json.dumps(RunJson(
        run_id=run.name, workload="queue", status="complete",
        spec={"profile": "dledger-3", "workload": "queue", "faults": ["random-partition"], "seed": seed}).as_json()))


def folder_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def timed_render(run: Path) -> float:
    code = ("import time, reports, sys; t = time.perf_counter(); reports.render_run(sys.argv[1]); "
            "print(time.perf_counter() - t)")
    out = subprocess.run([sys.executable, "-c", code, str(run)], check=True, capture_output=True, text=True)
    return float(out.stdout.strip())


def page_load_times(pages: list[Path]) -> list[float]:
    from playwright.sync_api import sync_playwright
    times = []
    with sync_playwright() as playwright, tempfile.TemporaryDirectory(prefix="chaos-bench-chromium-") as profile:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path="/usr/bin/chromium",
            args=CHROMIUM_ARGS, headless=True, viewport={"width": 1300, "height": 900})
        for page_path in pages:
            page = context.new_page()
            start = time.perf_counter()
            page.goto(page_path.as_uri(), timeout=300_000)
            page.wait_for_selector("body[data-charts-rendered]", timeout=300_000)
            times.append(time.perf_counter() - start)
            page.close()
        context.close()
    return times


def measure(data: Path, ops: int) -> dict[str, float]:
    """Generate and check a run of `ops` operations once (cached), then render it and load its pages."""
    run = data / f"ops-{ops}" / "runs" / "bench"
    if not (run / "results.json").is_file():
        generate(run, ops)
        from checkers.pipeline import check_runs
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        start = time.perf_counter()
        check_runs([run])
        print(f"{ops:,} operations checked once (cached): {time.perf_counter() - start:.1f} s", flush=True)
    render_s = timed_render(run)
    report = run / "report"
    loads = page_load_times([report / "index.html", report / "timeline.html"])
    from reports.run_report import assets_folder
    assets = assets_folder(run) / "assets"
    ranges = list((report / "timeline").glob("range-*.html"))
    print(f"{ops:,} operations: render (index + timeline + range pages) {render_s:.2f} s; "
          f"load until charts drawn: index {loads[0]:.2f} s, timeline {loads[1]:.2f} s; "
          f"index.html {(report / 'index.html').stat().st_size / 2**20:.1f} MiB, "
          f"timeline.html {(report / 'timeline.html').stat().st_size / 2**20:.1f} MiB, "
          f"{len(ranges)} range pages, report/ {folder_size(report) / 2**20:.1f} MiB, "
          f"assets/ {folder_size(assets) / 2**20:.1f} MiB", flush=True)
    return {"render_s": render_s, "index_s": loads[0], "timeline_s": loads[1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", type=int, nargs="+", default=[1_000, 100_000, 1_000_000],
                        help="run sizes; ratios are printed against 1,000 (page loads) and 100,000 (render)")
    parser.add_argument("--data", type=Path, default=Path("/tmp/chaos-bench-report"))
    args = parser.parse_args()
    found = {ops: measure(args.data, ops) for ops in args.ops}
    small, reference = found.get(1_000), found.get(100_000)
    for ops, figures in found.items():
        if reference and ops > 100_000:
            print(f"{ops:,} vs 100,000: render {figures['render_s'] / reference['render_s']:.1f}x (aim <= 10x)")
        if small and ops > 1_000:
            print(f"{ops:,} vs 1,000: index load {figures['index_s'] / small['index_s']:.1f}x, "
                  f"timeline load {figures['timeline_s'] / small['timeline_s']:.1f}x (aim < 2x)")


if __name__ == "__main__":
    main()
