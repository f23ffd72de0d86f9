"""compare.html in Debian's Chromium: what two windows per mode allow, and what ten do (no cluster)."""
from __future__ import annotations

import pytest

from reports.campaign import render_campaign
from support.browser import Loaded, browser  # noqa: F401 - the Chromium fixture
from support.stores import make_campaign, results

pytestmark = [pytest.mark.browser]


def campaign_of(store, campaign_id: str, dledger: list[float], controller: list[float], repeats: int):
    runs = []
    for repeat in range(1, repeats + 1):
        runs += [{"profile": "dledger-3", "fault": "leader-kill", "repeat": repeat, "seed": repeat,
                  "results": results(True, rto=dledger)},
                 {"profile": "controller-3", "fault": "leader-kill", "repeat": repeat, "seed": repeat,
                  "results": results(True, rto=controller)}]
    campaign = make_campaign(store, campaign_id, runs)
    render_campaign(campaign)
    return campaign / "compare.html"


def read_page(browser, page_path, shot):  # noqa: F811
    loaded = Loaded(browser, page_path.as_uri(), shot)
    page = loaded.page
    facts = page.evaluate("""() => ({
        conclusion: document.querySelector('p.conclusion').textContent.trim(),
        tested: document.querySelector('p.test').dataset.tested,
        cells: Array.from(document.querySelectorAll('table.compare tbody tr td:nth-child(4)')).map(td => td.textContent),
        titles: Array.from(document.querySelectorAll('.gtitle')).map(t => t.textContent),
        axes: Array.from(document.querySelectorAll('.g-xtitle text, .g-ytitle text')).map(t => t.textContent)})""")
    assert loaded.errors == []
    return facts


def test_compare_with_two_windows_per_mode_says_too_few_samples_in_the_browser(tmp_path, browser):  # noqa: F811
    facts = read_page(browser, campaign_of(tmp_path, "20240101T000000Z-aaaa-smoke", [2.0], [11.0], 2),
                      "compare-small-n")
    assert facts["conclusion"] == ("Too few samples for a conclusion: 2 vs 2 leader-kill windows; "
                                   "at least 4 per mode are needed.")
    assert facts["tested"] == "no"
    assert all("(n = 2, too few samples for an interval)" in cell and "[" not in cell for cell in facts["cells"])
    assert facts["titles"] and all("dledger-3 n = 2, controller-3 n = 2" in t for t in facts["titles"])
    assert "unavailable (s)" in facts["axes"] and "repeat #window" in facts["axes"]


def test_compare_with_enough_windows_states_its_conclusion_in_one_sentence(tmp_path, browser):  # noqa: F811
    facts = read_page(browser, campaign_of(tmp_path, "20240101T000000Z-bbbb-nightly", [2.9, 3.1], [11.0, 12.5], 4),
                      "compare-enough-n")
    assert facts["tested"] == "yes"
    assert facts["conclusion"].startswith("dledger-3 recovers faster than controller-3 under leader-kill: "
                                          "median RTO 3.00 s vs 11.75 s (n = 8 vs 8, p = ")
    assert all("(n = 8)" in cell and "[" in cell for cell in facts["cells"])
