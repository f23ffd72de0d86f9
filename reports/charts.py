"""Plotly figures as page fragments, and the small builders every page shares.

A figure becomes an empty div plus its JSON in a `<script type="application/json">`
block; assets/report.js draws every such div with the bundled plotly.min.js.
The JSON is escaped so that no value (a message body `</script>`, `<!--`) can
end the block early, and every text that plotly shows on hover is HTML-escaped
first, because plotly interprets a subset of HTML in hover labels.
"""
from __future__ import annotations

import html
import json
from collections.abc import Iterable, Sequence
from typing import Any

import markupsafe
import plotly.graph_objects as go
import plotly.io as pio

# Okabe-Ito colours: distinguishable with the common colour-vision deficiencies;
# outcomes also differ by marker symbol, so they read in greyscale print too.
OUTCOME_COLOURS = {"ok": "#0072B2", "fail": "#D55E00", "info": "#E69F00"}
OUTCOME_SYMBOLS = {"ok": "circle", "fail": "x", "info": "diamond"}
OUTCOMES = ("ok", "fail", "info")
FAULT_PALETTE = ("#CC79A7", "#009E73", "#56B4E9", "#F0E442", "#E69F00", "#0072B2", "#D55E00", "#999999")
PATTERN_NOT_RECOVERED = "/"

_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def safe_json(text: str) -> str:
    """JSON text made safe inside an HTML <script> block: `<`, `>`, `&` only occur
    inside JSON strings, where their \\u escapes mean the same characters."""
    for char, escaped in _JSON_ESCAPES.items():
        text = text.replace(char, escaped)
    return text


Figure = go.Figure | dict


def figure_json(fig: Figure) -> str:
    """A go.Figure, or a plain {"data", "layout"} dict (big figures skip plotly's
    per-point validation), as script-safe JSON."""
    if isinstance(fig, dict):
        return safe_json(json.dumps(fig, separators=(",", ":"), allow_nan=False, default=str))
    return safe_json(pio.to_json(fig, validate=False, pretty=False, engine="json"))


def figure_div(fig: Figure, div_id: str) -> markupsafe.Markup:
    """A figure as `<div class="chart">` + its data; plotly.js is not inlined."""
    ident = markupsafe.escape(div_id)
    return markupsafe.Markup(
        f'<div class="chart" id="{ident}" data-figure="{ident}-data"></div>\n'
        f'<script type="application/json" id="{ident}-data">{figure_json(fig)}</script>')


def hover_text(value: Any, limit: int = 300) -> str:
    """A value as hover-label text: shortened, then HTML-escaped."""
    text = value if isinstance(value, str) else ("" if value is None else str(value))
    if len(text) > limit:
        text = text[:limit] + "…"
    return html.escape(text, quote=False)  # quotes are plain text in plotly labels


def short_value(value: Any, limit: int = 24) -> str:
    """An operation's value in a bar label: None reads nil, long values end in an ellipsis."""
    text = "nil" if value is None else (value if isinstance(value, str) else str(value))
    return text if len(text) <= limit else text[:limit] + "…"


def hover_lines(pairs: Iterable[tuple[str, Any]]) -> str:
    """`name: value` lines for a hover label, each value escaped."""
    return "<br>".join(f"{html.escape(name)}: {hover_text(value)}" for name, value in pairs)


def fault_colours(faults: Iterable[str]) -> dict[str, str]:
    """One colour per fault name, stable in order of first appearance."""
    colours: dict[str, str] = {}
    for name in faults:
        if name not in colours:
            colours[name] = FAULT_PALETTE[len(colours) % len(FAULT_PALETTE)]
    return colours


def window_label(window: dict[str, Any]) -> str:
    targets = window.get("targets") or []
    shown = ",".join(map(str, targets)) if isinstance(targets, list) else str(targets)
    return f"#{window.get('id')} {window.get('fault')}" + (f" ({shown})" if shown else "")


def fault_shading(windows: Sequence[dict[str, Any]], end_s: float | None = None) -> dict[str, list]:
    """Layout shapes and annotations that shade and label each fault window
    (times in seconds; an open window runs to `end_s`)."""
    colours = fault_colours(str(w.get("fault")) for w in windows)
    shapes, annotations = [], []
    for window in windows:
        start, stop = window.get("start_s"), window.get("stop_s")
        if not isinstance(start, (int, float)):
            continue
        stop = stop if isinstance(stop, (int, float)) else (end_s if end_s is not None else start)
        colour = colours[str(window.get("fault"))]
        shapes.append(dict(type="rect", xref="x", yref="paper", x0=start, x1=stop, y0=0, y1=1,
                           fillcolor=colour, opacity=0.18, line=dict(width=1, color=colour), layer="below"))
        annotations.append(dict(x=start, y=1, xref="x", yref="paper", xanchor="left", yanchor="bottom",
                                text=html.escape(window_label(window)), showarrow=False,
                                font=dict(size=10, color="#333")))
    return {"shapes": shapes, "annotations": annotations}


def base_layout(title: str | None = None, **overrides: Any) -> dict[str, Any]:
    """Shared look: white background, readable margins, legend on top."""
    layout: dict[str, Any] = dict(template="plotly_white", margin=dict(l=60, r=20, t=50, b=50), height=360,
                                  legend=dict(orientation="h", y=-0.2), hovermode="closest",
                                  font=dict(family="system-ui, sans-serif", size=12))
    if title:
        layout["title"] = dict(text=html.escape(title), x=0, font=dict(size=14))
    for name in [k for k in overrides if k.endswith("axis_title")]:
        axis = name.removesuffix("_title")
        overrides[axis] = {**overrides.get(axis, {}), "title": overrides.pop(name)}
    layout.update(overrides)
    for name, axis in layout.items():
        if name.startswith(("xaxis", "yaxis")) and isinstance(axis, dict):
            layout[name] = axis_style(axis)
    return layout


def axis_title(text: str) -> dict[str, Any]:
    """An axis title as plotly.js reads it: a plain string is ignored by current plotly.js."""
    return dict(text=html.escape(text), standoff=8)


def axis_style(axis: dict[str, Any]) -> dict[str, Any]:
    """An axis with its title in plotly.js's form and, on a log scale, one tick per decade
    (the default ticks at 2 and 5 pile up over a few decades)."""
    axis = dict(axis)
    if isinstance(axis.get("title"), str):
        axis["title"] = axis_title(axis["title"])
    if axis.get("title"):
        axis.setdefault("automargin", True)
    if axis.get("type") == "log":
        axis.setdefault("dtick", 1)
    return axis
