"""index.html, compare.html and trend.html from a store of files (no cluster)."""
from __future__ import annotations

import re

from reports.campaign import render_campaign, render_trend
from support.stores import make_campaign, results

FAST, SLOW = [2.9, 3.1, 3.0, 3.2, 2.8], [11.0, 12.5, 11.8, 12.1, 13.0]


def nightly(store, campaign_id, dledger_rto=FAST, controller_rto=SLOW, gates=None, unclean_lost=7):
    runs = []
    for repeat in (1, 2):
        runs += [
            {"profile": "dledger-3", "fault": "leader-kill", "repeat": repeat, "seed": 10 + repeat,
             "results": results(True, rto=dledger_rto)},
            {"profile": "controller-3", "fault": "leader-kill", "repeat": repeat, "seed": 10 + repeat,
             "results": results(True, rto=controller_rto)},
            {"profile": "controller-unclean", "fault": "leader-kill", "repeat": repeat, "seed": 10 + repeat,
             "results": results(False, lost=unclean_lost, rto=[1.0], lost_ids=[f"m-{repeat}-<b>{i}</b>" for i in range(3)])},
        ]
    gates = gates or [{"name": "no-lost-on-safe", "title": "no acknowledged message lost on safe profiles",
                       "ok": True, "detail": "ok"}]
    return make_campaign(store, campaign_id, runs, gates=gates)


def test_index_shows_the_matrix_with_verdicts_lost_counts_and_links_to_run_reports(tmp_path):
    campaign = nightly(tmp_path, "20240101T000000Z-aaaa-nightly")
    html = render_campaign(campaign).read_text()
    cells = dict(re.findall(r'data-cell="([^"]+)" data-verdict="([^"]+)"', html))
    assert cells == {"dledger-3|queue|leader-kill": "True", "controller-3|queue|leader-kill": "True",
                     "controller-unclean|queue|leader-kill": "False"}
    assert 'data-seed="11"' in html and 'data-seed="12"' in html
    # lost messages listed, escaped
    assert "m-1-&lt;b&gt;0&lt;/b&gt;" in html and "<b>0</b>" not in html
    # plotly.min.js once per store, beside the campaigns, not inside each
    assert (tmp_path / "assets" / "plotly.min.js").is_file() and not (campaign / "assets").exists()
    assert 'src="../assets/plotly.min.js"' in html


def test_a_failed_gate_is_shown_at_the_top_of_index(tmp_path):
    gates = [{"name": "unsafe-found", "title": "each expected-unsafe profile found invalid", "ok": False,
              "detail": "controller-unclean passed all 2 runs: the campaign has lost its teeth"}]
    html = render_campaign(nightly(tmp_path, "20240101T000000Z-aaaa-nightly", gates=gates)).read_text()
    main = html[html.index("<main>"):]
    assert main.index('data-gates="failed"') < main.index('id="matrix"')
    assert 'data-gate="unsafe-found" data-passed="no"' in main and "lost its teeth" in main


def test_compare_puts_the_modes_side_by_side_with_intervals_and_a_significance_verdict(tmp_path):
    campaign = nightly(tmp_path, "20240101T000000Z-aaaa-nightly")
    render_campaign(campaign)
    html = (campaign / "compare.html").read_text()
    assert 'data-profile="dledger-3" data-mode="dledger"' in html
    assert 'data-profile="controller-3" data-mode="controller"' in html
    assert "controller-unclean" not in html.split("<main>")[1]     # unsafe profiles are caught, not measured
    assert 'data-significant="yes"' in html and "dledger-3 recovers faster" in html
    # median [CI] (n): 10 windows per mode, enough for an interval
    assert re.search(r"3\.0\d s <span class=\"muted\" data-n=\"10\">\[\d\.\d\d, \d\.\d\d\] \(n = 10\)", html)
    assert "dledger-3 (n = 10) vs controller-3 (n = 10)" in html
    assert re.search(r"dledger-3 recovers faster than controller-3 under leader-kill: median RTO 3\.0\d s vs "
                     r"12\.\d\d s \(n = 10 vs 10, p = [\d.e-]+\)\.", html)
    assert html.count('class="chart"') == 2


def test_compare_says_when_a_mode_is_missing(tmp_path):
    campaign = make_campaign(tmp_path, "20240101T000000Z-aaaa-x", [
        {"profile": "dledger-3", "fault": "leader-kill", "results": results(True, rto=FAST)}])
    render_campaign(campaign)
    assert 'data-missing-modes="controller"' in (campaign / "compare.html").read_text()


def test_trend_has_one_row_per_night_and_flags_a_p99_regression_against_the_trailing_median(tmp_path):
    for night in range(1, 4):
        nightly(tmp_path, f"2024010{night}T000000Z-aaaa-nightly")
    nightly(tmp_path, "20240104T000000Z-aaaa-nightly", controller_rto=[30.0, 31.0, 29.0, 32.0, 30.0])
    html = render_trend(tmp_path).read_text()
    rows = re.findall(r'<tr data-campaign="([^"]+)"', html)
    assert rows == [f"2024010{n}T000000Z-aaaa-nightly" for n in range(1, 5)]
    assert html.count('data-regression="controller-3"') == 1
    last_row = html[html.index('data-campaign="20240104'):]
    assert 'data-regression="controller-3"' in last_row.split("</tr>")[0]


def test_pages_of_an_unfinished_campaign_show_runs_not_run_yet(tmp_path):
    campaign = make_campaign(tmp_path, "20240101T000000Z-aaaa-x", [
        {"profile": "dledger-3", "fault": "leader-kill", "results": results(True, rto=FAST)},
        {"profile": "controller-3", "fault": "leader-kill", "status": "pending"}], status="interrupted")
    html = render_campaign(campaign).read_text()
    assert 'data-verdict="pending"' in html and "1 of 2 runs done" in html


def test_a_run_that_failed_before_it_began_shows_as_an_error_with_its_reason(tmp_path):
    import json
    campaign = make_campaign(tmp_path, "20240101T000000Z-aaaa-x", [
        {"profile": "dledger-3", "fault": "leader-kill", "results": results(True, rto=FAST)},
        {"profile": "controller-3", "fault": "leader-kill", "status": "pending"}])
    meta = json.loads((campaign / "campaign.json").read_text())
    meta["done"] = {"controller-3-queue-leader-kill-r1": {"status": "error", "error": "node n3 unreachable"}}
    (campaign / "campaign.json").write_text(json.dumps(meta))
    html = render_campaign(campaign).read_text()
    assert 'data-cell="controller-3|queue|leader-kill" data-verdict="error"' in html
    assert "node n3 unreachable" in html
