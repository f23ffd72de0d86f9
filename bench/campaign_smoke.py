"""The smoke campaign's wall time and where it goes (docs/benchmarks.md, "Campaigns").

    .venv/bin/python bench/campaign_smoke.py [CAMPAIGN_FILE]

Runs `chaos campaign` (default campaigns/smoke.yaml) into a temporary store and
prints its wall time split into cluster set-up, deploy, workload (main +
recovery), drain, clean-up (heal, collect, stop), checking (Spark, incl. its
start), run reports and campaign pages, and the harness's own overhead per run:
everything but the workload time, divided by the number of runs.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHAOS = str(Path(sys.executable).parent / "chaos")


def main() -> None:
    file = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "campaigns" / "smoke.yaml"
    with tempfile.TemporaryDirectory(prefix="bench-campaign-") as tmp:
        store = Path(tmp) / "store"
        began = time.monotonic()
        result = subprocess.run([CHAOS, "campaign", str(file), "--store", str(store), "--quiet"], cwd=REPO,
                                capture_output=True, text=True)
        wall = time.monotonic() - began
        print(result.stdout)
        campaign = next(p for p in store.iterdir() if (p / "campaign.json").is_file() and not p.is_symlink())
        meta = json.loads((campaign / "campaign.json").read_text())
    t, phases = meta["timings"], meta["timings"].get("phases_s", {})
    runs = len(meta["plan"])
    workload = phases.get("main", 0) + phases.get("recovery", 0)
    split = {
        "cluster up": t.get("cluster_up_s", 0),
        "deploy": phases.get("deploy", 0),
        "workload (main + recovery)": workload,
        "drain (final phase)": phases.get("final", 0),
        "heal + collect + stop": sum(phases.get(k, 0) for k in ("heal", "collect", "stop")),
        "spark start": t.get("spark_start_s", 0),
        "check (Spark)": t.get("check_s", 0),
        "run reports": t.get("run_reports_s", 0),
        "campaign pages": t.get("render_s", 0),
    }
    print(f"exit {result.returncode}; {runs} runs; wall {wall:.1f} s")
    for name, seconds in split.items():
        print(f"  {name:<28} {seconds:7.1f} s")
    print(f"  {'other (process start, verify)':<28} {wall - sum(split.values()):7.1f} s")
    print(f"harness overhead per run (wall - workload) / runs: {(wall - workload) / runs:.1f} s")
    print(f"  without the Spark check:  {(wall - workload - t.get('check_s', 0) - t.get('spark_start_s', 0)) / runs:.1f} s")


if __name__ == "__main__":
    main()
