"""The timeline of a real failing run in Debian's Chromium: cluster lanes and anomalies.

One seeded run of the expected-unsafe controller-unclean profile on the local
namespace cluster, with the broker master partitioned away twice (the smoke
campaign's settings, 20 s): unclean elections lose acknowledged messages. The
run's cluster.jsonl must show each failover as a new master with a higher
epoch; its timeline.html must draw the master lane with a change of master
inside a fault window, every lost message listed beside the chart must be a
marker on the chart, and markers spread over the run, clicked, open their
message's details.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from harness.run import RunLifecycle
from harness.spec import build_spec
from support.browser import SHOTS, Loaded, browser  # noqa: F401 - the Chromium fixture

pytestmark = [pytest.mark.cluster, pytest.mark.root, pytest.mark.spark, pytest.mark.browser]

SEED = 20241123
# A click goes to the nearest marker; markers closer than this in one lane are clicked
# at a finer zoom, so that each click lands on its own marker.
PIXELS_APART = 2
# Lost-message markers clicked one by one (every one is checked to be listed beside the chart).
CLICKED_MARKERS = 24


@pytest.fixture(scope="module")
def failing_run(make_cluster, tmp_path_factory) -> Path:
    inventory, _ = make_cluster(5)
    spec = build_spec({"profile": "controller-unclean", "workload": "queue", "faults": ["leader-partition"],
                       "targets": ["brokers"], "timing": "fast", "time": 20, "interval": 4, "duration": 6,
                       "recovery": 6, "drain_timeout": 30, "rate": 40, "concurrency": 4, "seed": SEED,
                       "inventory": inventory.source, "store": tmp_path_factory.mktemp("store")})
    outcome = RunLifecycle(spec, Console(stderr=True, force_terminal=False), show_progress=False).execute()
    assert outcome.status == "complete", outcome.error
    return outcome.run.path


def test_cluster_jsonl_shows_each_failover_with_the_new_master_and_a_higher_epoch(failing_run):
    lines = [json.loads(line) for line in (failing_run / "cluster.jsonl").read_text().splitlines()]
    masters = []
    for line in lines:
        group = line["groups"]["broker-a"]
        if group["master"] and (not masters or masters[-1][0] != group["master"]):
            masters.append((group["master"], group["epoch"]))
    windows = json.loads((failing_run / "results.json").read_text())["checkers"]["rto"]["windows"]
    assert len(masters) >= len(windows) + 1, masters  # the first master, then one per partition
    epochs = [epoch for _, epoch in masters]
    assert epochs == sorted(set(epochs)), masters
    assert all(line["controller"]["leader"] or line["controller"]["members"] for line in lines)


def test_timeline_places_master_changes_and_every_lost_message_as_a_clickable_marker(failing_run, browser):  # noqa: F811
    results = json.loads((failing_run / "results.json").read_text())
    assert results["checkers"]["queue"]["counts"]["lost"] > 0  # the unclean profile must lose here
    loaded = Loaded(browser, (failing_run / "report" / "timeline.html").as_uri(), "timeline-controller-unclean")
    page = loaded.page
    spans = page.evaluate("""() => { const gd = document.getElementById('timeline');
        const t = gd.data.find(t => t.name === 'master / leader');
        return t.base.map((b, i) => ({start: b, stop: b + t.x[i], master: t.customdata[i][2]})); }""")
    spans.sort(key=lambda span: span["start"])
    windows = [(w["start_s"], w["stop_s"]) for w in results["checkers"]["rto"]["windows"]]
    changes = [b for a, b in zip(spans, spans[1:]) if b["master"] != a["master"]]
    assert any(start <= c["start"] <= stop for c in changes for start, stop in windows), (spans, windows)

    listed = page.eval_on_selector_all("a[data-anomaly^='lost-']", "els => els.map(e => e.dataset.anomaly)")
    markers = page.evaluate("""() => { const gd = document.getElementById('timeline');
        const t = gd.data.find(t => t.meta && t.meta.anomaly === 'lost');
        return t.customdata.map((c, i) => ({anchor: c[0], x: t.x[i], y: t.y[i]})); }""")
    assert listed and sorted(listed) == sorted(m["anchor"] for m in markers)
    # Plotly takes two clicks within doubleClickDelay for a double-click (zoom out); the test
    # clicks far faster than a person, so that delay is turned off for it.
    page.evaluate("() => { document.getElementById('timeline')._context.doubleClickDelay = 0; }")
    for marker in markers[:3] + markers[-1:]:  # real mouse clicks on a few ...
        assert mouse_click_opens(page, marker)
    # ... and a click event at markers spread over the whole run: each click re-draws the
    # chart (the ring around the chosen marker), so clicking hundreds costs minutes
    sample = spread(sorted(markers, key=lambda m: m["x"]), CLICKED_MARKERS)
    chosen = {m["anchor"] for m in sample}
    assert click_markers(page, markers, chosen) == chosen
    # the list entry zooms to its marker and opens the same details
    page.click(f"a[data-anomaly='{listed[-1]}']")
    page.wait_for_selector(f"#anomaly-details[data-anomaly='{listed[-1]}']")
    details = page.text_content("#anomaly-details")
    assert "node that acked" in details and "final log at that offset" in details
    page.screenshot(path=str(SHOTS / "timeline-lost-details.png"), full_page=False)
    assert loaded.errors == []


def test_timeline_draws_one_role_lane_per_member_and_both_masters_of_a_split_brain(failing_run, browser):  # noqa: F811
    lines = [json.loads(line) for line in (failing_run / "cluster.jsonl").read_text().splitlines()]
    both = [line for line in lines if sum(r == "master" for r in line["groups"]["broker-a"]["members"].values()) > 1]
    assert both, "the unclean profile under a master partition must show two masters at once"
    loaded = Loaded(browser, (failing_run / "report" / "timeline.html").as_uri(), "timeline-split-brain")
    page = loaded.page
    bars = page.evaluate("""() => { const gd = document.getElementById('timeline');
        const t = gd.data.find(t => t.name === 'master / leader');
        return t.base.map((b, i) => ({start: b, stop: b + t.x[i], lane: t.y[i], text: t.text[i]})); }""")
    lanes = {b["lane"] for b in bars}
    assert len(lanes) >= 2 and all(lane.startswith("broker-a n") for lane in lanes)
    overlapping = [(a, b) for a in bars for b in bars
                   if a["lane"] < b["lane"] and a["start"] < b["stop"] and b["start"] < a["stop"]]
    assert overlapping, bars
    first_both = both[0]["time"] / 1e9
    assert any(a["start"] <= first_both + 0.01 and b["start"] <= first_both + 0.01 for a, b in overlapping)
    # the lane labels are on the drawn y axis
    ticks = page.eval_on_selector_all(".yaxislayer-above .y2tick text, .yaxislayer-above text",
                                      "els => els.map(e => e.textContent)")
    assert lanes <= set(ticks), (lanes, ticks)
    titles = page.eval_on_selector_all(".g-xtitle text, .g-ytitle text", "els => els.map(e => e.textContent)")
    assert "time since run start (s)" in titles and "process" in titles
    assert loaded.errors == []


def test_the_run_page_opens_with_why_naming_the_acknowledging_nodes_windows_and_epochs(failing_run, browser):  # noqa: F811
    results = json.loads((failing_run / "results.json").read_text())
    lost = results["checkers"]["queue"]["counts"]["lost"]
    loaded = Loaded(browser, (failing_run / "report" / "index.html").as_uri(), "run-why")
    page = loaded.page
    first_section = page.evaluate("() => document.querySelector('main section').id")
    assert first_section == "why"
    summary = page.text_content("#why .why-summary")
    assert summary.startswith(f"{lost} acknowledged writes were lost")
    findings = page.eval_on_selector_all("#why .why-finding", """els => els.map(e => ({
        node: e.dataset.node, window: e.dataset.window, count: +e.dataset.count, text: e.textContent}))""")
    assert sum(f["count"] for f in findings) == lost
    in_windows = [f for f in findings if f["window"] != ""]
    assert in_windows and all(f"window #{f['window']}" in f["text"] and f"that {f['node']} acknowledged" in f["text"]
                              for f in in_windows)
    assert all("epoch" in f["text"] for f in in_windows)
    assert page.text_content("#why .why-split-brain").startswith("Split brain in broker-a:")
    # the window table puts the lost count beside availability and calls no such window available
    for row in page.eval_on_selector_all("#rto-table tbody tr", "els => els.map(e => e.textContent)"):
        if "not available" not in row:
            assert "acknowledged data was lost" not in row
    assert page.is_visible("#rto-table td.lost a[href='#why']")
    # every chart of the run page shows its axis titles (plotly.js reads only title.text)
    titles = page.eval_on_selector_all("#rto .g-xtitle text, #rto .g-ytitle text", "els => els.map(e => e.textContent)")
    assert {"fault window", "seconds unavailable"} <= set(titles), titles
    # a finding's link opens its first lost message on the timeline
    page.click("#why .why-finding a")
    page.wait_for_selector("#anomaly-details[data-anomaly^='lost-']", timeout=30_000)
    # ... and rings it on the chart
    anchor = page.get_attribute("#anomaly-details", "data-anomaly")
    page.wait_for_function("""a => (document.getElementById('timeline').data || [])
        .some(t => t.meta && t.meta.selected === a && t.x.length > 0)""", arg=anchor, timeout=10_000)
    assert loaded.errors == []


MARKER_SPOTS = """async ([lo, hi, group]) => { const gd = document.getElementById('timeline');
    await Plotly.relayout(gd, {'xaxis.range[0]': lo, 'xaxis.range[1]': hi});
    gd.scrollIntoView({block: 'start'});
    const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis, box = gd.getBoundingClientRect();
    return group.map(m => ({anchor: m.anchor, x: box.left + xa._offset + xa.l2p(m.x),
                            y: box.top + ya._offset + ya.l2p(m.y)})); }"""


def spread(items: list, count: int) -> list:
    """`count` items evenly spaced over `items`, the first and the last among them."""
    if len(items) <= count:
        return items
    return [items[round(k * (len(items) - 1) / (count - 1))] for k in range(count)]


def mouse_click_opens(page, marker: dict) -> bool:
    """Zoom to the marker, click it with the mouse: do its details open?"""
    spot = page.evaluate(MARKER_SPOTS, [marker["x"] - 0.2, marker["x"] + 0.2, [marker]])[0]
    page.evaluate("() => document.getElementById('anomaly-details').removeAttribute('data-anomaly')")
    page.mouse.click(spot["x"], spot["y"])
    page.wait_for_selector(f"#anomaly-details[data-anomaly='{marker['anchor']}']", timeout=5000)
    return True


def click_markers(page, markers: list[dict], wanted: set[str], lo: float | None = None,
                  hi: float | None = None, depth: int = 0) -> set[str]:
    """Send a click to the element drawn where each wanted marker is; where any marker is
    too close to it at this zoom, it is clicked after zooming into quarters. Returns the
    wanted anchors whose details opened."""
    targets = [m for m in markers if m["anchor"] in wanted]
    if not targets:
        return set()
    lo = min(m["x"] for m in targets) - 0.05 if lo is None else lo
    hi = max(m["x"] for m in targets) + 0.05 if hi is None else hi
    spots = page.evaluate(MARKER_SPOTS, [lo, hi, [m for m in markers if lo <= m["x"] <= hi]])
    aimed = [s for s in spots if s["anchor"] in wanted]
    crowded = {s["anchor"] for s in aimed if any(t is not s and abs(t["y"] - s["y"]) < 1
                                                 and abs(t["x"] - s["x"]) < PIXELS_APART for t in spots)}
    if depth >= 8:
        crowded = set()
    opened = set(page.evaluate("""spots => spots.filter(s => {
        const panel = document.getElementById('anomaly-details');
        panel.removeAttribute('data-anomaly');
        document.elementFromPoint(s.x, s.y).dispatchEvent(
            new MouseEvent('click', {bubbles: true, clientX: s.x, clientY: s.y}));
        return panel.getAttribute('data-anomaly') === s.anchor; }).map(s => s.anchor)""",
        [s for s in aimed if s["anchor"] not in crowded]))
    quarter = (hi - lo) / 4
    for k in range(4):
        start, stop = lo + k * quarter, lo + (k + 1) * quarter
        inside = [m for m in markers if start <= m["x"] < stop]
        opened |= click_markers(page, inside, {m["anchor"] for m in inside} & crowded, start, stop, depth + 1)
    return opened


def test_a_cluster_lane_label_stays_in_view_when_zoomed_into_part_of_a_long_span(failing_run, browser):  # noqa: F811
    loaded = Loaded(browser, (failing_run / "report" / "timeline.html").as_uri(), "timeline-zoomed-label")
    page = loaded.page
    longest = page.evaluate("""() => { const gd = document.getElementById('timeline');
        let best = null;
        gd.data.forEach((t, ti) => { if (t.legendgroup !== 'cluster' || !t.base) return;
          t.base.forEach((b, i) => { if (!best || t.x[i] > best.width)
            best = {trace: ti, index: i, start: b, width: t.x[i], text: t.text[i]}; }); });
        return best; }""")
    assert longest and longest["width"] > 4, longest
    # zoom into the span's first fifth: its middle, where the label was, is out of view
    lo, hi = longest["start"] + 0.05 * longest["width"], longest["start"] + 0.25 * longest["width"]
    page.evaluate(f"() => Plotly.relayout(document.getElementById('timeline'), "
                  f"{{'xaxis.range[0]': {lo}, 'xaxis.range[1]': {hi}}})")
    page.wait_for_timeout(500)
    drawn = page.evaluate(f"""() => {{ const gd = document.getElementById('timeline');
        const t = gd.data[{longest['trace']}];
        const plot = document.querySelector('.draglayer .nsewdrag').getBoundingClientRect();
        const labels = Array.from(document.querySelectorAll('text.bartext'))
          .filter(e => e.textContent === {json.dumps(longest['text'])})
          .map(e => e.getBoundingClientRect())
          .filter(r => r.width > 0 && r.left >= plot.left - 1 && r.right <= plot.right + 1);
        return {{base: t.base[{longest['index']}], stop: t.base[{longest['index']}] + t.x[{longest['index']}],
                 inView: labels.length}}; }}""")
    assert abs(drawn["base"] - lo) < 1e-6 and abs(drawn["stop"] - hi) < 1e-6, drawn
    assert drawn["inView"] >= 1, drawn
    page.screenshot(path=str(SHOTS / "timeline-zoomed-label.png"), full_page=False)
    assert loaded.errors == []
