"""The reproducer page of a `chaos shrink`: the original and the minimal schedule side by
side, the reproduction rate, the replay command, and every attempt of the search.

Rendered from RUN/shrink/shrink.json and the two schedule files (harness.shrink
writes them), to RUN/shrink/index.html.
"""
from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from reports.assets import install_assets
from reports.load import read_json
from reports.render import relative_url, render_page
from reports.run_report import assets_folder


def _bars(schedule: dict[str, Any], span: float) -> list[dict[str, Any]]:
    """Each fault window as a bar: its offset and width in percent of `span` seconds."""
    return [{**window, "left": 100 * window["start"] / span, "width": max(0.5, 100 * window["length"] / span)}
            for window in schedule.get("windows") or []]


def _schedule(path: Path) -> dict[str, Any]:
    import yaml
    try:
        text = path.read_text()
        return {"text": text, **(yaml.safe_load(text) or {})}
    except (OSError, ValueError):
        return {"text": "", "windows": [], "shape": {}}


def _run_link(run: Path, record_dir: Path) -> str | None:
    """A try's report if it has one, else its results.json."""
    for target in (run / "report" / "index.html", run / "results.json"):
        if target.is_file():
            return relative_url(target, record_dir)
    return None


def render(record_dir: Path) -> Path:
    """Write record_dir/index.html; returns its path."""
    record_dir = Path(record_dir)
    run_dir = record_dir.parent
    record, problem = read_json(record_dir / "shrink.json")
    record = record or {}
    original, minimal = _schedule(record_dir / "original.yaml"), _schedule(record_dir / "minimal.yaml")
    span = max(float((s.get("shape") or {}).get("time") or 0) for s in (original, minimal)) or 1.0
    columns = [dict(title="original", schedule=original, bars=_bars(original, span), size=record.get("original_size")),
               dict(title="minimal", schedule=minimal, bars=_bars(minimal, span), size=record.get("minimal_size"))]
    attempts = []
    for attempt in record.get("attempts") or []:
        runs = []
        for item in attempt.get("tries") or []:
            run = item.get("run")
            runs.append({**item, "href": _run_link(Path(run), record_dir) if run else None,
                         "name": Path(run).name if run else "?"})
        attempts.append({**attempt, "runs": runs})
    report = run_dir / "report" / "index.html"
    nav = [dict(label="run report", href="../report/index.html", current=False)] if report.is_file() else []
    nav.append(dict(label="reproducer", href="index.html", current=True))
    return render_page("shrink.html.j2", record_dir / "index.html", install_assets(assets_folder(run_dir)),
                       nav=nav, record=record, problem=problem, columns=columns, attempts=attempts, span=span,
                       generated_at=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ"),
                       source=str(record_dir))
