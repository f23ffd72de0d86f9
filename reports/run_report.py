"""The run report: report/index.html, report/timeline.html and the anomaly downloads.

Each section is built from the files it needs; a missing or malformed file
turns into a one-line problem shown in that section, never a failed page.
"""
from __future__ import annotations

import csv
import datetime as _dt
import io
import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import markupsafe
import yaml

from reports import anomalies, run_charts, timeline, why
from reports.assets import install_assets, store_assets_folder
from reports.charts import figure_div, safe_json, window_label
from reports.history import (History, count_operations, history_chunks, key_texts, load_history,
                             select_operations)
from reports.load import StoredRun, is_campaign_dir, load_run, read_jsonl, read_table, section
from reports.render import relative_url, render_page, write_atomic

INLINE_ROWS = 25
# Above this many operations, pages draw aggregates and per-operation detail moves to
# range pages of at most this many operations each (a page never holds the whole history).
DETAIL_LIMIT = 20_000
KNOWN_CATEGORIES = ("lost", "duplicated", "unexpected", "recovered", "lost_after_consume",
                    "inconsistent_offsets", "poll_skip", "nonmonotonic_poll")
CHECKER_ORDER = ("stats", "queue", "order", "linearizable", "rto", "perf", "invariants")
COUNTEREXAMPLE_BEFORE, COUNTEREXAMPLE_AFTER = 12, 6
# A big run's counterexample draws its key's operations within this many indices of the failing one.
LIN_CONTEXT = 2_000
LOG_FILES_SHOWN = 200
# `chaos run` options that replay a run, in the order a person would write them.
REPLAY_OPTIONS = (("profile", "--profile"), ("rocketmq_version", "--rocketmq-version"), ("workload", "--workload"), ("faults", "--fault"),
                  ("time", "--time"), ("interval", "--interval"), ("recovery", "--recovery"),
                  ("rate", "--rate"), ("concurrency", "--concurrency"), ("seed", "--seed"),
                  ("nodes", "--nodes"), ("queues", "--queues"), ("keys", "--keys"), ("ordered", "--ordered"),
                  ("mix", "--mix"), ("op_timeout", "--op-timeout"), ("drain_timeout", "--drain-timeout"),
                  ("targets", "--target"), ("timing", "--timing"), ("bugs", "--bug"), ("inventory", "--inventory"))


@dataclass
class Section:
    """What a template section shows: its content and the problems of its inputs."""

    problems: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        try:
            return self.data[name]
        except KeyError:
            raise AttributeError(name) from None


def assets_folder(run_dir: Path) -> Path:
    """A run inside a campaign shares the store's assets (one plotly.min.js per store,
    store/assets/); a lone run outside a store has its own."""
    if run_dir.parent.name == "runs" and is_campaign_dir(run_dir.parent.parent):
        return store_assets_folder(run_dir.parent.parent)
    return run_dir / "report"


# -- verdicts and configuration ---------------------------------------------------------

def checker_reason(name: str, result: dict[str, Any]) -> str:
    """The one line that says why a checker is invalid or unknown."""
    if result.get("error"):
        return f"checker failed: {result['error']}"
    problems = [str(p) for p in result.get("problems") or []]
    if name == "queue":
        found = [f"{count} {category.replace('_', ' ')}" for category, count in anomaly_counts(result).items()
                 if count and category != "recovered"]
        if found:
            return ", ".join(found)
    if name == "rto" and result.get("not_recovered"):
        return f"fault window(s) {', '.join(map(str, result['not_recovered']))} never recovered"
    if name == "linearizable" and section(result, "counts").get("invalid"):
        return f"{result['counts']['invalid']} key(s) not linearizable" + (f": {problems[0]}" if problems else "")
    if problems:
        return problems[0] + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else "")
    return str(result.get("reason") or "")


def verdict_rows(facts: StoredRun) -> list[dict[str, Any]]:
    checkers = facts.checkers
    names = [n for n in CHECKER_ORDER if n in checkers] + sorted(n for n in checkers if n not in CHECKER_ORDER)
    rows = []
    for name in names:
        result = checkers[name] if isinstance(checkers[name], dict) else {"valid": "unknown",
                                                                             "error": "section is not an object"}
        valid = result.get("valid", "unknown")
        valid = valid if valid is True or valid is False else "unknown"  # 1 == True is no verdict
        skipped = result.get("checked") is False
        rows.append({"name": name, "valid": valid, "skipped": skipped,
                     "reason": "" if valid is True and not skipped else checker_reason(name, result)})
    return rows


def replay_command(facts: StoredRun) -> str | None:
    """The exact `chaos run` that replays this run (same seed, same schedules)."""
    spec = facts.spec
    if not spec:
        return None
    argv = ["chaos", "run"]
    for name, option in REPLAY_OPTIONS:
        value = spec.get(name)
        if value is None or value is False or value in ([], {}, ""):
            continue
        if value is True:
            argv.append(option)
        elif isinstance(value, list):
            for item in value:
                argv += [option, str(item)]
        elif isinstance(value, dict):
            argv += [option, ",".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in value.items())]
        else:
            argv += [option, f"{value:g}" if isinstance(value, float) else str(value)]
    return shlex.join(argv)


def config_items(facts: StoredRun) -> list[tuple[str, Any]]:
    items: list[tuple[str, Any]] = [("run", facts.run_id), ("campaign", facts.campaign_id)]
    for name in ("kind", "status", "error", "profile", "workload", "model", "faults", "seed", "source",
                 "started_at", "ops"):
        if facts.run.get(name) not in (None, "", []):
            items.append((name, facts.run[name]))
    for name, value in facts.spec.items():
        if name not in dict(items) and value not in (None, "", [], {}):
            items.append((name, value))
    timings = section(facts.run, "timings")
    if "total_s" in timings:
        items.append(("total time (s)", timings["total_s"]))
    inventory = section(facts.run, "inventory")
    if inventory:
        nodes = [f"{n.get('name')} {n.get('host')}" for n in inventory.get("nodes", []) if isinstance(n, dict)]
        items.append(("nodes", f"{inventory.get('kind')} {inventory.get('name')}: {', '.join(nodes)}"))
    if facts.results.get("checked_at"):
        items.append(("checked at", facts.results["checked_at"]))
    return items


# -- RTO ----------------------------------------------------------------------------------

def failover_note(window: dict[str, Any]) -> str:
    """Says plainly whether the window could have exercised a failover."""
    detection = run_charts.detection_seconds(window)
    length = run_charts.window_length(window)
    exercised = window.get("exercises_failover")
    if detection is None:
        return "failure-detection time unknown (results.json has no detection_s)"
    if exercised is False or (exercised is None and length is not None and length < detection):
        shown = f"{length:.2f} s" if length is not None else "the window"
        return (f"no failover exercised: the window lasted {shown}, shorter than the profile's "
                f"failure detection of {detection:.2f} s")
    return f"long enough to exercise a failover (detection after {detection:.2f} s)"


def rto_section(facts: StoredRun, lost_by_window: dict[Any, int] | None = None) -> Section:
    """The RTO windows; `lost_by_window` (window id -> acknowledged writes lost that were
    acknowledged in it) stands beside availability, which counts answers, not durability."""
    rto = facts.checker("rto")
    out = Section()
    if facts.results_problem:
        out.problems.append(facts.results_problem)
    windows = [w for w in rto.get("windows") or [] if isinstance(w, dict)]
    out.problems += [str(p) for p in rto.get("problems") or []]
    if rto.get("error"):
        out.problems.append(f"rto checker failed: {rto['error']}")
    lost_by_window = lost_by_window or {}
    rows = [dict(w, label=window_label(w), length_s=run_charts.window_length(w), note=failover_note(w),
                 lost=lost_by_window.get(w.get("id"), 0)) for w in windows]
    short = [r for r in rows if r["note"].startswith("no failover")]
    out.data = dict(windows=rows, figure=figure_div(run_charts.rto_figure(windows), "rto-chart") if windows else None,
                    short=short, failovers=rto.get("failovers"), max_unavailable_s=rto.get("max_unavailable_s"),
                    availability=section(rto, "availability"), threshold_s=rto.get("threshold_s"),
                    not_recovered=rto.get("not_recovered") or [])
    return out


# -- performance ------------------------------------------------------------------------------

def perf_section(facts: StoredRun, history: History | None, history_problem: str | None,
                 windows: list[dict[str, Any]], operations: int) -> Section:
    """`history` is the whole history up to DETAIL_LIMIT operations; above, the latency
    chart is the perf checker's per-bucket quantiles."""
    perf = facts.checker("perf")
    out = Section()
    series = [s for s in perf.get("series") or [] if isinstance(s, dict)]
    if operations > DETAIL_LIMIT:
        if series:
            out.data["latency"] = figure_div(run_charts.latency_quantiles_figure(series, windows), "latency-chart")
            out.data["aggregated"] = operations
        else:
            out.problems.append(f"{operations:,} operations are too many to draw one by one, and results.json "
                                "has no perf series to draw instead")
    elif history is not None and len(history):
        out.data["latency"] = figure_div(run_charts.latency_figure(history, windows), "latency-chart")
    elif history_problem:
        out.problems.append(history_problem)
    latency = [row for row in perf.get("latency") or [] if isinstance(row, dict)]
    if not perf:
        out.problems.append(facts.results_problem or "results.json has no perf section")
    if series:
        out.data["throughput"] = figure_div(run_charts.throughput_figure(series, windows), "throughput-chart")
    if latency:
        out.data["quantiles"] = figure_div(run_charts.quantiles_figure(latency), "quantiles-chart")
    out.data.update(latency_rows=latency, duration_s=perf.get("duration_s"), rate=perf.get("throughput"))
    return out


# -- queue accounting ---------------------------------------------------------------------------

def anomaly_categories(queue: dict[str, Any]) -> list[str]:
    """Every list of message rows the queue checker reports, known ones first."""
    found = [k for k, v in queue.items() if isinstance(v, list) and k != "problems"
             and all(isinstance(row, dict) for row in v)]
    return [c for c in KNOWN_CATEGORIES if c in found] + sorted(c for c in found if c not in KNOWN_CATEGORIES)


def anomaly_counts(queue: dict[str, Any]) -> dict[str, int]:
    """Each category's count: the checker's `counts`, else the length of its list."""
    counts = section(queue, "counts")
    found = {}
    for category in anomaly_categories(queue):
        count = counts.get(category)
        found[category] = count if isinstance(count, int) and not isinstance(count, bool) \
            else len(queue.get(category) or [])
    return found


def _csv(rows: list[dict[str, Any]]) -> str:
    columns = list(dict.fromkeys(name for row in rows for name in row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns or ["id"], extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: (json.dumps(v) if isinstance(v, (list, dict)) else v) for k, v in row.items()})
    return buffer.getvalue()


def full_anomaly_rows(run_dir: Path, queue: dict[str, Any]) -> tuple[dict[str, list[dict]], str | None]:
    """All rows per category from checked/queue.parquet (results.json keeps the first 1000)."""
    table, problem = read_table(run_dir / "checked" / "queue.parquet")
    if table is None:
        return {c: list(queue.get(c) or []) for c in anomaly_categories(queue)}, problem
    columns = list(table)
    rows = [dict(zip(columns, values)) for values in zip(*table.values())]
    by_category: dict[str, list[dict]] = {c: [] for c in anomaly_categories(queue)}
    for row in rows:
        by_category.setdefault(str(row.get("category")), []).append(row)
    return by_category, None


def count_items(counts: dict[str, Any]) -> list[tuple[str, Any]]:
    """The checker's counts, each name saying whether it counts messages or offsets."""
    items = []
    for name, value in counts.items():
        unit = "offsets" if name in anomalies.COUNTS_OFFSETS else ("messages" if name in KNOWN_CATEGORIES else "")
        items.append((f"{name.replace('_', ' ')} ({unit})" if unit else name.replace("_", " "), value))
    return items


def queue_section(facts: StoredRun, report_dir: Path, index: anomalies.Index | None = None) -> Section:
    queue = facts.checker("queue")
    out = Section()
    if not queue or queue.get("checked") is False:
        out.data["applies"] = False
        out.data["reason"] = not_applicable(queue.get("reason") if queue else
                                            (facts.results_problem or "no queue section"))
        return out
    out.problems += [str(p) for p in queue.get("problems") or []]
    full, problem = full_anomaly_rows(facts.path, queue)
    if problem and any(full.values()) and not problem.endswith("missing"):
        out.problems.append(problem)
    categories = []
    counts = anomaly_counts(queue)
    for category in sorted(full, key=lambda c: (KNOWN_CATEGORIES + (c,)).index(c)):
        rows = [index.row(r) for r in full[category]] if index is not None else full[category]
        downloads = {}
        if rows:
            downloads = {fmt: write_atomic(report_dir / "downloads" / f"queue-{category}.{fmt}", text).name
                         for fmt, text in (("csv", _csv(rows)), ("json", json.dumps(rows, default=str, indent=1)))}
        count = counts.get(category, len(rows))
        shown = rows[:INLINE_ROWS]
        categories.append(dict(name=category, count=count, rows_total=len(rows), rows=shown,
                               title=anomalies.category_title(category, count),
                               columns=anomalies.shown_columns(shown), titles=anomalies.COLUMN_TITLES,
                               downloads=downloads))
    out.data.update(applies=True, counts=count_items(section(queue, "counts")), categories=categories,
                    duplicates_allowed=queue.get("duplicates_allowed"))
    return out


def why_section(facts: StoredRun, index: anomalies.Index | None, windows: list[dict[str, Any]]) -> Section:
    """The "why" of an invalid run: its lost writes by window and acknowledging node, with
    the cluster state at their acknowledgements (reports/why.py), and its split brains."""
    out = Section()
    queue = facts.checker("queue")
    states, problems = read_jsonl(facts.path / "cluster.jsonl")
    out.problems += [p for p in problems if not p.endswith(": missing")]
    lost: dict[str, list[dict[str, Any]]] = {}
    if queue and queue.get("checked") is not False:
        full, _ = full_anomaly_rows(facts.path, queue)
        lost = {c: [index.row(r) for r in full.get(c) or []] if index is not None else list(full.get(c) or [])
                for c in why.LOST_CATEGORIES}
    found = why.findings(lost, windows, states)
    out.data.update(findings=found, summary=why.summary(found), split_brains=why.split_brains(states),
                    has_states=bool(states), list_limit=timeline.LIST_LIMIT)
    return out


def not_applicable(reason: Any) -> str:
    """A checker's reason without its own "not applicable:" (the page says it once)."""
    text = str(reason or "")
    prefix = "not applicable"
    if text.lower().startswith(prefix):
        text = text[len(prefix):].lstrip(" :-")
    return text


# -- linearizability counterexamples -----------------------------------------------------------

def _position_of(history: History, op: Any) -> int | None:
    if not isinstance(op, dict) or not isinstance(op.get("index"), int):
        return None
    try:
        return history.index.index(op["index"])
    except ValueError:
        return None


def counterexample_rows(history: History, key: Any, failing: int) -> list[int]:
    """The failing op, the ops of its key just before and after it, and every op concurrent with it."""
    rows = history.positions_of_key(key) or list(range(len(history)))
    at = rows.index(failing) if failing in rows else 0
    picked = set(rows[max(0, at - COUNTEREXAMPLE_BEFORE): at + COUNTEREXAMPLE_AFTER + 1])
    start = history.invoke_time[failing]
    stop = history.complete_time[failing] if history.complete_time[failing] is not None else float("inf")
    for i in rows:
        complete = history.complete_time[i] if history.complete_time[i] is not None else float("inf")
        if history.invoke_time[i] <= stop and complete >= start:
            picked.add(i)
    return sorted(picked)


def lin_section(facts: StoredRun, history: History | None, history_problem: str | None) -> Section:
    lin = facts.checker("linearizable")
    out = Section()
    if not lin or lin.get("checked") is False:
        out.data.update(applies=False, reason=not_applicable(lin.get("reason") if lin else
                                                             (facts.results_problem or "no section")))
        return out
    out.problems += [str(p) for p in lin.get("problems") or []]
    failures = []
    for number, failure in enumerate(f for f in lin.get("failures") or [] if isinstance(f, dict)):
        figure = None
        if history is not None:
            failing = _position_of(history, failure.get("op"))
            if failing is not None:
                rows = counterexample_rows(history, failure.get("key"), failing)
                fig = timeline.counterexample_figure(history, rows, failing,
                                                     _position_of(history, failure.get("previous-ok")))
                figure = figure_div(fig, f"counterexample-{number}")
        elif history_problem and history_problem not in out.problems:
            out.problems.append(history_problem)
        failures.append(dict(key=failure.get("key"), op=failure.get("op"), previous_ok=failure.get("previous-ok"),
                             configs=[c for c in failure.get("configs") or [] if isinstance(c, dict)],
                             figure=figure, model=failure.get("model") or lin.get("model")))
    out.data.update(applies=True, model=lin.get("model"), counts=section(lin, "counts"), failures=failures,
                    unknown=lin.get("unknown") or [])
    return out


# -- nemesis, logs, stats -------------------------------------------------------------------------

def unfired_triggers(run_dir: Path) -> list[str]:
    """A flag per state-triggered window of schedule.yaml whose trigger never fired."""
    try:
        data = yaml.safe_load((run_dir / "schedule.yaml").read_text())
    except (OSError, yaml.YAMLError):
        return []
    windows = data.get("windows") if isinstance(data, dict) else None
    return [f"trigger {w.get('trigger')} of {w.get('fault')} (armed at {w.get('start')} s) never fired: "
            f"the fault was not applied" for w in windows or [] if isinstance(w, dict) and w.get("fired_at") == "never"]


def nemesis_section(facts: StoredRun, windows: list[dict[str, Any]]) -> Section:
    out = Section()
    out.problems += unfired_triggers(facts.path)
    if windows:
        out.data["windows"] = [dict(w, label=window_label(w), length_s=run_charts.window_length(w),
                                    targets_text=targets_text(w.get("targets")),
                                    grudge_text=grudge_text(section(w, "details").get("grudge")
                                                            if isinstance(w.get("details"), dict)
                                                            else _grudge_of(w.get("details"))))
                               for w in windows]
        return out
    events, problems = read_jsonl(facts.path / "nemesis.jsonl")
    out.problems += [p for p in problems if not p.endswith(": missing")]
    out.data["events"] = [dict(time_s=e.get("time", 0) / 1e9 if isinstance(e.get("time"), int) else None,
                               fault=e.get("f"), phase=section(e, "value").get("phase"),
                               targets_text=targets_text(section(e, "value").get("targets")),
                               grudge_text=grudge_text(section(e, "value").get("grudge")))
                          for e in events]
    return out


def targets_text(targets: Any) -> str:
    """A fault's targets in words: `n1, n2`, or `none` (not the JSON list)."""
    if isinstance(targets, list):
        return ", ".join(map(str, targets)) or "none"
    return "–" if targets is None else str(targets)


def grudge_text(grudge: Any) -> str:
    """A partition's grudge in words, one clause per node that drops traffic:
    `n2 cannot reach n1, n3; n1 cannot reach n2`."""
    if not isinstance(grudge, dict) or not grudge:
        return "–"
    clauses = [f"{node} cannot reach {', '.join(map(str, blocked))}"
               for node, blocked in sorted(grudge.items()) if isinstance(blocked, list) and blocked]
    return "; ".join(clauses) or "no node cut off"


def _grudge_of(details: Any) -> Any:
    if isinstance(details, str):
        try:
            details = json.loads(details)
        except json.JSONDecodeError:
            return None
    return details.get("grudge") if isinstance(details, dict) else None


def node_logs(run_dir: Path, report_dir: Path) -> list[dict[str, Any]]:
    """Each node's collected files, linked relative to the report."""
    nodes = run_dir / "nodes"
    if not nodes.is_dir():
        return []
    found = []
    for node in sorted(p for p in nodes.iterdir() if p.is_dir()):
        files = sorted(p for p in node.rglob("*") if p.is_file() and not p.is_symlink())
        found.append(dict(node=node.name, total=len(files),
                          files=[dict(name=p.relative_to(node).as_posix(), href=relative_url(p, report_dir),
                                      size=p.stat().st_size) for p in files[:LOG_FILES_SHOWN]]))
    return found


def stats_section(facts: StoredRun) -> Section:
    stats = facts.checker("stats")
    out = Section()
    malformed = section(stats, "malformed")
    out.data.update(operations=stats.get("operations"), by_outcome=section(stats, "by_outcome"),
                    by_f=section(stats, "by_f"), malformed=malformed.get("count", 0),
                    malformed_examples=[m for m in malformed.get("examples") or [] if isinstance(m, dict)])
    out.problems += [str(p) for p in stats.get("problems") or []]
    return out


# -- the pages ------------------------------------------------------------------------------------

def _windows(facts: StoredRun) -> list[dict[str, Any]]:
    return [w for w in facts.checker("rto").get("windows") or [] if isinstance(w, dict)]


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _nav(report_dir: Path, run_dir: Path, current: str) -> list[dict[str, Any]]:
    nav = []
    campaign = run_dir.parent.parent
    if run_dir.parent.name == "runs" and is_campaign_dir(campaign):
        # The campaign writes its pages after its runs' reports: link them by where they will be.
        nav += [dict(label="campaign", href=relative_url(campaign / "index.html", report_dir), current=False),
                dict(label="DLedger vs Controller", href=relative_url(campaign / "compare.html", report_dir),
                     current=False)]
    nav += [dict(label="report", href="index.html", current=current == "report"),
            dict(label="timeline", href="timeline.html", current=current == "timeline")]
    if (run_dir / "shrink" / "index.html").is_file():
        nav.append(dict(label="reproducer", href="../shrink/index.html", current=False))
    return nav


def anomaly_groups(facts: StoredRun, index: anomalies.Index) -> tuple[dict[str, list[dict]], list[dict[str, Any]]]:
    """The queue anomalies placed on the history (timeline.anomaly_entries) and their list's groups."""
    queue = facts.checker("queue")
    categories = {}
    if queue and queue.get("checked") is not False:
        full, _ = full_anomaly_rows(facts.path, queue)
        categories = {c: rows for c, rows in full.items() if rows and c != "recovered"}
    entries = timeline.anomaly_entries(index, categories)
    counts = anomaly_counts(queue) if categories else {}
    breaches = timeline.invariant_entries(index.history, facts.checker("invariants"))
    if breaches:
        entries[timeline.INVARIANT_CATEGORY] = breaches
        counts[timeline.INVARIANT_CATEGORY] = sum((facts.checker("invariants").get("counts") or {}).values())
    groups = [dict(category=c, entries=items, shown=len(items), count=counts.get(c, len(items)),
                   title=anomalies.category_title(c, counts.get(c, len(items))),
                   where=anomalies.WHERE.get(c, "at the operations that show it"))
              for c, items in entries.items()]
    return entries, groups


def _anomaly_json(entries: dict[str, list[dict]]) -> markupsafe.Markup:
    data = {item["anchor"]: item for items in entries.values() for item in items}
    return markupsafe.Markup(safe_json(json.dumps(data, default=str)))


def render_timeline(view: HistoryView, windows: list[dict[str, Any]], index: anomalies.Index | None,
                    report_dir: Path, assets_dir: Path, **page: Any) -> Path:
    """timeline.html; above DETAIL_LIMIT operations an aggregated page plus one detail page
    per range of at most DETAIL_LIMIT operations (timeline/range-<n>.html), loaded when opened."""
    facts: StoredRun = page["facts"]
    dest = report_dir / "timeline.html"
    states, problems = read_jsonl(facts.path / "cluster.jsonl")
    page["cluster_problems"] = [p for p in problems if not p.endswith(": missing")]
    history = view.history
    if not view.operations or history is None or index is None:
        return render_page("timeline.html.j2", dest, assets_dir, timeline=None, operations=0, processes=0, **page)
    entries, groups = anomaly_groups(facts, index)
    page.update(counterexamples=counterexamples(facts, history), operations=view.operations)
    if not view.aggregated:
        figure = timeline.story_figure(history, windows, states, entries)
        return render_page("timeline.html.j2", dest, assets_dir, timeline=figure_div(figure, "timeline"),
                           cluster_lanes=figure["layout"]["meta"]["timeline"]["cluster_lanes"],
                           processes=len(set(history.process)), anomaly_groups=groups,
                           anomaly_json=_anomaly_json(entries), **page)
    ranges, processes, end_s = [], set(), 0.0
    for number, part in enumerate(view.chunks()):
        ranges.append(_render_range(number, part, windows, states, entries, groups, report_dir, assets_dir, page))
        processes.update(part.process)
        end_s = max(end_s, part.end_s)
    for items in entries.values():
        for item in items:
            item["detail_href"] = next((f"{r['href']}#anomaly-{item['anchor']}" for r in ranges
                                        if any(r["start_s"] <= op["x"] <= r["stop_s"] + 0.01 for op in item["ops"])),
                                       None)
    series = [s for s in facts.checker("perf").get("series") or [] if isinstance(s, dict)]
    figure = timeline.aggregate_figure(series, windows, states, entries, end_s, ranges)
    return render_page("timeline.html.j2", dest, assets_dir, timeline=figure_div(figure, "timeline"),
                       cluster_lanes=figure["layout"]["meta"]["timeline"]["cluster_lanes"], ranges=ranges,
                       processes=len(processes), anomaly_groups=groups, anomaly_json=_anomaly_json(entries), **page)


def _render_range(number: int, part: History, windows: list[dict[str, Any]], states: list[dict[str, Any]],
                  entries: dict[str, list[dict]], groups: list[dict[str, Any]], report_dir: Path, assets_dir: Path,
                  page: dict[str, Any]) -> dict[str, Any]:
    """One range page (every operation of `part`, the cluster lanes and the anomalies inside
    it); returns its row of the ranges table."""
    start_s, stop_s = min(part.invoke_time) / 1e9, part.end_s
    href = f"timeline/range-{number}.html"
    inside = timeline.entries_within(entries, start_s, stop_s)
    figure = timeline.story_figure(part, windows, states, inside)
    figure["layout"]["xaxis"].update(range=[start_s, stop_s], autorange=False)
    nav = [dict(label="report", href="../index.html", current=False),
           dict(label="timeline", href="../timeline.html", current=False)]
    render_page("timeline.html.j2", report_dir / href, assets_dir,
                **{**page, "nav": nav, "operations": len(part), "processes": len(set(part.process)),
                   "counterexamples": []},
                timeline=figure_div(figure, "timeline"), range_of=(start_s, stop_s),
                cluster_lanes=figure["layout"]["meta"]["timeline"]["cluster_lanes"],
                anomaly_groups=[dict(g, entries=inside[g["category"]], shown=len(inside[g["category"]]))
                                for g in groups if inside[g["category"]]],
                anomaly_json=_anomaly_json(inside))
    return dict(href=href, start_s=round(start_s, 2), stop_s=round(stop_s, 2), operations=len(part),
                anomalies=sum(len(v) for v in inside.values()),
                windows=[window_label(w) for w in windows if _overlaps(w, start_s, stop_s)])


def _overlaps(window: dict[str, Any], start_s: float, stop_s: float) -> bool:
    begin, end = window.get("start_s"), window.get("stop_s")
    if not isinstance(begin, (int, float)):
        return False
    return begin <= stop_s and (end if isinstance(end, (int, float)) else float("inf")) >= start_s


def counterexamples(facts: StoredRun, history: History) -> list[dict[str, Any]]:
    """Per non-linearizable key: the Porcupine-style lanes and the states the model could be in."""
    out = []
    for number, failure in enumerate(f for f in facts.checker("linearizable").get("failures") or []
                                     if isinstance(f, dict)):
        failing = _position_of(history, failure.get("op"))
        if failing is None:
            continue
        rows = counterexample_rows(history, failure.get("key"), failing)
        out.append(dict(key=failure.get("key"),
                        failing_text=f"#{history.index[failing]} process {history.process[failing]} "
                                     f"{history.f[failing]} {history.invoke_value[failing]} → {history.value[failing]}",
                        figure=figure_div(timeline.counterexample_figure(history, rows, failing),
                                          f"porcupine-{number}"),
                        states=[c for c in failure.get("configs") or [] if isinstance(c, dict)]))
    return out


@dataclass
class HistoryView:
    """What the pages read of the history. Up to DETAIL_LIMIT operations, `history` is all
    of it. Above, no page holds every operation and neither does memory: `history` holds
    only the operations that the anomalies and counterexamples name (picked in one streamed
    pass), and `chunks()` streams the whole history DETAIL_LIMIT operations at a time."""

    run_dir: Path
    operations: int
    history: History | None
    problem: str | None = None

    @property
    def aggregated(self) -> bool:
        return self.operations > DETAIL_LIMIT

    def chunks(self):
        return history_chunks(self.run_dir, DETAIL_LIMIT)


def history_view(facts: StoredRun) -> HistoryView:
    run_dir = facts.path
    operations, problem = count_operations(run_dir)
    if operations is None or operations <= DETAIL_LIMIT:
        history, problem = load_history(run_dir)
        return HistoryView(run_dir, len(history) if history is not None else 0, history, problem)
    view = HistoryView(run_dir, operations, None)
    view.history = select_operations(view.chunks(), _named_operations(facts))
    return view


WANTED_PER_CATEGORY = 10_000  # anomalies per category joined with a big run's history


def _named_operations(facts: StoredRun):
    """Picks the operations an anomaly (its first WANTED_PER_CATEGORY per category) or a
    linearizability failure (its key's operations within LIN_CONTEXT indices) needs."""
    queue = facts.checker("queue")
    rows: list[dict[str, Any]] = []
    if queue and queue.get("checked") is not False:
        full, _ = full_anomaly_rows(facts.path, queue)
        rows = [row for category_rows in full.values() for row in category_rows[:WANTED_PER_CATEGORY]]
    wanted = anomalies.Wanted.of(rows)
    around: list[tuple[set[str], int]] = []
    for failure in facts.checker("linearizable").get("failures") or []:
        op = failure.get("op") if isinstance(failure, dict) else None
        if isinstance(op, dict) and isinstance(op.get("index"), int):
            around.append((key_texts(failure.get("key")), op["index"]))

    def keep(chunk: History, i: int) -> bool:
        if any(chunk.key[i] in keys and abs(chunk.index[i] - at) <= LIN_CONTEXT for keys, at in around):
            return True
        return bool(wanted) and wanted.shows(chunk, i)
    return keep


def render_run_report(run_dir: Path) -> Path:
    """Write report/index.html and report/timeline.html for one run; returns index.html."""
    facts = load_run(run_dir)
    report_dir = run_dir / "report"
    assets_dir = install_assets(assets_folder(run_dir))
    view = history_view(facts)
    history, history_problem = view.history, view.problem
    windows = _windows(facts)
    found = anomalies.Index.build(history) if history is not None else None
    common = dict(facts=facts, generated_at=_now(), source=str(run_dir))
    reasons = why_section(facts, found, windows)
    page = render_page(
        "run.html.j2", report_dir / "index.html", assets_dir, nav=_nav(report_dir, run_dir, "report"),
        verdicts=verdict_rows(facts), config=config_items(facts), replay=replay_command(facts),
        why=reasons,
        rto=rto_section(facts, why.lost_by_window(reasons.data["findings"])), perf=perf_section(facts, history, history_problem, windows, view.operations),
        queue=queue_section(facts, report_dir, found), lin=lin_section(facts, history, history_problem),
        nemesis=nemesis_section(facts, windows), logs=node_logs(run_dir, report_dir), stats=stats_section(facts),
        **common)
    render_timeline(view, windows, found, report_dir, assets_dir,
                    nav=_nav(report_dir, run_dir, "timeline"), history_problem=history_problem, **common)
    return page
