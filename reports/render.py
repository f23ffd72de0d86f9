"""Jinja2 rendering shared by every page: one environment, atomic writes,
assets referenced relative to the page."""
from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import jinja2

from reports import stats


def write_atomic(dest: Path, text: str) -> Path:
    """Write through a temporary file and a rename: a browser or a copy never sees half a page."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, dest)
    return dest


def _seconds(value: Any, digits: int = 2) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "–"
    return f"{value:.{digits}f} s"


def _number(value: Any, digits: int = 2) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "–" if value is None else str(value)
    return f"{value:,}" if isinstance(value, int) else f"{value:,.{digits}f}"


def _percent(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "–"
    return f"{100 * value:.1f} %"


def _compact(value: Any) -> str:
    """Any JSON value as short text (the template escapes it)."""
    if isinstance(value, str):
        return value
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".")
    return json.dumps(value, default=str, sort_keys=True)


@functools.cache
def environment() -> jinja2.Environment:
    """The templates of reports/templates with autoescaping on for everything."""
    env = jinja2.Environment(loader=jinja2.PackageLoader("reports", "templates"), autoescape=True,
                             undefined=jinja2.ChainableUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(seconds=_seconds, number=_number, percent=_percent, compact=_compact)
    env.globals.update(min_ci_n=stats.MIN_CI_N, min_test_n=stats.min_samples())
    return env


def relative_url(target: Path, start_dir: Path) -> str:
    """The URL of `target` as seen from a page in `start_dir` (forward slashes)."""
    return Path(os.path.relpath(Path(target).resolve(), Path(start_dir).resolve())).as_posix()


def render_page(template: str, dest: Path, assets_dir: Path, **context: Any) -> Path:
    """Render `template` to `dest` atomically; the template gets `assets`, the
    relative URL from dest's folder to `assets_dir`."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    html = environment().get_template(template).render(assets=relative_url(assets_dir, dest.parent), **context)
    return write_atomic(dest, html)
