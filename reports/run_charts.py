"""The charts of a run report, each a pure function of results.json sections
or of the reconstructed history."""
from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from reports.charts import (OUTCOME_COLOURS, OUTCOME_SYMBOLS, OUTCOMES, PATTERN_NOT_RECOVERED, base_layout,
                            fault_colours, fault_shading, hover_lines, hover_text, window_label)
from reports.history import NS, History

MS = 1e6
LANE_HEIGHT_PX = 22
FAILING_COLOUR = "#000000"  # black: apart from every outcome colour, also in greyscale


def detection_seconds(window: dict[str, Any]) -> float | None:
    value = window.get("detection_s")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def window_length(window: dict[str, Any]) -> float | None:
    start, stop = window.get("start_s"), window.get("stop_s")
    if isinstance(start, (int, float)) and isinstance(stop, (int, float)):
        return float(stop) - float(start)
    return None


def rto_figure(windows: list[dict[str, Any]]) -> go.Figure:
    """One bar per fault window (its outage), coloured by fault; a window that never
    recovered is hatched and says so; diamonds mark the failure-detection time."""
    colours = fault_colours(str(w.get("fault")) for w in windows)
    labels = [window_label(w) for w in windows]
    recovered = [w.get("recovered") is not False for w in windows]
    fig = go.Figure()
    for fault, colour in colours.items():
        picked = [i for i, w in enumerate(windows) if str(w.get("fault")) == fault]
        fig.add_bar(
            name=fault, x=[labels[i] for i in picked],
            y=[float(windows[i].get("unavailable_s") or 0.0) for i in picked],
            marker=dict(color=colour, line=dict(color="#222", width=1),
                        pattern=dict(shape=["" if recovered[i] else PATTERN_NOT_RECOVERED for i in picked])),
            text=[f"{float(windows[i].get('unavailable_s') or 0):.2f} s" if recovered[i] else "not recovered"
                  for i in picked], textposition="outside",
            hovertext=[hover_lines([("window", labels[i]), ("unavailable", windows[i].get("unavailable_s")),
                                    ("availability", windows[i].get("availability")),
                                    ("recovered", recovered[i])]) for i in picked],
            hoverinfo="text")
    lengths = [window_length(w) for w in windows]
    fig.add_scatter(name="fault window length", x=labels, y=lengths, mode="markers",
                    marker=dict(symbol="line-ew-open", size=28, color="#333", line=dict(width=2)),
                    hovertemplate="window lasted %{y:.2f} s<extra></extra>")
    detections = [detection_seconds(w) for w in windows]
    if any(d is not None for d in detections):
        fig.add_scatter(name="failure detection should trigger", x=labels, y=detections, mode="markers",
                        marker=dict(symbol="diamond", size=12, color="#000", line=dict(color="#fff", width=1)),
                        hovertemplate="failure detection after %{y:.2f} s<extra></extra>")
    fig.update_layout(**base_layout("Unavailability per fault window (RTO)", barmode="group",
                                    yaxis_title="seconds unavailable", xaxis_title="fault window"))
    return fig


LATENCY_HOVER = ("process %{customdata[0]} %{customdata[1]} key %{customdata[2]}<br>latency %{y:.1f} ms"
                 "<br>node: %{customdata[3]}<br>error: %{customdata[4]}<extra>%{fullData.name}</extra>")
# Per-point values go in customdata (escaped, shortened); the labels are in one template per trace,
# which keeps a 100,000-operation page a few MiB instead of tens.
OP_HOVER = ("#%{customdata[0]} process %{customdata[1]} %{customdata[2]} key %{customdata[3]}"
            "<br>invoked with: %{customdata[4]}<br>returned: %{customdata[5]}"
            "<br>node: %{customdata[6]}<br>error: %{customdata[7]}<extra>%{fullData.name}</extra>")
HOVER_VALUE_CHARS = 80


def _short_hover(value: Any) -> str:
    return hover_text(value, HOVER_VALUE_CHARS)


def _latency_trace(history: History, rows: list[int], outcome: str) -> dict[str, Any]:
    x, y, custom = [], [], []
    for i in rows:
        invoke, complete = history.invoke_time[i], history.complete_time[i]
        x.append(round(invoke / NS, 4))
        y.append(round(max((complete - invoke) / MS, 0.001), 3))
        custom.append([history.process[i], _short_hover(history.f[i]), _short_hover(history.key[i]),
                       _short_hover(history.node[i]), _short_hover(history.error[i])])
    return dict(type="scattergl", mode="markers", name=outcome, x=x, y=y, customdata=custom,
                hovertemplate=LATENCY_HOVER,
                marker=dict(color=OUTCOME_COLOURS[outcome], symbol=OUTCOME_SYMBOLS[outcome], size=5, opacity=0.75))


def latency_figure(history: History, windows: list[dict[str, Any]]) -> dict[str, Any]:
    """Every completed operation: invoke time vs latency (log scale), coloured by outcome,
    fault windows shaded and labelled."""
    by_outcome: dict[str, list[int]] = {o: [] for o in OUTCOMES}
    for i, (outcome, complete) in enumerate(zip(history.type, history.complete_time)):
        if complete is not None and outcome in by_outcome:
            by_outcome[outcome].append(i)
    data = [_latency_trace(history, rows, outcome) for outcome, rows in by_outcome.items() if rows]
    layout = base_layout("Latency of each operation", yaxis=dict(type="log", title="latency (ms)"),
                         xaxis=dict(title="time since run start (s)"),
                         **fault_shading(windows, history.end_s))
    return {"data": data, "layout": layout}


def latency_quantiles_figure(series: list[dict[str, Any]], windows: list[dict[str, Any]]) -> go.Figure:
    """Latency per time bucket (the perf checker's p50 / p99 / max, computed on Spark) for
    runs too big to draw every operation: one line per quantile, operation and outcome."""
    fig = go.Figure()
    widths = {"p50_ms": 1, "p99_ms": 2, "max_ms": 1}
    dashes = {"p50_ms": "dot", "p99_ms": "solid", "max_ms": "dash"}
    for entry in series:
        outcome = str(entry.get("type"))
        for name, width in widths.items():
            if not entry.get(name):
                continue
            fig.add_scatter(name=hover_text(f"{entry.get('f')} {outcome} {name.removesuffix('_ms')}"),
                            x=entry.get("t_s", []), y=entry.get(name), mode="lines",
                            line=dict(color=OUTCOME_COLOURS.get(outcome, "#555"), width=width, dash=dashes[name]))
    fig.update_layout(**base_layout("Latency per time bucket (p50 dotted, p99 solid, max dashed)",
                                    yaxis=dict(type="log", title="latency (ms)"),
                                    xaxis_title="time since run start (s)", **fault_shading(windows)))
    return fig


def throughput_figure(series: list[dict[str, Any]], windows: list[dict[str, Any]]) -> go.Figure:
    """Completed operations per second, one line per operation and outcome."""
    fig = go.Figure()
    dashes = ("solid", "dash", "dot", "dashdot", "longdash")
    names = sorted({str(s.get("f")) for s in series})
    for entry in series:
        outcome = str(entry.get("type"))
        fig.add_scatter(name=hover_text(f"{entry.get('f')} {outcome}"), x=entry.get("t_s", []),
                        y=entry.get("throughput", []), mode="lines+markers",
                        line=dict(color=OUTCOME_COLOURS.get(outcome, "#555"),
                                  dash=dashes[names.index(str(entry.get("f"))) % len(dashes)]),
                        marker=dict(symbol=OUTCOME_SYMBOLS.get(outcome, "circle"), size=5))
    fig.update_layout(**base_layout("Throughput by operation and outcome", yaxis_title="operations / s",
                                    xaxis_title="time since run start (s)", **fault_shading(windows)))
    return fig


def quantiles_figure(latency: list[dict[str, Any]]) -> go.Figure:
    """p50 / p95 / p99 / max latency of each operation and outcome (log scale)."""
    labels = [hover_text(f"{row.get('f')} {row.get('type')}") for row in latency]
    fig = go.Figure()
    for name, colour in (("p50_ms", "#56B4E9"), ("p95_ms", "#0072B2"), ("p99_ms", "#CC79A7"), ("max_ms", "#333")):
        fig.add_bar(name=name.removesuffix("_ms"), x=labels, y=[row.get(name) for row in latency],
                    marker_color=colour)
    fig.update_layout(**base_layout("Latency quantiles per operation", barmode="group",
                                    yaxis=dict(type="log", title="latency (ms)")))
    return fig


def _op_custom(history: History, i: int) -> list[Any]:
    """An operation's values for OP_HOVER, escaped and shortened."""
    return [history.index[i], history.process[i], *(_short_hover(v) for v in (
        history.f[i], history.key[i], history.invoke_value[i], history.value[i], history.node[i], history.error[i]))]


def op_hover(history: History, i: int) -> str:
    return hover_lines([("op", f"#{history.index[i]} process {history.process[i]} {history.f[i]} "
                               f"key {history.key[i]}"),
                        ("invoked with", history.invoke_value[i]), ("returned", history.value[i]),
                        ("outcome", history.type[i]), ("node", history.node[i]), ("error", history.error[i])])


TIMELINE_BAR_BUDGET = 8000


def timeline_figure(history: History, windows: list[dict[str, Any]]) -> dict[str, Any]:
    """Jepsen-style timeline: one lane per process, one invoke-to-completion bar per
    operation coloured by outcome; hovering a bar's middle shows the op, its values
    and node.

    Per outcome, a WebGL marker trace at each operation's middle carries the hover,
    and a second trace draws the bars as horizontal error bars. Software WebGL
    (no GPU) needs about 9 s for 100,000 such bars, so assets/report.js draws at
    most `bars_budget` of them for the current zoom, the longest first, and
    redraws on every zoom (layout.meta.timeline); the markers show every op."""
    end_s = history.end_s
    data = []
    for outcome in OUTCOMES:
        mid_x, mid_y, half, custom = [], [], [], []
        for i, kind in enumerate(history.type):
            if kind != outcome:
                continue
            start = history.invoke_time[i] / NS
            stop = history.complete_time[i] / NS if history.complete_time[i] is not None else end_s
            mid_x.append(round((start + stop) / 2, 5))
            half.append(round((stop - start) / 2, 5))
            mid_y.append(history.process[i])
            custom.append(_op_custom(history, i))
        if not mid_x:
            continue
        colour = OUTCOME_COLOURS[outcome]
        data.append(dict(type="scattergl", mode="markers", name=outcome, x=mid_x, y=mid_y, legendgroup=outcome,
                         customdata=custom, hovertemplate=OP_HOVER,
                         marker=dict(color=colour, size=5, symbol=OUTCOME_SYMBOLS[outcome],
                                     line=dict(color="#fff", width=0.5))))
        data.append(dict(type="scattergl", mode="markers", name=f"{outcome} bars", x=mid_x, y=mid_y,
                         legendgroup=outcome, showlegend=False, hoverinfo="skip", marker=dict(size=0, opacity=0),
                         error_x=dict(type="data", array=half, symmetric=True, width=0, thickness=7, color=colour)))
    layout = base_layout("Operations per process over time", height=None, hovermode="closest",
                         xaxis=dict(title="time since run start (s)"),
                         yaxis=dict(title="process", autorange="reversed", zeroline=False),
                         **fault_shading(windows, end_s))
    layout["autosize"] = True
    layout["meta"] = {"timeline": {"bars_budget": TIMELINE_BAR_BUDGET}}
    return {"data": data, "layout": layout}
