"""`chaos gc --keep-nights N`: old campaigns lose their bulk; evidence and trends stay."""
from __future__ import annotations

import json

from click.testing import CliRunner

from harness.cli import cli
from reports.campaign import render_trend, trend_rows
from support.stores import make_campaign, results, stored

FAILED = [{"name": "no-lost-on-safe", "title": "no loss", "ok": False, "detail": "2 lost"}]
PASSED = [{"name": "no-lost-on-safe", "title": "no loss", "ok": True, "detail": "ok"}]


def night(store, day: int, gates=PASSED, status="complete", name="nightly"):
    return make_campaign(store, f"202401{day:02d}T000000Z-aaaa-{name}",
                         [{"profile": "dledger-3", "fault": "leader-kill", "results": results(True, rto=[float(day)])}],
                         name=name, gates=gates, status=status)


def test_gc_keeps_the_newest_nights_failed_and_unfinished_ones_and_prunes_the_rest(tmp_path):
    for day in range(1, 6):
        night(tmp_path, day, gates=FAILED if day == 2 else PASSED, status="interrupted" if day == 1 else "complete")
    adhoc = tmp_path / "20240101T000000Z-bbbb"
    (adhoc / "runs" / "r").mkdir(parents=True)
    (adhoc / "campaign.json").write_text(json.dumps(stored({"kind": "ad-hoc", "runs": ["r"]})))
    result = CliRunner().invoke(cli, ["gc", "--keep-nights", "2", "--store", str(tmp_path)])
    assert result.exit_code == 0, result.output
    history = lambda day: tmp_path / f"202401{day:02d}T000000Z-aaaa-nightly" / "runs" / "dledger-3-queue-leader-kill-r1" / "history"
    assert history(5).is_dir() and history(4).is_dir()          # newest two
    assert history(2).is_dir()                                   # failed a gate: evidence
    assert history(1).is_dir()                                   # unfinished: resumable
    assert not history(3).exists()                               # pruned
    assert "prune  20240103T000000Z-aaaa-nightly" in result.output
    assert (adhoc / "runs" / "r").is_dir()                       # ad-hoc runs untouched by default
    # every night still in the trend, with its RTO
    rows = trend_rows(tmp_path)["nightly"]
    assert [row["profiles"]["dledger-3"]["p99"] for row in rows] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert "20240103T000000Z-aaaa-nightly" in render_trend(tmp_path).read_text()


def test_gc_counts_nights_per_campaign_name_and_dry_run_removes_nothing(tmp_path):
    for day in range(1, 4):
        night(tmp_path, day)
        night(tmp_path, day, name="smoke")
    result = CliRunner().invoke(cli, ["gc", "--keep-nights", "1", "--store", str(tmp_path), "--dry-run"])
    assert result.exit_code == 0
    assert result.output.count("prune  ") == 4 and "nothing removed" in result.output
    assert all(p.is_dir() for p in tmp_path.glob("*/runs/*/history"))


def test_gc_refuses_a_missing_store_and_a_bad_count():
    runner = CliRunner()
    assert runner.invoke(cli, ["gc", "--keep-nights", "0"]).exit_code == 2
    result = runner.invoke(cli, ["gc", "--keep-nights", "3", "--store", "/nonexistent/store"])
    assert result.exit_code != 0 and "no such directory" in result.output
