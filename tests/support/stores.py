"""A campaign in a store made of files only (campaign.json, run.json, results.json),
for page, gate and gc tests that need no cluster."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from records import SCHEMA_VERSION

PROFILES = {"dledger-3": {"mode": "dledger", "expected_safe": True, "unsafe_under": []},
            "controller-3": {"mode": "controller", "expected_safe": True, "unsafe_under": []},
            "controller-unclean": {"mode": "controller", "expected_safe": False,
                                   "unsafe_under": ["kill", "suspend", "partition", "crash"]}}


def stored(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` as the current harness writes a store file (with its schema version)."""
    return {"schema_version": SCHEMA_VERSION, **doc}


def results(valid: Any, lost: int = 0, rto: list[float] = (), lost_ids: list[str] = ()) -> dict[str, Any]:
    windows = [{"id": i, "fault": "leader-kill", "unavailable_s": v, "recovered": True} for i, v in enumerate(rto)]
    return stored({"valid": valid, "checkers": {
        "queue": {"valid": not lost, "counts": {"lost": lost, "duplicated": 0},
                  "lost": [{"id": i} for i in lost_ids]},
        "rto": {"valid": True, "windows": windows, "availability": {"in_faults": {"availability": 0.9}}},
        "perf": {"valid": True, "throughput": 40.0,
                 "latency": [{"f": "send", "type": "ok", "count": 100, "p50_ms": 2.0, "p99_ms": 9.0}]}}})


def make_campaign(store: Path, campaign_id: str, runs: list[dict[str, Any]], name: str = "nightly",
                  gates: list[dict[str, Any]] | None = None, status: str = "complete",
                  trend: dict[str, Any] | None = None) -> Path:
    """`runs`: dicts with profile, fault, repeat, seed, status and `results` (None: no results.json)."""
    path = store / campaign_id
    plan = []
    for run in runs:
        run_id = f"{run['profile']}-queue-{run['fault']}-r{run.get('repeat', 1)}"
        plan.append({"run_id": run_id, "profile": run["profile"], "workload": "queue", "fault": run["fault"],
                     "repeat": run.get("repeat", 1), "seed": run.get("seed", 1)})
        if run.get("status") == "pending":
            continue
        run_dir = path / "runs" / run_id
        run_dir.mkdir(parents=True)
        (run_dir / "history").mkdir()
        (run_dir / "history" / "worker-000.jsonl").write_text("x" * 1000)
        (run_dir / "run.json").write_text(json.dumps(stored({
            "kind": "run", "run_id": run_id, "status": run.get("status", "complete"), "error": run.get("error"),
            "profile": run["profile"]})))
        if run.get("results") is not None:
            (run_dir / "results.json").write_text(json.dumps(run["results"]))
    meta = {"schema_version": SCHEMA_VERSION, "kind": "campaign", "campaign_id": campaign_id, "name": name, "status": status, "seed": 1,
            "plan": plan, "runs": [p["run_id"] for p in plan], "profiles": PROFILES, "gates": gates or [],
            "trend": trend or {"regression_factor": 1.5, "nights": 7}, "started_at": campaign_id[:16]}
    (path / "campaign.json").write_text(json.dumps(meta))
    return path
