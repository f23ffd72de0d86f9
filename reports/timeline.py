"""timeline.html: what happened, and when.

Above the lanes of the client processes, lanes of the cluster's own view of
itself (cluster.jsonl): per broker group the master or Raft leader with its
epoch or term, the SyncStateSet, the controller leader, and per node the
fault windows that hit it and the spans when its processes did not answer.
Every anomaly of the queue checker is a marker at the operation that shows
it (anomalies.WHERE), listed beside the chart; the list and the markers open
the anomaly's details (assets/report.js, data in a JSON block).
"""
from __future__ import annotations

import bisect

from dataclasses import dataclass
from typing import Any

from reports import anomalies, run_charts
from reports.charts import axis_title, base_layout, fault_colours, hover_lines, hover_text, short_value
from reports.history import NS, History

CLUSTER_AXIS = "y2"
CLUSTER_LANE_PX = 26
PROCESS_LANE_PX = 18
LIST_LIMIT = 500        # anomalies listed (and marked) per category; the downloads hold all
OPS_PER_ANOMALY = 20    # operations marked per anomaly (an offset seen by thousands of polls)
VALUES_PER_FIELD = 20   # list items shown per field of an anomaly's details
NO_LEADER_COLOUR = "#ffffff"
DOWN_COLOUR = "#777777"
# Shapes stand apart from the op markers (circle, x, diamond) and from each other.
INVARIANT_CATEGORY = "invariant_breach"  # checkers/invariants.py's findings
ANOMALY_SYMBOLS = {"invariant_breach": "bowtie-open", "lost": "x-thin-open", "lost_after_consume": "hourglass", "inconsistent_offsets": "diamond-wide-open",
                   "poll_skip": "triangle-right-open", "unexpected": "star-open", "duplicated": "circle-cross-open",
                   "recovered": "square-open", "nonmonotonic_poll": "triangle-left-open"}
ANOMALY_COLOURS = {"invariant_breach": "#E31A1C", "lost": "#C00000", "lost_after_consume": "#8B0000", "inconsistent_offsets": "#6A3D9A",
                   "poll_skip": "#B15928", "unexpected": "#1B7837", "duplicated": "#444444",
                   "recovered": "#666666", "nonmonotonic_poll": "#B15928"}


@dataclass
class Span:
    lane: str
    start: float
    stop: float
    label: str
    colour: str
    hover: str
    data: list[Any]


# -- cluster lanes ----------------------------------------------------------------------------

def _changes(states: list[dict[str, Any]], value) -> list[tuple[float, Any]]:
    """(time in s, value) at each state line where `value(line)` changed."""
    out: list[tuple[float, Any]] = []
    for line in states:
        if "error" in line or not isinstance(line.get("time"), int):
            continue
        current = value(line)
        if not out or out[-1][1] != current:
            out.append((line["time"] / NS, current))
    return out


def _spans_of(changes: list[tuple[float, Any]], end_s: float):
    for (start, current), following in zip(changes, changes[1:] + [(max(end_s, changes[-1][0]), None)]):
        yield start, following[0], current


def cluster_spans(states: list[dict[str, Any]], windows: list[dict[str, Any]], end_s: float) -> list[Span]:
    """Every span of every cluster lane, lanes in reading order (controller, groups, nodes)."""
    spans: list[Span] = []
    controller = _changes(states, lambda l: (l.get("controller") or {}).get("leader", "absent")
                          if l.get("controller") else None)
    if any(value is not None for _, value in controller):
        terms = _changes(states, lambda l: ((l.get("controller") or {}).get("leader"),
                                            (l.get("controller") or {}).get("term")))
        for start, stop, (leader, term) in _spans_of(terms, end_s):
            label = f"{leader} · term {term}" if leader else "no leader"
            spans.append(Span("controller leader", start, stop, label,
                              ROLE_COLOURS["master"] if leader else NO_LEADER_COLOUR,
                              hover_lines([("controller leader", leader or "none"), ("term", term),
                                           ("from", f"{start:.2f} s"), ("to", f"{stop:.2f} s")]),
                              ["controller", leader, term]))
    groups = sorted({g for line in states for g in (line.get("groups") or {})})
    for group in groups:
        spans += _group_spans(states, group, end_s)
    spans += _node_spans(states, windows, end_s)
    return spans


def _group_spans(states: list[dict[str, Any]], group: str, end_s: float) -> list[Span]:
    def view(line: dict[str, Any]) -> dict[str, Any]:
        return (line.get("groups") or {}).get(group) or {}
    spans = []
    members = sorted({str(n) for line in states for n in (view(line).get("members") or {})})
    if not members:  # a deployer that reports only the master: one lane for it
        masters = _changes(states, lambda l: (view(l).get("master"), view(l).get("epoch"), view(l).get("term")))
        for start, stop, (master, epoch, term) in _spans_of(masters, end_s):
            label = f"{master} · {_rank(epoch, term)}".rstrip(" ·") if master else "no master"
            spans.append(Span(f"{group} master", start, stop, label, ROLE_COLOURS["master"] if master
                              else NO_LEADER_COLOUR, hover_lines([("group", group), ("master", master or "none"),
                                                                  ("epoch", epoch), ("term", term),
                                                                  ("from", f"{start:.2f} s"), ("to", f"{stop:.2f} s")]),
                              ["role-master" if master else "role-other", group, master, epoch if epoch is not None else term]))
    for node in members:
        spans += _role_spans(states, group, node, view, end_s)
    sss = _changes(states, lambda l: tuple(view(l).get("sync_state_set") or ()) or None)
    if any(value for _, value in sss):
        for start, stop, members in _spans_of(sss, end_s):
            label = ", ".join(members) if members else "unknown"
            spans.append(Span(f"{group} SyncStateSet", start, stop, label, "#DCEBF7" if members else "#ffffff",
                              hover_lines([("group", group), ("SyncStateSet", label),
                                           ("from", f"{start:.2f} s"), ("to", f"{stop:.2f} s")]),
                              ["sss", group, list(members or ())]))
    return spans


ROLE_KINDS = {"master": "role-master", "leader": "role-master", "slave": "role-slave", "follower": "role-slave",
              "candidate": "role-candidate", "down": "role-down"}
# Role colours stay apart from the node and fault colours (FAULT_PALETTE): a lane's colour says the role.
ROLE_COLOURS = {"master": "#B8E186", "role-slave": "#D9D9D9", "role-candidate": "#FFF2AE", "role-down": DOWN_COLOUR,
                "role-other": "#FFFFFF"}


def _rank(epoch: Any, term: Any) -> str:
    return f"epoch {epoch}" if epoch is not None else (f"term {term}" if term is not None else "")


def _role_spans(states: list[dict[str, Any]], group: str, node: str, view, end_s: float) -> list[Span]:
    """One lane per member of a group: its own role over time, so two members that both
    say master at once show as two master bars one above the other."""
    def role(line: dict[str, Any]) -> tuple[Any, ...]:
        now = (view(line).get("members") or {}).get(node)
        # The group's epoch / term is the one its reported master gives; another member that
        # also claims master (split brain) is not known to be at that epoch.
        claims = now in ("master", "leader") and view(line).get("master") == node
        return (now, view(line).get("epoch") if claims else None, view(line).get("term") if claims else None)
    spans = []
    for start, stop, (now, epoch, term) in _spans_of(_changes(states, role), end_s):
        if now is None:
            continue
        kind = ROLE_KINDS.get(str(now), "role-other")
        rank = _rank(epoch, term)
        label = f"{now} · {rank}" if rank else str(now)
        spans.append(Span(f"{group} {node}", start, stop, label,
                          ROLE_COLOURS["master"] if kind == "role-master" else ROLE_COLOURS[kind],
                          hover_lines([("group", group), ("node", node), ("role", now), ("epoch", epoch),
                                       ("term", term), ("from", f"{start:.2f} s"), ("to", f"{stop:.2f} s")]),
                          [kind, group, node, str(now)]))
    return spans


def _node_spans(states: list[dict[str, Any]], windows: list[dict[str, Any]], end_s: float) -> list[Span]:
    spans = []
    fault_colour = fault_colours(str(w.get("fault")) for w in windows)
    nodes = sorted({n for line in states for n in (line.get("nodes") or {})}
                   | {str(t) for w in windows for t in (w.get("targets") or []) if isinstance(w.get("targets"), list)})
    for node in nodes:
        for window in windows:
            targets = window.get("targets") if isinstance(window.get("targets"), list) else []
            start, stop = window.get("start_s"), window.get("stop_s")
            if node not in map(str, targets) or not isinstance(start, (int, float)):
                continue
            stop = stop if isinstance(stop, (int, float)) else end_s
            spans.append(Span(f"{node} faults", start, stop, str(window.get("fault")),
                              fault_colour[str(window.get("fault"))],
                              hover_lines([("node", node), ("fault", window.get("fault")),
                                           ("window", window.get("id")), ("from", f"{start:.2f} s"),
                                           ("to", f"{stop:.2f} s")]),
                              ["fault", node, window.get("fault")]))
        down = _changes(states, lambda l: _down_text((l.get("nodes") or {}).get(node)))
        for start, stop, text in _spans_of(down, end_s) if down else ():
            if text:
                spans.append(Span(f"{node} faults", start, stop, text, DOWN_COLOUR,
                                  hover_lines([("node", node), ("seen from the control node", text),
                                               ("from", f"{start:.2f} s"), ("to", f"{stop:.2f} s")]),
                                  ["down", node, text]))
    return spans


def _down_text(entry: dict[str, Any] | None) -> str | None:
    if not entry:
        return None
    if not entry.get("reachable"):
        return "unreachable"
    return ("down: " + ", ".join(entry["down"])) if entry.get("down") else None


SPAN_KINDS = (("controller", "controller leader"), ("role-master", "master / leader"),
              ("role-slave", "slave / follower"), ("role-candidate", "candidate"), ("role-down", "member down"),
              ("role-other", "other role"), ("sss", "SyncStateSet"), ("fault", "fault windows"),
              ("down", "not answering"))


def span_traces(spans: list[Span]) -> list[dict[str, Any]]:
    """One horizontal bar trace per kind of span, on the cluster axis."""
    traces = []
    for kind, name in SPAN_KINDS:
        picked = [s for s in spans if s.data[0] == kind]
        if not picked:
            continue
        traces.append(dict(
            type="bar", orientation="h", name=name, yaxis=CLUSTER_AXIS, base=[round(s.start, 4) for s in picked],
            x=[round(max(s.stop - s.start, 1e-3), 4) for s in picked], y=[s.lane for s in picked],
            text=[hover_text(s.label) for s in picked], textposition="inside", insidetextanchor="middle",
            textfont=dict(color="#000", size=11), hovertext=[s.hover for s in picked], hoverinfo="text",
            customdata=[s.data for s in picked], width=0.8 if kind != "down" else 0.45,
            marker=dict(color=[s.colour for s in picked], line=dict(color="#333", width=1),
                        pattern=dict(shape="/" if kind in ("down", "role-down") else "")),
            legendgroup="cluster"))
    return traces


# -- anomalies --------------------------------------------------------------------------------

def anomaly_entries(index: anomalies.Index, categories: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict]]:
    """Per category, up to LIST_LIMIT anomalies with their table row and the ops where they show."""
    h = index.history
    out: dict[str, list[dict]] = {}
    for category, rows in categories.items():
        entries = []
        if category in anomalies.COUNTS_OFFSETS:
            rows = anomalies.distinct_offsets(rows)
        for number, anomaly in enumerate(rows[:LIST_LIMIT]):
            ops = index.operations(category, anomaly)[:OPS_PER_ANOMALY]
            row = {k: _clip_list(v) for k, v in index.row(anomaly).items()}
            entries.append({
                "anchor": f"{category}-{number}", "category": category,
                "label": _entry_label(category, row),
                "fields": [[anomalies.COLUMN_TITLES.get(k, k.replace("_", " ")), v] for k, v in row.items()
                           if v is not None],
                "ops": [{"index": h.index[i], "process": h.process[i], "f": h.f[i], "node": h.node[i],
                         "x": round(_op_time(h, i), 4), "type": h.type[i]} for i in ops]})
        # The list reads in time order; the anchors keep the checker's order (links use them).
        entries.sort(key=lambda e: min((op["x"] for op in e["ops"]), default=float("inf")))
        out[category] = entries
    return out


def invariant_entries(history: History, section: dict[str, Any] | None) -> list[dict]:
    """The anomalies of the `invariants` checker (the SUT's own reports of broken
    invariants): each at its time, in the lane of the operation closest to it."""
    found = (section or {}).get("anomalies") or []
    by_time = sorted((_op_time(history, i), i) for i in range(len(history))) if found else []
    entries = []
    for number, item in enumerate(found[:LIST_LIMIT]):
        at = item.get("time_s")
        ops = []
        if isinstance(at, (int, float)) and by_time:
            near = bisect.bisect_left(by_time, (at, -1))
            i = min(by_time[max(0, near - 1):near + 1], key=lambda t: abs(t[0] - at))[1]
            ops = [{"index": history.index[i], "process": history.process[i], "f": history.f[i],
                    "node": item.get("node"), "x": round(float(at), 4), "type": history.type[i]}]
        label = f"{item.get('kind')} on {item.get('node')}" + ("" if item.get("safety") else " (not safety)")
        fields = [[k.replace("_", " "), item.get(k)] for k in ("kind", "safety", "node", "process", "time_s",
                                                                "file", "line_number", "line", "source")
                  if item.get(k) is not None]
        entries.append({"anchor": f"{INVARIANT_CATEGORY}-{number}", "category": INVARIANT_CATEGORY,
                        "label": label, "fields": fields, "ops": ops})
    return entries


def _clip_list(value: Any) -> Any:
    if isinstance(value, list) and len(value) > VALUES_PER_FIELD:
        return value[:VALUES_PER_FIELD] + [f"… {len(value):,} in all (see the download)"]
    return value


def _op_time(history: History, i: int) -> float:
    """An operation's place on the time axis: its completion (an ack, a poll's answer), else its invocation."""
    done = history.complete_time[i]
    return (done if done is not None else history.invoke_time[i]) / NS


def _entry_label(category: str, row: dict[str, Any]) -> str:
    parts = []
    if row.get("id") is not None:
        parts.append(f"id {anomalies_text(row['id'])}")
    if row.get("queue") is not None:
        parts.append(f"queue {anomalies_text(row['queue'])}")
    if row.get("offset") is not None:
        parts.append(f"offset {row['offset']}")
    if category in anomalies.COUNTS_OFFSETS and isinstance(row.get("ids"), list):
        parts = parts[1:] + [f"ids {', '.join(map(anomalies_text, row['ids']))}"]
    if row.get("acked_at_s") is not None:
        parts.append(f"acked {row['acked_at_s']:.2f} s" + (f" by {row['acked_by']}" if row.get("acked_by") else ""))
    return " · ".join(parts) or category


def anomalies_text(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


def anomaly_lane(category: str) -> str:
    return f"{category.replace('_', ' ')} (anomalies)"


def anomaly_traces(entries: dict[str, list[dict]], on_cluster_axis: bool = False) -> list[dict[str, Any]]:
    """One SVG marker trace per category (clickable), a marker per op that shows an anomaly:
    in the op's process lane, or in a lane of its own above when the process lanes are aggregated."""
    traces = []
    for category, items in entries.items():
        x, y, custom, hover = [], [], [], []
        for item in items:
            for op in item["ops"]:
                x.append(op["x"])
                y.append(anomaly_lane(category) if on_cluster_axis else op["process"])
                custom.append([item["anchor"]])
                hover.append(hover_lines([(category.replace("_", " "), item["label"]),
                                          ("operation", f"#{op['index']} {op['f']} ({op['type']})"),
                                          ("node", op["node"])]))
        if not x:
            continue
        traces.append(dict(type="scatter", mode="markers", name=f"{category.replace('_', ' ')} ({len(items)})",
                           x=x, y=y, customdata=custom, hovertext=hover, hoverinfo="text",
                           meta={"anomaly": category}, yaxis=CLUSTER_AXIS if on_cluster_axis else "y",
                           marker=dict(symbol=ANOMALY_SYMBOLS.get(category, "x-open"), size=14,
                                       color=ANOMALY_COLOURS.get(category, "#000"),
                                       line=dict(width=2.5, color=ANOMALY_COLOURS.get(category, "#000")))))
    return traces


# -- the figure ------------------------------------------------------------------------------

def story_figure(history: History, windows: list[dict[str, Any]], states: list[dict[str, Any]],
                 entries: dict[str, list[dict]]) -> dict[str, Any]:
    """The process lanes of run_charts.timeline_figure, with the cluster lanes above
    them and the anomaly markers on them."""
    figure = run_charts.timeline_figure(history, windows)
    spans = cluster_spans(states, windows, history.end_s)
    lanes = list(dict.fromkeys(s.lane for s in spans))
    processes = sorted({p for p in history.process if isinstance(p, int)})
    cluster_px = CLUSTER_LANE_PX * len(lanes)
    process_px = max(240, PROCESS_LANE_PX * len(processes))
    total = cluster_px + process_px + 40 * bool(lanes)
    layout = figure["layout"]
    layout["height"] = total + 150
    split = process_px / total if lanes else 1.0
    layout["yaxis"].update(domain=[0, split], title=axis_title("process"), **integer_ticks(processes))
    if lanes:
        layout["yaxis2"] = dict(domain=[min(1.0, split + 40 / total), 1], type="category",
                                categoryorder="array", categoryarray=list(reversed(lanes)),
                                fixedrange=True, automargin=True, showgrid=False)
    layout["xaxis"]["anchor"] = "y"
    layout.update(barmode="overlay", uniformtext=dict(mode="hide", minsize=8),
                  legend=dict(orientation="h", y=-0.08, x=0))
    layout["meta"]["timeline"].update(box_limit=400, cluster_lanes=lanes)
    figure["data"] = span_traces(spans) + figure["data"] + [_box_trace()] + anomaly_traces(entries)
    return figure


def aggregate_figure(series: list[dict[str, Any]], windows: list[dict[str, Any]], states: list[dict[str, Any]],
                     entries: dict[str, list[dict]], end_s: float, ranges: list[dict[str, Any]]) -> dict[str, Any]:
    """The story of a run too big to draw op by op: the cluster lanes and one lane per
    anomaly category above the throughput per bucket (the perf checker's series,
    computed on Spark); each range page (`ranges`) is a shaded link target below."""
    from reports.charts import OUTCOME_COLOURS, fault_shading
    spans = cluster_spans(states, windows, end_s)
    lanes = list(dict.fromkeys(s.lane for s in spans)) + [anomaly_lane(c) for c, items in entries.items() if items]
    data: list[dict[str, Any]] = span_traces(spans)
    dashes = ("solid", "dash", "dot", "dashdot")
    names = sorted({str(s.get("f")) for s in series})
    for entry in series:
        outcome = str(entry.get("type"))
        data.append(dict(type="scatter", mode="lines", name=hover_text(f"{entry.get('f')} {outcome} per s"),
                         x=entry.get("t_s", []), y=entry.get("throughput", []), yaxis="y",
                         line=dict(color=OUTCOME_COLOURS.get(outcome, "#555"),
                                   dash=dashes[names.index(str(entry.get("f"))) % len(dashes)])))
    data += anomaly_traces(entries, on_cluster_axis=True)
    cluster_px, chart_px = CLUSTER_LANE_PX * len(lanes), 260
    total = cluster_px + chart_px + 40
    layout = base_layout("Operations per second (aggregated: zoom into a range page for every operation)",
                         height=total + 150, hovermode="closest", xaxis=dict(title="time since run start (s)"),
                         yaxis=dict(domain=[0, chart_px / total], title="operations / s", rangemode="tozero"),
                         **fault_shading(windows, end_s))
    layout["yaxis2"] = dict(domain=[(chart_px + 40) / total, 1], type="category", categoryorder="array",
                            categoryarray=list(reversed(lanes)), fixedrange=True, automargin=True)
    layout.update(barmode="overlay", uniformtext=dict(mode="hide", minsize=8), legend=dict(orientation="h", y=-0.15))
    layout["meta"] = {"timeline": {"aggregated": True, "cluster_lanes": lanes, "ranges": ranges}}
    return {"data": data, "layout": layout}


def entries_within(entries: dict[str, list[dict]], start_s: float, stop_s: float) -> dict[str, list[dict]]:
    """The anomalies with an operation in [start_s, stop_s]."""
    return {c: [e for e in items if any(start_s <= op["x"] <= stop_s for op in e["ops"])]
            for c, items in entries.items()}


def integer_ticks(processes: list[int]) -> dict[str, Any]:
    """Process lanes are integers: every lane labelled when they fit, else whole steps."""
    if not processes:
        return {"dtick": 1}
    if len(processes) <= 60:
        return {"tickmode": "array", "tickvals": processes, "ticktext": [str(p) for p in processes]}
    step = max(1, round(len(processes) / 30))
    return {"tickmode": "linear", "tick0": 0, "dtick": step, "tickformat": "d"}


def _box_trace() -> dict[str, Any]:
    """Readable operation boxes (type, values, node), filled by assets/report.js once
    the zoomed range holds few enough operations."""
    return dict(type="bar", orientation="h", name="operations (zoom in for boxes)", base=[], x=[], y=[], text=[],
                textposition="inside", insidetextanchor="start", width=0.7, hoverinfo="skip",
                textfont=dict(size=10, color="#000"), marker=dict(color=[], line=dict(color="#333", width=1)),
                meta={"boxes": True}, showlegend=False, cliponaxis=True)


# -- linearizability counterexample (Porcupine-style) ------------------------------------------

PREFIX_COLOUR, LATER_COLOUR, PENDING_COLOUR = "#009E73", "#BBBBBB", "#FFFFFF"


def prefix_roles(history: History, rows: list[int], failing: int) -> dict[int, str]:
    """Each op's part in the counterexample: the failing op; the linearized prefix (ok ops
    that completed before the failing op did: the checker placed them all); pending (invoked
    by then, not completed); later."""
    end = history.complete_time[failing]
    end = end if end is not None else float("inf")
    roles = {}
    for i in rows:
        done = history.complete_time[i]
        if i == failing:
            roles[i] = "could not be linearized"
        elif done is not None and done < end and history.type[i] == "ok":
            roles[i] = "linearizable prefix"
        elif history.invoke_time[i] < end:
            roles[i] = "pending"
        else:
            roles[i] = "later"
    return roles


def counterexample_figure(history: History, rows: list[int], failing: int,
                          previous_ok: int | None = None) -> dict[str, Any]:
    """The one counterexample figure: lanes per process of the key's ops around the
    failure, each bar coloured by its part (prefix_roles), the failing op hatched and
    labelled, and the last ok op before it labelled when the checker names it."""
    roles = prefix_roles(history, rows, failing)
    colours = {"linearizable prefix": PREFIX_COLOUR, "could not be linearized": run_charts.FAILING_COLOUR,
               "pending": PENDING_COLOUR, "later": LATER_COLOUR}
    end_s = history.end_s
    data = []
    for role, colour in colours.items():
        picked = [i for i in rows if roles[i] == role]
        if not picked:
            continue
        starts = [history.invoke_time[i] / NS for i in picked]
        stops = [(history.complete_time[i] / NS if history.complete_time[i] is not None else end_s) for i in picked]
        data.append(dict(
            type="bar", orientation="h", name=role, base=starts, x=[max(b - a, 1e-6) for a, b in zip(starts, stops)],
            y=[f"process {history.process[i]}" for i in picked], customdata=[[history.index[i]] for i in picked],
            text=[hover_text(f"{history.f[i]} {short_value(history.invoke_value[i])} → "
                             f"{short_value(history.value[i])}") for i in picked],
            textposition="inside", insidetextanchor="middle",
            textfont=dict(color="#fff" if role == "could not be linearized" else "#000"),
            hovertext=[run_charts.op_hover(history, i) for i in picked], hoverinfo="text",
            marker=dict(color=colour, line=dict(color="#000", width=3 if role == "could not be linearized" else 1),
                        pattern=dict(shape="x" if role == "could not be linearized" else "")),
            meta={"role": role}))
    annotations = [dict(x=history.invoke_time[i] / NS, y=f"process {history.process[i]}", text=label,
                        showarrow=True, arrowhead=2, ax=0, ay=-26, font=dict(color="#000", size=11), bgcolor="#fff")
                   for i, label in ((failing, "cannot be linearized"), (previous_ok, "previous ok"))
                   if i is not None and i in rows]
    lanes = sorted({history.process[i] for i in rows})
    layout = base_layout(None, barmode="overlay", height=max(220, 70 + 44 * len(lanes)),
                         margin=dict(l=90, r=20, t=30, b=50), legend=dict(orientation="h", y=-0.25),
                         xaxis=dict(title="time since run start (s)"), annotations=annotations,
                         yaxis=dict(categoryorder="array", categoryarray=[f"process {p}" for p in lanes],
                                    autorange="reversed"),
                         uniformtext=dict(mode="hide", minsize=8))
    return {"data": data, "layout": layout}
