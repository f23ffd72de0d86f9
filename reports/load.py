"""Tolerant readers of the store for every page.

A page never fails because one file is missing, truncated or malformed: each
reader returns what it could read plus one line saying which file and what
is wrong, and the page shows that line in the section the file feeds.
Reports read the store's files only, run.json, results.json and campaign.json through
the `records` models; they never import checkers/ or harness/.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from records import CampaignJson, ResultsJson, RunJson, StoreFormatError
from records.base import StoreFile, parse_model, version_problem_of

LATEST = "latest"


def read_json(path: Path) -> tuple[Any | None, str | None]:
    """(data, None) or (None, "path: what is wrong")."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, f"{path}: missing"
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"{path}: unreadable: {getattr(exc, 'strerror', None) or exc}"
    if not text.strip():
        return None, f"{path}: empty file (truncated?)"
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, (f"{path}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg} "
                      "(truncated or garbled?)")


def read_jsonl(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The JSON objects of a .jsonl file and one problem per bad line (`path:line: reason`)."""
    path = Path(path)
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return rows, [f"{path}: missing"]
    except OSError as exc:
        return rows, [f"{path}: unreadable: {exc.strerror or exc}"]
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            problems.append(f"{path}:{number}: not valid JSON (truncated or garbled line?)")
            continue
        if isinstance(row, dict):
            rows.append(row)
        else:
            problems.append(f"{path}:{number}: not a JSON object")
    return rows, problems


def read_table(path: Path, columns: list[str] | None = None) -> tuple[dict[str, list] | None, str | None]:
    """A Parquet table (file or directory of parts) as {column: values}, or a problem."""
    path = Path(path)
    if not path.exists():
        return None, f"{path}: missing"
    try:
        import pyarrow.parquet as pq
        table = pq.read_table(path, columns=columns)
    except Exception as exc:  # noqa: BLE001 - a damaged table is reported, never fatal
        return None, f"{path}: unreadable Parquet: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return table.to_pydict(), None


def section(data: Any, *keys: str) -> dict[str, Any]:
    """data[k1][k2]... when every step is a dict, else {}."""
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data if isinstance(data, dict) else {}


@dataclass
class StoredRun:
    """What the pages know of one run: run.json, results.json, and why either is missing."""

    path: Path
    run: dict[str, Any] = field(default_factory=dict)
    results: dict[str, Any] = field(default_factory=dict)
    run_problem: str | None = None
    results_problem: str | None = None

    @property
    def run_id(self) -> str:
        return str(self.run.get("run_id") or self.path.name)

    @property
    def campaign_id(self) -> str:
        return str(self.run.get("campaign_id") or self.path.parent.parent.name)

    @property
    def spec(self) -> dict[str, Any]:
        return section(self.run, "spec")

    @property
    def valid(self) -> Any:
        """true / false / "unknown" (no results counts as unknown)."""
        value = self.results.get("valid", "unknown") if self.results else "unknown"
        return value if value in (True, False) else "unknown"

    @property
    def checkers(self) -> dict[str, Any]:
        return section(self.results, "checkers")

    def checker(self, name: str) -> dict[str, Any]:
        return section(self.results, "checkers", name)

    @property
    def report(self) -> Path:
        return self.path / "report" / "index.html"

    def get(self, name: str, default: Any = None) -> Any:
        """A run setting: its run.json field, else the resolved spec's."""
        if name in self.run:
            return self.run[name]
        return self.spec.get(name, default)


def read_store_file(model: type[StoreFile], path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(the file's fields as written, None) or (None, "path: what is wrong"), read through `model`."""
    doc, problem = read_json(path)
    if problem is not None:
        return None, problem
    try:
        return parse_model(model, doc, str(path)).model_dump(mode="json", exclude_unset=True), None
    except StoreFormatError as exc:
        return None, str(exc)


def load_run(run_dir: Path) -> StoredRun:
    run_dir = Path(run_dir)
    run, run_problem = read_store_file(RunJson, run_dir / "run.json")
    results, results_problem = read_store_file(ResultsJson, run_dir / "results.json")
    return StoredRun(run_dir, run or {}, results or {}, run_problem, results_problem)


def old_store_file(path: Path) -> str | None:
    """The first file under `path` (a run, campaign or store) written by another schema
    version, as one line; None when there is none. Malformed files are the pages' to show."""
    path = Path(path)
    candidates = [path / "campaign.json", path / "run.json", path / "results.json"]
    for campaign in [path] if is_campaign_dir(path) else campaign_dirs(path):
        candidates.append(campaign / "campaign.json")
        for run in run_dirs(campaign):
            candidates += [run / "run.json", run / "results.json"]
    for candidate in candidates:
        problem = version_problem_of(candidate)
        if problem is not None:
            return problem
    return None


# -- what a path is -----------------------------------------------------------------------

def is_run_dir(path: Path) -> bool:
    path = Path(path)
    return path.is_dir() and ((path / "run.json").is_file() or (path / "history").is_dir()
                              or (path / "results.json").is_file())


def is_campaign_dir(path: Path) -> bool:
    path = Path(path)
    return path.is_dir() and ((path / "campaign.json").is_file() or (path / "runs").is_dir())


def is_store(path: Path) -> bool:
    path = Path(path)
    return path.is_dir() and not is_campaign_dir(path) and any(is_campaign_dir(p) for p in campaign_dirs(path))


def campaign_dirs(store_root: Path) -> list[Path]:
    """The campaigns of a store, newest first (campaign ids sort by time; `latest` skipped)."""
    root = Path(store_root)
    try:
        children = [p for p in root.iterdir() if p.name != LATEST and not p.is_symlink() and p.is_dir()]
    except OSError:
        return []
    return sorted((p for p in children if is_campaign_dir(p)), key=lambda p: p.name, reverse=True)


def run_dirs(campaign_dir: Path) -> list[Path]:
    """The runs of a campaign in campaign.json's order, then any others by name."""
    campaign_dir = Path(campaign_dir)
    data, _ = read_store_file(CampaignJson, campaign_dir / "campaign.json")
    listed = [str(r) for r in data.get("runs", [])] if isinstance(data, dict) and isinstance(data.get("runs"), list) else []
    runs_root = campaign_dir / "runs"
    found = sorted(p.name for p in runs_root.iterdir() if p.is_dir()) if runs_root.is_dir() else []
    ordered = [name for name in listed if name in found] + [name for name in found if name not in listed]
    return [runs_root / name for name in ordered]


def campaign_runs(campaign_dir: Path) -> list[StoredRun]:
    """Every run of a campaign with its facts."""
    return [load_run(path) for path in run_dirs(campaign_dir)]
