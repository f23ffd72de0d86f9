"""Reading histories from files: Jepsen EDN (through edn_format) and our JSON.

EDN keywords become strings (`:read` -> "read"), or ints when their name is
an integer; vectors and lists become lists, sets become sorted lists, maps
become dicts with converted keys, so an EDN history looks like ours.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import edn_format

from .history import HistoryError


def from_edn(value: Any) -> Any:
    """Converts an edn_format value into plain JSON-like Python data."""
    if isinstance(value, edn_format.Keyword):
        return _keyword(value.name)
    if isinstance(value, (edn_format.ImmutableDict, dict)):
        return {_hashable(from_edn(k)): from_edn(v) for k, v in value.items()}
    if isinstance(value, (edn_format.ImmutableList, list, tuple)):
        return [from_edn(v) for v in value]
    if isinstance(value, (frozenset, set)):
        items = [from_edn(v) for v in value]
        try:
            return sorted(items)
        except TypeError:
            return sorted(items, key=repr)
    if isinstance(value, (edn_format.Symbol, edn_format.Char)):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _keyword(name: str) -> Any:
    try:
        return int(name)
    except ValueError:
        return name


def read_edn(text: str, source: str = "<edn>") -> list[dict]:
    """Parses an EDN history: one vector/list of op maps, or op maps one after another."""
    try:
        forms = edn_format.loads_all(text)
    except Exception as err:  # edn_format raises several types for bad input
        raise HistoryError(f"{source}: not valid EDN: {err}") from None
    if len(forms) == 1 and isinstance(forms[0], (edn_format.ImmutableList, tuple, list)):
        forms = forms[0]
    events = [from_edn(form) for form in forms]
    for pos, event in enumerate(events):
        if not isinstance(event, dict):
            raise HistoryError(f"{source}: form #{pos} is not an op map: {event!r:.80}")
    return events


def read_json(text: str, source: str = "<json>") -> list[dict]:
    """Parses our history: JSON lines (one event per line) or one JSON array."""
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            events = json.loads(text)
        except json.JSONDecodeError as err:
            raise HistoryError(f"{source}: not valid JSON: {err}") from None
    else:
        events = []
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise HistoryError(f"{source}:{lineno}: malformed history line: {err.msg}") from None
    for pos, event in enumerate(events):
        if not isinstance(event, dict):
            raise HistoryError(f"{source}: event #{pos} is not a JSON object")
    return events


def load_history(path: str | Path) -> list[dict]:
    """Reads a history file (.edn, or JSON lines / JSON array), or a run
    directory whose history/*.jsonl files are merged in time order."""
    path = Path(path)
    if path.is_dir():
        files = sorted((path / "history").glob("*.jsonl")) if (path / "history").is_dir() \
            else sorted(path.glob("*.jsonl"))
        if not files:
            raise HistoryError(f"{path}: a directory with no history/*.jsonl files")
        events = [e for f in files for e in read_json(_read(f), str(f))]
        if any(not isinstance(e.get("time"), (int, float)) for e in events):
            raise HistoryError(f"{path}: merging worker files needs a numeric time on every event")
        return sorted(events, key=lambda e: e["time"])
    text = _read(path)
    if path.suffix == ".edn":
        return read_edn(text, str(path))
    return read_json(text, str(path))


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as err:
        raise HistoryError(f"{path}: cannot read: {err.strerror}") from None
    except UnicodeDecodeError:
        raise HistoryError(f"{path}: not a UTF-8 text file") from None
