"""Shrinking in campaigns: `shrink: true` / `--shrink` are accepted, the first failing run
of each failing cell is the one chosen, and index.html links the reproducers."""
from __future__ import annotations

from click.testing import CliRunner

from harness.campaign.model import load_campaign
from harness.cli import cli
from harness.shrink.campaign import first_failing_runs
from reports.campaign import render_campaign
from support.stores import make_campaign, results

CAMPAIGN = """name: shrinky
profiles: [controller-unclean]
faults: [leader-partition]
timing: fast
durations: {run: 10, fault: 3.5, between: 3.5, recovery: 3.5}
seed: 1
shrink: true
shrink_minutes: 5
"""


def test_a_campaign_file_may_ask_for_shrinking_and_the_cli_has_the_flag(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(CAMPAIGN)
    campaign = load_campaign(path)
    assert campaign.shrink is True and campaign.shrink_minutes == 5
    assert "--shrink" in CliRunner().invoke(cli, ["campaign", "--help"]).output
    path.write_text(CAMPAIGN.replace("shrink_minutes: 5", "shrink_minutes: -1"))
    result = CliRunner().invoke(cli, ["campaign", str(path), "--dry-run"])
    assert result.exit_code == 3 and "shrink_minutes" in result.output


def test_the_first_failing_run_of_each_failing_cell_is_shrunk_and_the_matrix_links_it(tmp_path):
    path = make_campaign(tmp_path, "20260101T000000Z-aaaa", [
        {"profile": "controller-unclean", "fault": "leader-partition", "repeat": 1, "results": results(True)},
        {"profile": "controller-unclean", "fault": "leader-partition", "repeat": 2, "results": results(False, 5)},
        {"profile": "controller-unclean", "fault": "leader-partition", "repeat": 3, "results": results(False, 9)},
        {"profile": "controller-3", "fault": "leader-partition", "repeat": 1, "results": results(True)},
    ])
    chosen = first_failing_runs(path)
    assert [p.name for p in chosen] == ["controller-unclean-queue-leader-partition-r2"]
    (chosen[0] / "shrink").mkdir()
    (chosen[0] / "shrink" / "index.html").write_text("<html></html>")
    page = render_campaign(path).read_text()
    assert 'href="runs/controller-unclean-queue-leader-partition-r2/shrink/index.html"' in page
    assert page.count("data-reproducer=") == 1
