"""Benchmark of the run report as runs grow: 1,000, 100,000 and 1,000,000 operations.

    .venv/bin/python bench/report_render.py                       # 1,000 / 100,000 / 1,000,000
    .venv/bin/python bench/report_render.py --ops 1000 100000 1000000 5000000   # 5 M ops: 10 M events

A synthetic queue run (64 client processes over 300 s, so the rate grows with
the size; 8 of them consumers, one per queue, the others producers; a 20 s
fault window every 60 s with slower operations, some sends timing out and, at
most MAX_LOST times, an acknowledged send lost and its offset reused: a
`lost` message and an `inconsistent_offsets` offset; otherwise valid) is
generated once and checked once by the real checkers (cached under --data).
Then, each in a fresh process: rendering report/index.html + timeline.html
(`reports.render_run`; above 20,000 operations the pages draw the checkers'
aggregates and the timeline's detail goes to range pages), and loading each
page in Debian's Chromium (headless, Playwright) until every chart is drawn
(the fastest of LOADS loads). Printed per size: render time (wall and CPU)
and peak memory, page load times, sizes; then a table with the ratios the
docs state as aims (render vs the 100,000-op run, pages vs the 1,000-op run,
on the same box).
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


QUEUES = 8
POLL_BATCH = 8
MAX_LOST = 300  # anomalies stay bounded whatever the size, as in a real run


def generate(run: Path, ops: int, seed: int = 1) -> None:
    """Raw events of a mostly valid queue run with `ops` operations, one file per client worker.

    Workers 0..QUEUES-1 are the consumers, one per queue, each polling its
    queue in order from where it left off; the others send, each ok send
    appended to its queue's log at the next offset. Every worker completes an
    operation before it invokes its next (latencies stay below the spacing of
    its operations, longer inside fault windows). Inside fault windows some
    sends time out (info: the process retires) and, at most MAX_LOST times, an
    acknowledged send is lost the way an unclean failover loses it: its offset
    is reused by the next message, a `lost` message and an
    `inconsistent_offsets` offset. The rest of the history is valid."""
    rng = random.Random(seed)
    (run / "history").mkdir(parents=True, exist_ok=True)
    files = [open(run / "history" / f"worker-{w}.jsonl", "w") for w in range(PROCESSES)]
    process = list(range(PROCESSES))
    logs: list[list[int]] = [[] for _ in range(QUEUES)]   # queue -> ids by offset
    consumed = [0] * QUEUES                               # queue -> next offset its consumer polls
    lost = 0
    step_ms = DURATION_S * 1000 / ops
    spacing_ms = PROCESSES * step_ms                      # between two operations of one worker
    next_id = 0
    for n in range(ops):
        worker, t = n % PROCESSES, n * step_ms
        out, p, node = files[worker], process[worker], f"n{1 + worker % 3}"

        def write(kind: str, f: str, key, value, at: float, **extra) -> None:
            out.write(json.dumps({"process": p, "type": kind, "f": f, "key": key, "value": value,
                                  "time": int(at * MS), **extra}) + "\n")
        latency = spacing_ms * (rng.uniform(0.3, 0.9) if in_fault(t) else rng.uniform(0.02, 0.15))
        if worker < QUEUES:
            queue, start = worker, consumed[worker]
            batch = logs[queue][start:start + POLL_BATCH]
            consumed[queue] += len(batch)
            write("invoke", "poll", queue, {"offset": start}, t)
            write("ok", "poll", queue, [{"id": i, "key": queue, "queue": queue, "offset": start + k}
                                        for k, i in enumerate(batch)], t + latency, node=node)
            continue
        queue = (n // PROCESSES + worker) % QUEUES
        message = {"id": next_id, "payload": f"m{next_id}"}
        next_id += 1
        write("invoke", "send", queue, message, t)
        if in_fault(t) and rng.random() < 0.05:
            write("info", "send", queue, message, t + latency, node=node, error="timeout")
            process[worker] += PROCESSES  # Jepsen's rule: an info retires the process
            continue
        offset = len(logs[queue])
        write("ok", "send", queue, {**message, "queue": queue, "offset": offset}, t + latency, node=node)
        if in_fault(t) and lost < MAX_LOST and rng.random() < 0.01:
            lost += 1   # acknowledged, then truncated away: the next send gets the same offset
        else:
            logs[queue].append(message["id"])
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


def timed_render(run: Path) -> tuple[float, float, float]:
    """Rendering the run's report in a fresh process: wall seconds, CPU seconds (user +
    system: steadier than wall time on a shared box) and peak RSS (MiB)."""
    code = ("import resource, time, reports, sys; t = time.perf_counter(); c = time.process_time(); "
            "reports.render_run(sys.argv[1]); "
            "print(time.perf_counter() - t, time.process_time() - c, "
            "resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)")
    out = subprocess.run([sys.executable, "-c", code, str(run)], check=True, capture_output=True, text=True)
    seconds, cpu, rss = out.stdout.split()
    return float(seconds), float(cpu), float(rss)


LOADS = 3  # each page is loaded this many times, the fastest kept: the box is shared


def page_load_times(pages: list[Path]) -> list[float]:
    """Per page, the fastest of LOADS loads until every chart is drawn."""
    from playwright.sync_api import sync_playwright
    times = []
    with sync_playwright() as playwright, tempfile.TemporaryDirectory(prefix="chaos-bench-chromium-") as profile:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path="/usr/bin/chromium",
            args=CHROMIUM_ARGS, headless=True, viewport={"width": 1300, "height": 900})
        for page_path in pages:
            best = float("inf")
            for _ in range(LOADS):
                page = context.new_page()
                start = time.perf_counter()
                page.goto(page_path.as_uri(), timeout=300_000)
                page.wait_for_selector("body[data-charts-rendered]", timeout=300_000)
                best = min(best, time.perf_counter() - start)
                page.close()
            times.append(best)
        context.close()
    return times


def prepare(data: Path, ops: int) -> Path:
    """Generate and check a run of `ops` operations once (cached under `data`)."""
    run = data / f"ops-{ops}" / "runs" / "bench"
    if not (run / "results.json").is_file():
        if not (run / "run.json").is_file():  # written last: the history is complete
            generate(run, ops)
        from checkers.pipeline import check_runs
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        start = time.perf_counter()
        check_runs([run])
        print(f"{ops:,} operations checked once (cached): {time.perf_counter() - start:.1f} s", flush=True)
    return run


def measure(data: Path, ops: int) -> dict[str, float]:
    """Render a prepared run of `ops` operations and load its pages."""
    run = prepare(data, ops)
    render_s, cpu_s, rss_mib = timed_render(run)
    report = run / "report"
    loads = page_load_times([report / "index.html", report / "timeline.html"])
    figures = {"render_s": render_s, "cpu_s": cpu_s, "rss_mib": rss_mib, "index_s": loads[0], "timeline_s": loads[1],
               "index_mib": (report / "index.html").stat().st_size / 2**20,
               "timeline_mib": (report / "timeline.html").stat().st_size / 2**20,
               "history_mib": folder_size(run / "history") / 2**20,
               "report_mib": folder_size(report) / 2**20,
               "ranges": len(list((report / "timeline").glob("range-*.html")))}
    print(f"{ops:,} operations: render {render_s:.2f} s (CPU {cpu_s:.2f} s, peak RSS {rss_mib:,.0f} MiB); "
          f"load until charts drawn: index {loads[0]:.2f} s, timeline {loads[1]:.2f} s; "
          f"index.html {figures['index_mib']:.2f} MiB, "
          f"timeline.html {figures['timeline_mib']:.2f} MiB, {figures['ranges']} range pages, "
          f"report/ {figures['report_mib']:.1f} MiB, raw history {figures['history_mib']:.0f} MiB", flush=True)
    return figures


ROWS = (("raw history (MiB)", "history_mib", "{:,.0f}", None),
        ("render: index, timeline, range pages, downloads (s)", "render_s", "{:.1f}", 100_000),
        ("render CPU time, user + system (s)", "cpu_s", "{:.1f}", 100_000),
        ("render peak RSS (MiB)", "rss_mib", "{:,.0f}", None),
        ("index.html (MiB)", "index_mib", "{:.2f}", 1_000),
        ("timeline.html (MiB)", "timeline_mib", "{:.2f}", 1_000),
        ("page load, index.html (s)", "index_s", "{:.2f}", 1_000),
        ("page load, timeline.html (s)", "timeline_s", "{:.2f}", 1_000),
        ("range pages", "ranges", "{:,}", None),
        ("report/ in all (MiB)", "report_mib", "{:,.0f}", None))


def table(found: dict[int, dict[str, float]]) -> str:
    """A Markdown table: one column per size, each figure with its ratio to its reference
    size (render vs 100,000 operations, pages vs 1,000) when that size was measured."""
    sizes = sorted(found)
    lines = ["| | " + " | ".join(f"{n:,} ops" for n in sizes) + " |", "|---" * (len(sizes) + 1) + "|"]
    for title, key, form, reference in ROWS:
        cells = []
        for n in sizes:
            cell = form.format(found[n][key])
            base = found.get(reference) if reference else None
            if base and n > reference and base[key]:
                cell += f" ({found[n][key] / base[key]:.1f}x the {reference:,}-op run)"
            cells.append(cell)
        lines.append(f"| {title} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", type=int, nargs="+", default=[1_000, 100_000, 1_000_000],
                        help="run sizes; ratios are printed against 1,000 (pages) and 100,000 (render)")
    parser.add_argument("--data", type=Path, default=Path("/tmp/chaos-bench-report"))
    args = parser.parse_args()
    found = {ops: measure(args.data, ops) for ops in args.ops}
    print(table(found))
    print("aims: render of 1,000,000 ops <= 10x the 100,000-op render; page loads < 2x the 1,000-op run's; "
          "10,000,000 ops render at all")


if __name__ == "__main__":
    main()
