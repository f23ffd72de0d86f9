"""Campaign pages: index.html (the matrix and its gates), compare.html (DLedger vs
Controller with confidence intervals and significance) and the store's trend.html.

Everything here reads the store: campaign.json (the plan, the profiles' facts,
the gate results, written by the harness) and each run's run.json and
results.json. The same store always renders the same pages (bootstrap seeds
are fixed), so a resumed campaign's pages equal an uninterrupted one's.
"""
from __future__ import annotations

import datetime as _dt
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from records import CampaignJson
from reports import why
from reports.assets import install_assets, store_assets_folder
from reports.charts import base_layout, figure_div, fault_colours
from reports.load import campaign_dirs, load_run, read_store_file, section
from reports.render import relative_url, render_page
from reports.stats import Comparison, compare, median_ci, min_samples, quantile

COMPARED_MODES = ("dledger", "controller")


# -- what the pages show, read from the store -------------------------------------------

@dataclass
class RunRow:
    """One run of a campaign, as the matrix and the statistics need it."""

    run_id: str
    profile: str
    workload: str
    fault: str
    repeat: int
    seed: int | None
    status: str                     # complete | error | interrupted | pending
    valid: Any                      # True | False | "unknown" | None
    error: str | None = None
    lost: int | None = None
    duplicated: int | None = None
    lost_examples: list[Any] = field(default_factory=list)
    rto: list[float] = field(default_factory=list)          # unavailable_s of every fault window
    availability: float | None = None                       # share of ok writes during faults
    throughput: float | None = None
    latency_p50_ms: float | None = None
    latency_p99_ms: float | None = None
    failovers: int | None = None
    report: str | None = None       # the run's report, relative to the campaign folder
    reproducer: str | None = None   # its `chaos shrink` page, if it was shrunk
    anomalies: list[dict[str, Any]] = field(default_factory=list)   # {checker, anomaly, count} of invalid checkers
    bugs: list[str] = field(default_factory=list)           # library bugs switched on (sut/bugs.py)

    @property
    def outcome(self) -> Any:
        """The verdict a cell merges: the checkers' verdict, or the run's status."""
        return self.valid if self.status == "complete" else self.status


@dataclass
class Cell:
    profile: str
    workload: str
    fault: str
    runs: list[RunRow]

    @property
    def verdict(self) -> Any:
        """false > error > unknown > true across the repeats (None: nothing ran yet)."""
        outcomes = [r.outcome for r in self.runs if r.status != "pending"]
        if not outcomes:
            return None
        if any(o is False for o in outcomes):
            return False
        for status in ("error", "interrupted"):
            if any(o == status for o in outcomes if isinstance(o, str)):
                return status
        return True if all(o is True for o in outcomes) else "unknown"

    @property
    def lost(self) -> int | None:
        counts = [r.lost for r in self.runs if r.lost is not None]
        return sum(counts) if counts else None

    @property
    def rto(self) -> list[float]:
        return [v for r in self.runs for v in r.rto]

    @property
    def anomalies(self) -> list[str]:
        """Every invalid checker's anomaly of the repeats, `r2 queue: 17 inconsistent offsets`-style."""
        return [f"r{r.repeat} {anomaly_text(a)}" for r in self.runs for a in r.anomalies]

    @property
    def failovers(self) -> int | None:
        counts = [r.failovers for r in self.runs if r.failovers is not None]
        return sum(counts) if counts else None

    def rto_quantile(self, q: float) -> float | None:
        return quantile(self.rto, q)


@dataclass
class CampaignView:
    path: Path
    meta: dict[str, Any]
    runs: list[RunRow]
    problems: list[str]

    @property
    def name(self) -> str:
        return str(self.meta.get("name") or self.path.name)

    @property
    def profiles(self) -> dict[str, dict[str, Any]]:
        return self.meta.get("profiles") or {}

    def axis(self, key: str) -> list[str]:
        return list(dict.fromkeys(getattr(r, key) for r in self.runs))

    def cells(self) -> list[Cell]:
        grouped: dict[tuple[str, str, str], list[RunRow]] = {}
        for run in self.runs:
            grouped.setdefault((run.profile, run.workload, run.fault), []).append(run)
        return [Cell(p, w, f, runs) for (p, w, f), runs in grouped.items()]

    def cell(self, profile: str, workload: str, fault: str) -> Cell | None:
        return next((c for c in self.cells() if (c.profile, c.workload, c.fault) == (profile, workload, fault)), None)

    @property
    def gates(self) -> list[dict[str, Any]]:
        return [g for g in self.meta.get("gates") or [] if isinstance(g, dict)]


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _count(value: Any) -> int | None:
    if isinstance(value, list):
        return len(value)
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _main_latency(perf: dict[str, Any]) -> dict[str, Any]:
    """The latency row of the busiest write-like operation that succeeded."""
    rows = [r for r in perf.get("latency") or [] if isinstance(r, dict) and r.get("type") == "ok"]
    writes = [r for r in rows if r.get("f") in ("send", "append", "write", "cas")] or rows
    return max(writes, key=lambda r: r.get("count") or 0, default={})


def run_row(campaign_dir: Path, planned: dict[str, Any], done: dict[str, Any] | None = None) -> RunRow:
    """A planned run with what its run.json and results.json say; without a run
    directory, what campaign.json's `done` says (an error before the run began) or pending."""
    path = campaign_dir / "runs" / str(planned.get("run_id"))
    row = RunRow(str(planned.get("run_id")), str(planned.get("profile")), str(planned.get("workload")),
                 str(planned.get("fault")), int(planned.get("repeat") or 1), planned.get("seed"),
                 status="pending", valid=None)
    if not path.is_dir():
        if (done or {}).get("status") == "error":
            row.status, row.error = "error", done.get("error")
        return row
    facts = load_run(path)
    row.status = str(facts.run.get("status") or ("complete" if facts.results else "pending"))
    row.error = facts.run.get("error") or facts.run_problem
    row.valid = facts.valid if row.status == "complete" else None
    queue, rto, perf = facts.checker("queue"), facts.checker("rto"), facts.checker("perf")
    counts = section(queue, "counts")
    row.lost, row.duplicated = acknowledged_not_in_log(counts), _count(counts.get("duplicated"))
    row.anomalies = run_anomalies(facts.checkers)
    row.bugs = [str(b) for b in facts.get("bugs") or []]
    windows = [w for w in rto.get("windows") or [] if isinstance(w, dict)]
    row.lost_examples = [lost_example(m, windows) for m in list(queue.get("lost") or [])[:20]]
    row.rto = [v for w in rto.get("windows") or [] if isinstance(w, dict)
               for v in [_number(w.get("unavailable_s"))] if v is not None]
    row.availability = _number(section(rto, "availability", "in_faults").get("availability"))
    row.failovers = _count(rto.get("failovers"))
    row.throughput = _number(perf.get("throughput"))
    latency = _main_latency(perf)
    row.latency_p50_ms, row.latency_p99_ms = _number(latency.get("p50_ms")), _number(latency.get("p99_ms"))
    if facts.report.is_file():
        row.report = relative_url(facts.report, campaign_dir)
    reproducer = facts.report.parent.parent / "shrink" / "index.html"
    if reproducer.is_file():
        row.reproducer = relative_url(reproducer, campaign_dir)
    return row


def lost_example(message: Any, windows: list[dict[str, Any]]) -> dict[str, Any]:
    """One lost message of the queue checker as table columns: its id, queue, how often it
    was sent and with what outcome, when first sent (s), and the fault window it was sent in."""
    if not isinstance(message, dict):
        return {"id": message}
    sent = _number(message.get("first_send_s"))
    window = why.window_of(sent, windows)
    return {"id": message.get("id"), "queue": message.get("key"), "sends": message.get("sends"),
            "outcome": message.get("send_outcome"), "sent_at_s": sent, "consumed": message.get("consumed"),
            "window": f"#{window.get('id')} {window.get('fault')}" if window else
            ("outside the fault windows" if sent is not None else None)}


def acknowledged_not_in_log(counts: dict[str, Any]) -> int | None:
    """Acknowledged messages missing from the final log, consumed before or not: `lost`
    plus the acknowledged part of `lost_after_consume` (all of it in stores older than
    that count)."""
    lost = _count(counts.get("lost"))
    after = _count(counts.get("lost_after_consume_acknowledged", counts.get("lost_after_consume")))
    if lost is None and after is None:
        return None
    return (lost or 0) + (after or 0)


COUNTED_PROBLEM = re.compile(r"^(\d+) (.+)$")


def run_anomalies(checkers: dict[str, Any]) -> list[dict[str, Any]]:
    """What each invalid checker of a run found, with a count: the queue checker's
    `17 queue offset(s) seen holding two different messages` lines as they are, the
    others (linearizability, order, RTO) as their first problem and how many."""
    found = []
    for name, sec in sorted(checkers.items()):
        if not isinstance(sec, dict) or sec.get("valid") is not False:
            continue
        problems = [str(p) for p in sec.get("problems") or []]
        counted = [m for m in map(COUNTED_PROBLEM.match, problems) if m]
        if counted:
            found += [{"checker": name, "anomaly": m[2], "count": int(m[1]),
                       "text": f"{name}: {m[0]}"} for m in counted]
            continue
        count = (_count(section(sec, "counts").get("invalid")) or _count(sec.get("violations"))
                 or len(problems) or 1)
        anomaly = problems[0] if problems else f"{name} checker invalid"
        found.append({"checker": name, "anomaly": anomaly, "count": count, "text": f"{name}: {anomaly} (x{count})"})
    return found


def anomaly_text(anomaly: dict[str, Any]) -> str:
    return str(anomaly.get("text") or f"{anomaly.get('checker')}: {anomaly.get('anomaly')}")


def load_campaign_view(campaign_dir: Path) -> CampaignView:
    campaign_dir = Path(campaign_dir)
    meta, problem = read_store_file(CampaignJson, campaign_dir / "campaign.json")
    problems = [problem] if problem else []
    meta = meta if isinstance(meta, dict) else {}
    planned = [p for p in meta.get("plan") or [] if isinstance(p, dict)]
    if not planned:  # an ad-hoc `chaos run` campaign: its runs, each its own cell
        planned = [{"run_id": p.name, **_planned_from_run(p)} for p in sorted((campaign_dir / "runs").glob("*"))
                   if p.is_dir()]
    done = meta.get("done") if isinstance(meta.get("done"), dict) else {}
    return CampaignView(campaign_dir, meta, [run_row(campaign_dir, p, done.get(p.get("run_id"))) for p in planned],
                        problems)


def _planned_from_run(path: Path) -> dict[str, Any]:
    facts = load_run(path)
    return {"profile": facts.get("profile", "?"), "workload": facts.get("workload", "?"),
            "fault": "+".join(facts.get("faults") or []) or "?", "repeat": 1, "seed": facts.get("seed")}


# -- index.html -----------------------------------------------------------------------------

def _nav(page: str, trend_href: str | None) -> list[dict[str, Any]]:
    items = [("index.html", "matrix"), ("compare.html", "DLedger vs Controller")]
    nav = [{"href": href, "label": label, "current": href == page} for href, label in items]
    if trend_href:
        nav.append({"href": trend_href, "label": "trend", "current": False})
    return nav


def _generated_at() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def render_campaign(campaign_dir: Path) -> Path:
    """Write index.html and compare.html of a campaign; returns index.html."""
    campaign_dir = Path(campaign_dir)
    view = load_campaign_view(campaign_dir)
    assets = install_assets(store_assets_folder(campaign_dir))
    trend = campaign_dir.parent / "trend.html"
    trend_href = "../trend.html" if trend.is_file() or view.meta.get("kind") == "campaign" else None
    common = dict(view=view, generated_at=_generated_at(), source=str(campaign_dir))
    index = render_page("campaign.html.j2", campaign_dir / "index.html", assets,
                        nav=_nav("index.html", trend_href), **common)
    render_page("compare.html.j2", campaign_dir / "compare.html", assets,
                nav=_nav("compare.html", trend_href), comparison=comparison(view), **common)
    return index


# -- compare.html ---------------------------------------------------------------------------

@dataclass
class Group:
    """The runs of one expected-safe profile of a compared mode, on one workload x fault."""

    profile: str
    mode: str
    runs: list[RunRow]

    def values(self, name: str) -> list[float]:
        if name == "rto":
            return [v for r in self.runs for v in r.rto]
        return [v for r in self.runs for v in [getattr(r, name)] if v is not None]

    def estimate(self, name: str, seed: int) -> dict[str, Any]:
        return median_ci(self.values(name), seed=seed).as_json()

    def total(self, name: str) -> int | None:
        counts = self.values(name)
        return int(sum(counts)) if counts else None


def compared_profiles(view: CampaignView) -> list[tuple[str, str]]:
    """(profile, mode) of the expected-safe profiles of DLedger and Controller mode, in
    campaign order; unsafe profiles are there to be caught, not measured."""
    found = []
    for profile in view.axis("profile"):
        facts = view.profiles.get(profile) or {}
        if facts.get("mode") in COMPARED_MODES and facts.get("expected_safe", True):
            found.append((profile, facts["mode"]))
    return found


def comparison(view: CampaignView) -> dict[str, Any]:
    """Per workload x fault: the groups' estimates, charts and significance tests."""
    groups_of = compared_profiles(view)
    modes = {mode for _, mode in groups_of}
    sections = []
    for workload in view.axis("workload"):
        for index, fault in enumerate(view.axis("fault")):
            groups = [Group(p, m, [r for r in view.runs if (r.profile, r.workload, r.fault) == (p, workload, fault)
                                   and r.status == "complete"]) for p, m in groups_of]
            groups = [g for g in groups if g.runs]
            if not groups:
                continue
            sections.append(_fault_section(workload, fault, groups, seed=index))
    overall = {p: median_ci([v for r in view.runs if r.profile == p and r.status == "complete" for v in r.rto]).median
               for p, _ in groups_of}
    return {"modes": sorted(modes), "profiles": groups_of, "sections": sections, "overall": overall,
            "missing": [m for m in COMPARED_MODES if m not in modes],
            "reference": view.meta.get("reference")}


def _fault_section(workload: str, fault: str, groups: list[Group], seed: int) -> dict[str, Any]:
    slug = f"{workload}-{fault}".replace("+", "-")
    rows = [{"profile": g.profile, "mode": g.mode, "runs": len(g.runs), "windows": len(g.values("rto")),
             "rto": g.estimate("rto", seed), "rto_p99": quantile(g.values("rto"), 0.99),
             "availability": g.estimate("availability", seed), "throughput": g.estimate("throughput", seed),
             "latency_p99": g.estimate("latency_p99_ms", seed), "lost": g.total("lost"),
             "duplicated": g.total("duplicated"), "failovers": g.total("failovers")} for g in groups]
    tests = []
    dledger = [g for g in groups if g.mode == "dledger"]
    controller = [g for g in groups if g.mode == "controller"]
    for a in dledger:
        for b in controller:
            result = compare(a.values("rto"), b.values("rto"), (a.profile, b.profile))
            tests.append({"a": a.profile, "b": b.profile, "u": result.u, "p": result.p_value,
                          "n_a": len(a.values("rto")), "n_b": len(b.values("rto")), "tested": result.tested,
                          "significant": result.significant, "faster": result.faster, "note": result.note,
                          "conclusion": conclusion(a, b, fault, result)})
    return {"workload": workload, "fault": fault, "rows": rows, "tests": tests,
            "rto_chart": figure_div(_rto_box(groups, fault), f"rto-{slug}"),
            "window_chart": figure_div(_window_scatter(groups, fault), f"windows-{slug}")}


def conclusion(a: Group, b: Group, fault: str, result: Comparison) -> str:
    """The comparison in one sentence, saying no more than its samples allow."""
    n_a, n_b = len(a.values("rto")), len(b.values("rto"))
    if not result.tested:
        return (f"Too few samples for a conclusion: {n_a} vs {n_b} {fault} windows; "
                f"at least {min_samples()} per mode are needed.")
    if not result.significant:
        return (f"The samples show no difference in RTO under {fault} between {a.profile} and {b.profile} "
                f"(n = {n_a} vs {n_b}, p = {result.p_value:.3g}); a smaller difference than these samples resolve "
                f"may still exist." if result.p_value is not None else
                f"{a.profile} and {b.profile} had identical RTO under {fault} (n = {n_a} vs {n_b}).")
    slower = b.profile if result.faster == a.profile else a.profile
    medians = {g.profile: median_ci(g.values("rto")).median for g in (a, b)}
    return (f"{result.faster} recovers faster than {slower} under {fault}: median RTO "
            f"{medians[result.faster]:.2f} s vs {medians[slower]:.2f} s (n = {n_a} vs {n_b}, p = {result.p_value:.3g}).")


def _n_text(groups: list[Group]) -> str:
    return ", ".join(f"{g.profile} n = {len(g.values('rto'))}" for g in groups)


def _rto_box(groups: list[Group], fault: str) -> go.Figure:
    colours = fault_colours(g.profile for g in groups)
    fig = go.Figure()
    for g in groups:
        fig.add_trace(go.Box(y=g.values("rto"), name=g.profile, boxpoints="all", jitter=0.4,
                             marker_color=colours[g.profile], boxmean=True))
    fig.update_layout(**base_layout(f"RTO per fault window: {fault} ({_n_text(groups)})", yaxis_title="unavailable (s)",
                                    showlegend=False))
    return fig


def _window_scatter(groups: list[Group], fault: str) -> go.Figure:
    colours = fault_colours(g.profile for g in groups)
    fig = go.Figure()
    for g in groups:
        xs, ys = [], []
        for run in g.runs:
            for number, value in enumerate(run.rto):
                xs.append(f"r{run.repeat} #{number}")
                ys.append(value)
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers", name=g.profile,
                                 marker=dict(color=colours[g.profile], size=9)))
    fig.update_layout(**base_layout(f"Unavailability per window: {fault} ({_n_text(groups)})",
                                    yaxis_title="unavailable (s)",
                                    xaxis_title="repeat #window"))
    return fig


# -- trend.html -----------------------------------------------------------------------------

def trend_rows(store_root: Path) -> dict[str, list[dict[str, Any]]]:
    """Per campaign name, one row per campaign (oldest first) with each profile's
    verdict and RTO p50/p99, and a regression flag per profile."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for path in reversed(campaign_dirs(store_root)):
        meta, _ = read_store_file(CampaignJson, path / "campaign.json")
        if not isinstance(meta, dict) or meta.get("kind") != "campaign":
            continue
        view = load_campaign_view(path)
        profiles = {}
        for profile in view.axis("profile"):
            runs = [r for r in view.runs if r.profile == profile and r.status != "pending"]
            merged = Cell(profile, "*", "*", runs)
            profiles[profile] = {"verdict": merged.verdict, "p50": merged.rto_quantile(0.5),
                                 "p99": merged.rto_quantile(0.99), "lost": merged.lost}
        gates = view.gates
        by_name.setdefault(view.name, []).append({
            "campaign": path.name, "href": f"{path.name}/index.html", "started_at": meta.get("started_at"),
            "status": meta.get("status"), "gates_passed": all(g.get("ok") for g in gates) if gates else None,
            "profiles": profiles, "trend": meta.get("trend") or {}})
    for rows in by_name.values():
        flag_regressions(rows)
    return by_name


def flag_regressions(rows: list[dict[str, Any]]) -> None:
    """Mark a profile's RTO p99 that is worse than `factor` x the median p99 of the
    previous `nights` campaigns of the same name (each row's own settings)."""
    for index, row in enumerate(rows):
        factor = float(row["trend"].get("regression_factor") or 1.5)
        nights = int(row["trend"].get("nights") or 7)
        for profile, entry in row["profiles"].items():
            earlier = [r["profiles"][profile]["p99"] for r in rows[max(0, index - nights):index]
                       if profile in r["profiles"] and r["profiles"][profile]["p99"] is not None]
            entry["baseline"] = statistics.median(earlier) if earlier else None
            entry["regression"] = bool(earlier and entry["p99"] is not None and entry["baseline"] > 0
                                       and entry["p99"] > factor * entry["baseline"])


def _trend_chart(name: str, rows: list[dict[str, Any]]) -> Any:
    profiles = list(dict.fromkeys(p for row in rows for p in row["profiles"]))
    fig = go.Figure()
    for profile in profiles:
        points = [(row["campaign"], row["profiles"][profile]["p99"]) for row in rows if profile in row["profiles"]]
        fig.add_trace(go.Scatter(x=[c for c, _ in points], y=[v for _, v in points], mode="lines+markers",
                                 name=profile))
    fig.update_layout(**base_layout(f"{name}: RTO p99 per profile", yaxis_title="seconds"))
    return figure_div(fig, f"trend-{name}")


def render_trend(store_root: Path) -> Path:
    """Write the store's trend.html: past campaigns by name, oldest first."""
    store_root = Path(store_root)
    trends = trend_rows(store_root)
    assets = install_assets(store_root)
    names = [{"name": name, "rows": rows, "chart": _trend_chart(name, rows),
              "profiles": list(dict.fromkeys(p for row in rows for p in row["profiles"]))}
             for name, rows in sorted(trends.items())]
    return render_page("trend.html.j2", store_root / "trend.html", assets, names=names,
                       generated_at=_generated_at(), source=str(store_root),
                       nav=[{"href": "trend.html", "label": "trend", "current": True}])

