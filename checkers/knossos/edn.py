"""Reading histories from files: Jepsen EDN (through edn_format) and our JSON.

EDN keywords become strings (`:read` -> "read"), or ints when their name is
an integer; vectors and lists become lists, sets become sorted lists, maps
become dicts with converted keys, so an EDN history looks like ours.
"""
from __future__ import annotations

import json
import re
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
        forms = _fast_forms(text)
    except (_NotPlain, ValueError):
        forms = None
    if forms is None:
        try:
            forms = [from_edn(form) for form in edn_format.loads_all(text)]
        except Exception as err:  # edn_format raises several types for bad input
            raise HistoryError(f"{source}: not valid EDN: {err}") from None
    if len(forms) == 1 and isinstance(forms[0], list):
        forms = forms[0]
    events = forms
    for pos, event in enumerate(events):
        if not isinstance(event, dict):
            raise HistoryError(f"{source}: form #{pos} is not an op map: {event!r:.80}")
    return events


class _NotPlain(Exception):
    """The text uses EDN beyond the plain subset: edn_format reads it."""


# The plain subset Jepsen histories use: collections, keywords, strings,
# numbers, nil/true/false, comments. Anything else (tags such as #inst,
# characters, ratios, symbols, metadata) falls back to edn_format, which
# reads all of EDN but is about 20 times slower on big histories.
_TOKEN = re.compile(r"""
    (?:[\s,]+|;[^\n]*)* (?:
    (?P<kw>:[A-Za-z0-9*+!\-_?<>=./]+) |
    (?P<num>[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?=[\s,\])}]|$)) |
    (?P<close>[\])}]) | (?P<open>\#\{|[\[({]) |
    (?P<str>"(?:[^"\\]|\\.)*") |
    (?P<word>(?:nil|true|false)(?=[\s,\])}]|$)) |
    (?P<end>$) | (?P<other>.) )
""", re.VERBOSE | re.DOTALL)
_WORDS = {"nil": None, "true": True, "false": False}
_CLOSES = {"]": "[", ")": "(", "}": "{"}


def _fast_forms(text: str) -> list[Any]:
    """Top-level forms of a plain-subset EDN text, as from_edn would give them."""
    stack: list[tuple[str, list]] = []
    items: list = []
    opener = ""
    keywords: dict[str, Any] = {}
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        token = m.group(kind)
        if kind == "kw":
            value = keywords.get(token)
            if value is None:
                value = keywords[token] = _keyword(token[1:])
            items.append(value)
        elif kind == "num":
            items.append(int(token) if token.isdigit() else _number(token))
        elif kind == "close":
            if not stack or _CLOSES[token] != opener[-1]:
                raise _NotPlain
            value = _collection(opener, items)
            opener, items = stack.pop()
            items.append(value)
        elif kind == "open":
            stack.append((opener, items))
            opener, items = token, []
        elif kind == "str":
            items.append(json.loads(token))
        elif kind == "word":
            items.append(_WORDS[token])
        elif kind == "end":
            break
        else:
            raise _NotPlain  # something the plain subset does not know
    if stack:
        raise _NotPlain
    return items


def _number(token: str) -> int | float:
    return float(token) if "." in token or "e" in token or "E" in token else int(token)


def _collection(opener: str, items: list) -> Any:
    if opener == "{":
        if len(items) % 2:
            raise _NotPlain
        try:
            return dict(zip(items[::2], items[1::2]))
        except TypeError:  # a collection as a key: edn_format's reading makes it a tuple
            raise _NotPlain from None
    if opener == "#{":
        try:
            return sorted(items)
        except TypeError:
            return sorted(items, key=repr)
    return items


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
        return without_audit(sorted(events, key=lambda e: e["time"]))
    text = _read(path)
    if path.suffix == ".edn":
        return read_edn(text, str(path))
    return without_audit(read_json(text, str(path)))


def without_audit(events: list[dict]) -> list[dict]:
    """A run's history less its durability-audit reads (`f: audit`): they read the final
    log after healing for the queue checks and are no operation of any model."""
    from checkers.ops import AUDIT_FUNCTION
    return [e for e in events if e.get("f") != AUDIT_FUNCTION]


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as err:
        raise HistoryError(f"{path}: cannot read: {err.strerror}") from None
    except UnicodeDecodeError:
        raise HistoryError(f"{path}: not a UTF-8 text file") from None
