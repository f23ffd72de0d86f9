"""Run reports without a browser: escaping, assets, tolerant loading, sections.

results.json here is hand-written in the shape docs/history-format.md gives;
test_reports_browser.py renders real ones from the checkers.
"""
from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import plotly.graph_objects as go
import pytest

import reports
from reports.assets import install_assets, plotly_js
from reports.charts import figure_div, hover_text
from reports.load import StoredRun, read_json
from reports.render import render_page
from reports.run_report import failover_note, replay_command
from support.stores import stored

CHAOS = str(Path(sys.executable).parent / "chaos")
EVIL = "</script><!--<script>alert(1)</script>"


def window(**extra):
    return {"id": 0, "fault": "random-kill", "start_s": 5.0, "stop_s": 10.0, "targets": ["n2"],
            "details": {"grudge": None}, "writes": 40, "ok_writes": 30, "availability": 0.75,
            "outage_from_s": 5.2, "recovered_at_s": 7.4, "unavailable_s": 2.2, "recovered": True,
            "over_threshold": False, **extra}


def results(**checkers):
    base = {"stats": {"valid": True, "operations": 10, "by_outcome": {"ok": 10}, "malformed": {"count": 0}},
            "rto": {"valid": True, "windows": [window()], "not_recovered": [], "max_unavailable_s": 2.2},
            "perf": {"valid": True, "latency": [], "series": []}}
    base.update(checkers)
    return stored({"valid": False if any(c.get("valid") is False for c in base.values()) else True, "checkers": base})


def figure(html: str, div_id: str) -> dict:
    """The figure JSON a page embeds for one chart."""
    block = re.search(rf'<script type="application/json" id="{div_id}-data">(.*?)</script>', html, re.S)
    return json.loads(block.group(1))


def make_run(tmp_path: Path, results_text: str | None, run_json: dict | None = None) -> Path:
    run = tmp_path / "c1" / "runs" / "r1"
    (run / "history").mkdir(parents=True)
    (tmp_path / "c1" / "campaign.json").write_text(json.dumps(stored({"runs": ["r1"]})))
    if run_json is not None:
        (run / "run.json").write_text(json.dumps(stored(run_json)))
    if results_text is not None:
        (run / "results.json").write_text(results_text)
    return run


def test_figure_json_cannot_break_out_of_its_script_block():
    fig = go.Figure(go.Scatter(x=[1], y=[2], text=[EVIL], name=EVIL))
    html = str(figure_div(fig, "c1"))
    block = re.search(r'<script type="application/json" id="c1-data">(.*)</script>$', html, re.S).group(1)
    assert "</script" not in block.lower() and "<!--" not in block
    assert json.loads(block)["data"][0]["text"] == [EVIL]


def test_figure_div_escapes_its_id_and_dict_figures_are_escaped_too():
    html = str(figure_div({"data": [{"type": "scatter", "x": [1], "y": [1], "text": [EVIL]}], "layout": {}},
                          'x"><script>'))
    assert "<script>" not in html.replace('<script type="application/json"', "")
    assert "\\u003c/script\\u003e" in html


def test_hover_text_is_html_escaped_and_shortened():
    assert hover_text("<b>x</b>") == "&lt;b&gt;x&lt;/b&gt;"
    assert hover_text("y" * 500).endswith("…") and len(hover_text("y" * 500)) == 301


def test_install_assets_copies_plotly_from_its_package_once(tmp_path):
    assets = install_assets(tmp_path)
    copied = assets / "plotly.min.js"
    assert copied.stat().st_size == plotly_js().stat().st_size
    assert {"report.css", "report.js"} <= {p.name for p in assets.iterdir()}
    before = copied.stat().st_mtime_ns
    assert install_assets(tmp_path) == assets and copied.stat().st_mtime_ns == before


def test_render_page_refers_to_assets_relatively_so_a_copied_folder_still_opens(tmp_path):
    campaign = tmp_path / "c"
    assets = install_assets(campaign)
    page = render_page("base.html.j2", campaign / "runs" / "r" / "report" / "index.html", assets)
    html = page.read_text()
    assert 'href="../../../assets/report.css"' in html and 'src="../../../assets/plotly.min.js"' in html
    moved = tmp_path / "elsewhere"
    campaign.rename(moved)
    assert (moved / "runs" / "r" / "report" / "../../../assets/plotly.min.js").resolve().is_file()


@pytest.mark.parametrize("text, problem", [
    (None, "missing"), ("", "empty file (truncated?)"), ('{"valid": tru', "malformed JSON at line 1"),
])
def test_read_json_says_which_file_and_what_is_wrong(tmp_path, text, problem):
    path = tmp_path / "results.json"
    if text is not None:
        path.write_text(text)
    data, said = read_json(path)
    assert data is None and said.startswith(str(path)) and problem in said


def test_a_truncated_results_json_is_named_in_the_report_and_the_rest_renders(tmp_path):
    run = make_run(tmp_path, '{"valid": false, "checkers": {"queue": {"valid"',
                   {"run_id": "r1", "spec": {"profile": "dledger-3", "seed": 9}})
    html = reports.render_run(run).read_text()
    assert f"{run / 'results.json'}: malformed JSON" in html
    assert "chaos run --profile dledger-3 --seed 9" in html
    assert 'data-verdict="unknown"' in html
    assert (run / "report" / "timeline.html").is_file()


def test_a_run_without_run_json_or_history_table_still_gets_a_report(tmp_path):
    run = make_run(tmp_path, json.dumps(results()))
    html = reports.render_run(run).read_text()
    assert f"{run / 'run.json'}: missing" in html
    assert "history.parquet: missing (run `chaos check" in html
    assert 'id="rto-chart"' in html


def test_every_queue_anomaly_category_is_shown_with_full_lists_to_download(tmp_path):
    rows = [{"category": "poll_skip", "id": i, "key": "1"} for i in range(30)]
    queue = {"valid": False, "counts": {"lost": 0, "poll_skip": 30}, "lost": [], "poll_skip": rows,
             "duplicated": [], "problems": []}
    run = make_run(tmp_path, json.dumps(results(queue=queue)))
    html = reports.render_run(run).read_text()
    assert 'id="queue-poll_skip">poll skip: 30 offsets' in html  # poll skips count offsets
    assert "30 poll skip" in html  # the verdict's reason
    assert "poll skip (offsets)" in html and "lost (messages)" in html  # the counts table says what it counts
    table = re.search(r'<table class="data anomalies" data-category="poll_skip">(.*?)</table>', html, re.S).group(1)
    assert re.findall(r"<th scope=\"col\">(.*?)</th>", table)[:2] == ["id", "key"]
    assert [int(cell) for cell in re.findall(r"<tr><td>(\d+)</td>", table)] == list(range(25))
    assert "The first 25 of 30 rows" in html
    assert "{&#34;" not in table and '{"' not in table  # cells, not JSON objects
    downloaded = json.loads((run / "report" / "downloads" / "queue-poll_skip.json").read_text())
    assert [r["id"] for r in downloaded] == list(range(30))
    assert (run / "report" / "downloads" / "queue-poll_skip.csv").read_text().count("\n") == 31


def test_a_checker_that_does_not_apply_says_not_applicable_once(tmp_path):
    lin = {"valid": True, "checked": False, "reason": "not applicable: the queue workload has no register"}
    run = make_run(tmp_path, json.dumps(results(linearizable=lin)))
    html = reports.render_run(run).read_text()
    assert "Not applicable: the queue workload has no register" in html
    assert "not applicable: not applicable" not in html.lower()


def test_a_window_shorter_than_failure_detection_says_no_failover_was_exercised(tmp_path):
    short = window(detection_s=10.0, exercises_failover=False)
    assert failover_note(short).startswith("no failover exercised: the window lasted 5.00 s")
    assert "shorter than the profile's failure detection of 10.00 s" in failover_note(short)
    assert failover_note(window(detection_s=2.0, exercises_failover=True)).startswith("long enough")
    assert "unknown" in failover_note(window())
    run = make_run(tmp_path, json.dumps(results(rto={"valid": True, "windows": [short], "failovers": 0})))
    html = reports.render_run(run).read_text()
    assert "no failover exercised" in html and "failure detection should trigger" in html


def test_a_window_that_never_recovered_is_marked_in_chart_and_table(tmp_path):
    lost = window(recovered=False, unavailable_s=12.0)
    run = make_run(tmp_path, json.dumps(results(rto={"valid": False, "windows": [lost], "not_recovered": [0]})))
    html = reports.render_run(run).read_text()
    assert "✗ not recovered" in html and "Not recovered: window(s) 0" in html
    bar = figure(html, "rto-chart")["data"][0]
    assert bar["text"] == ["not recovered"] and bar["marker"]["pattern"]["shape"] == ["/"]
    assert "fault window(s) 0 never recovered" in html


def test_replay_command_quotes_every_value_and_replays_the_spec():
    facts = StoredRun(Path("r"), run={"spec": {"profile": "controller-3", "faults": ["random-loss:probability=0.3",
                                                                                     "x; rm -rf /"],
                                              "time": 20.0, "seed": 7, "ordered": True, "mix": {"read": 2.0},
                                              "targets": [], "nodes": None}})
    argv = shlex.split(replay_command(facts))
    assert argv == ["chaos", "run", "--profile", "controller-3", "--fault", "random-loss:probability=0.3",
                    "--fault", "x; rm -rf /", "--time", "20", "--seed", "7", "--ordered", "--mix", "read=2"]


def test_render_path_renders_every_run_of_a_campaign(tmp_path):
    run = make_run(tmp_path, json.dumps(results()))
    second = run.parent / "r2"
    (second / "history").mkdir(parents=True)
    pages = reports.render_path(tmp_path / "c1")
    assert run / "report" / "index.html" in pages and second / "report" / "index.html" in pages
    assert (tmp_path / "assets" / "plotly.min.js").is_file()   # once per store
    assert not (run / "report" / "assets").exists() and not (tmp_path / "c1" / "assets").exists()


def test_chaos_report_on_a_path_that_is_no_run_campaign_or_store_exits_3_with_one_line(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    for path in (tmp_path, tmp_path / "notes.txt", tmp_path / "missing"):
        result = subprocess.run([CHAOS, "report", str(path)], capture_output=True, text=True, timeout=120)
        assert result.returncode == 3
        assert len(result.stderr.strip().splitlines()) == 1 and str(path) in result.stderr
        assert "Traceback" not in result.stderr


def test_chaos_report_prints_each_page_and_the_serve_command(tmp_path):
    make_run(tmp_path, json.dumps(results()))
    result = subprocess.run([CHAOS, "report", str(tmp_path / "c1" / "runs" / "r1")], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == str(tmp_path / "c1" / "runs" / "r1" / "report" / "index.html")
    assert lines[-1] == f"browse: chaos serve {tmp_path}"


def write_history_table(run: Path, operations: int, processes: int = 3) -> None:
    """checked/history.parquet as the checkers write it: `operations` acknowledged sends."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    rows = [{"index": i, "process": i % processes, "f": "send", "key": "0", "type": "ok",
             "invoke_time": i * 100_000_000, "complete_time": i * 100_000_000 + 5_000_000,
             "invoke_value": json.dumps({"id": i}), "value": json.dumps({"id": i, "queue": 0, "offset": i}),
             "node": "n1", "error": None} for i in range(operations)]
    (run / "checked").mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), run / "checked" / "history.parquet")


def test_a_run_above_the_detail_limit_gets_aggregates_and_range_pages(tmp_path, monkeypatch):
    from reports import run_report
    monkeypatch.setattr(run_report, "DETAIL_LIMIT", 10)
    series = [{"f": "send", "type": "ok", "t_s": [0, 1, 2, 3], "ops": [10, 10, 10, 5],
               "throughput": [10, 10, 10, 5], "p50_ms": [5, 5, 5, 5], "p99_ms": [5, 5, 6, 5], "max_ms": [5, 6, 7, 5]}]
    run = make_run(tmp_path, json.dumps(results(perf={"valid": True, "latency": [], "series": series})))
    write_history_table(run, 35)
    html = reports.render_run(run).read_text()
    latency = figure(html, "latency-chart")
    assert "35 operations: too many to draw one by one" in html
    assert sum(len(t["x"]) for t in latency["data"]) == 3 * 4  # p50, p99, max per bucket: no per-op points
    timeline = (run / "report" / "timeline.html").read_text()
    links = re.findall(r'<a href="(timeline/range-\d+\.html)">', timeline)
    assert links == [f"timeline/range-{n}.html" for n in range(4)]
    assert figure(timeline, "timeline")["layout"]["meta"]["timeline"]["aggregated"]
    drawn = []
    for link in links:
        page = (run / "report" / link).read_text()
        ops = [t for t in figure(page, "timeline")["data"] if t["type"] == "scattergl" and t.get("customdata")]
        drawn += [c[0] for t in ops for c in t["customdata"]]
        assert '../timeline.html' in page and "../../assets/report.js" in page
    assert sorted(drawn) == list(range(35))  # every operation on exactly one range page


def test_a_big_run_holds_only_the_operations_its_anomalies_name_and_still_places_them(tmp_path, monkeypatch):
    from reports import run_report
    from reports.load import load_run
    monkeypatch.setattr(run_report, "DETAIL_LIMIT", 10)
    lost = {"category": "lost", "id": "17", "key": "0", "sends": 1, "send_outcome": "ok", "consumed": 0}
    queue = {"valid": False, "counts": {"lost": 1}, "lost": [lost], "problems": []}
    run = make_run(tmp_path, json.dumps(results(queue=queue)))
    write_history_table(run, 35)
    view = run_report.history_view(load_run(run))
    assert view.aggregated and view.operations == 35
    assert view.history.index == [17]  # the lost message's send, not the 35 operations
    reports.render_run(run)
    timeline = (run / "report" / "timeline.html").read_text()
    details = json.loads(re.search(r'<script type="application/json" id="anomaly-data">(.*?)</script>',
                                   timeline, re.S).group(1))["lost-0"]
    assert [op["index"] for op in details["ops"]] == [17]
    assert details["detail_href"] == "timeline/range-1.html#anomaly-lost-0"  # ops 10-19
    assert ["acked at (s)", 1.705] in details["fields"] and ["node that acked", "n1"] in details["fields"]
