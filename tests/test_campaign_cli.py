"""`chaos campaign` without a cluster: bad input, --dry-run, and the exit code of the
gates on a campaign whose runs are already recorded (as after a stop)."""
from __future__ import annotations

import io
import json
from pathlib import Path

from click.testing import CliRunner
from rich.console import Console

from harness.campaign import load_campaign, plan
from harness.campaign.runner import CampaignRunner
from harness.cli import cli
from support.stores import results, stored

FILE = """\
name: gated
profiles: [dledger-3, controller-unclean]
faults: [leader-kill]
durations: {run: 10, between: 2, fault: 5, recovery: 2}
seed: 3
"""


def chaos(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_a_bad_campaign_file_is_refused_with_exit_3_before_anything_starts(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(FILE.replace("leader-kill", "leader-smash"))
    result = chaos("campaign", str(path), "--store", str(tmp_path / "store"))
    assert result.exit_code == 3
    assert "bad.yaml: faults[0] (line 3):" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "store").exists()


def test_dry_run_prints_every_run_with_its_seed_and_the_number_of_faults(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(FILE)
    result = chaos("campaign", str(path), "--dry-run")
    assert result.exit_code == 0, result.output
    assert "campaign gated: 2 runs" in result.output and "faults injected: 2" in result.output
    seeds = [line.split("seed ")[1] for line in result.output.splitlines() if line.startswith("  ")]
    assert len(seeds) == 2 and seeds[0] == seeds[1]     # both profiles, same seed


def test_resume_without_an_unfinished_campaign_is_a_one_line_error(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(FILE)
    result = chaos("campaign", str(path), "--resume", "--store", str(tmp_path / "store"))
    assert result.exit_code == 3 and "--resume: no unfinished campaign 'gated'" in result.output


def completed_run(runner: CampaignRunner, run_id: str) -> Path:
    """The directory of a run that finished (its run.json says so), not yet checked."""
    run_dir = runner.path / "runs" / run_id
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps(stored({"run_id": run_id, "status": "complete"})))
    return run_dir


def recorded_campaign(tmp_path: Path, unclean_valid: bool) -> tuple[Path, Path]:
    """A campaign whose two runs are recorded and checked but which never finished."""
    path = tmp_path / "c.yaml"
    path.write_text(FILE)
    campaign = load_campaign(path)
    runner = CampaignRunner(campaign, plan(campaign), path, tmp_path / "store", Console(quiet=True))
    for run in runner.plan.runs:
        run_dir = completed_run(runner, run.run_id)
        lost = 0 if run.profile == "dledger-3" or unclean_valid else 5
        (run_dir / "results.json").write_text(json.dumps(results(lost == 0, lost=lost, rto=[0.5])))
        runner.state["done"][run.run_id] = {"status": "complete", "valid": lost == 0}
    runner.state["status"] = "interrupted"
    runner.save()
    return path, runner.path


def test_a_failed_gate_exits_1_and_heads_index_html(tmp_path):
    path, campaign = recorded_campaign(tmp_path, unclean_valid=True)
    result = chaos("campaign", str(path), "--resume", "--store", str(tmp_path / "store"), "--quiet")
    assert result.exit_code == 1, result.output
    assert "gate FAIL  each expected-unsafe profile found invalid" in result.output
    index_line, serve_line = result.output.rstrip().splitlines()[-2:]
    assert index_line == f"index: {campaign / 'index.html'}"
    assert serve_line.startswith("browse: chaos serve ")
    html = (campaign / "index.html").read_text()
    main = html[html.index("<main>"):]
    assert main.index('data-gate="unsafe-found" data-passed="no"') < main.index('id="matrix"')
    assert json.loads((campaign / "campaign.json").read_text())["status"] == "complete"
    assert (tmp_path / "store" / "trend.html").is_file()


def test_every_gate_passing_exits_0(tmp_path):
    path, _ = recorded_campaign(tmp_path, unclean_valid=False)
    result = chaos("campaign", str(path), "--resume", "--store", str(tmp_path / "store"), "--quiet")
    assert result.exit_code == 0, result.output
    assert "gate FAIL" not in result.output and "controller-unclean" in result.output


def live_text(status) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(status)
    return console.export_text()


def test_the_live_view_shows_a_bar_of_runs_done_time_left_verdicts_and_faults_so_far(tmp_path):
    from harness.campaign.runner import _Status
    path = tmp_path / "c.yaml"
    path.write_text(FILE)
    campaign = load_campaign(path)
    runner = CampaignRunner(campaign, plan(campaign), path, tmp_path / "store", Console(quiet=True))
    runner.faults_done = 3
    runner.state["done"] = {runner.plan.runs[0].run_id: {"status": "complete", "valid": None}}
    text = live_text(_Status(runner, runner.plan.runs[1], 2))
    # one run of 10 + 2 s left, plus 15 s of estimated overhead, before any run finished here
    assert "1/2 runs done  ~0 min left  1 complete; verdicts after the checks" in text
    assert "━" in text  # the bar
    assert "run 2/2 controller-unclean-queue-leader-kill-r1  faults so far 3" in text
    runner.finished_here = 1
    runner.started -= 120
    runner.state["done"][runner.plan.runs[0].run_id]["valid"] = False
    text = live_text(_Status(runner, runner.plan.runs[1], 2))
    assert "~2 min left" in text and "1 complete; verdicts 1 invalid" in text


def checked_batches(tmp_path: Path, monkeypatch, batch: int) -> tuple[list[bool], list[int]]:
    """The Spark sessions a campaign of 4 recorded, unchecked runs starts (their `quick`)
    and the batches it checks, with Spark and the checkers replaced by recorders."""
    import checkers.spark.session
    import harness.run

    quick: list[bool] = []
    batches: list[int] = []
    monkeypatch.setattr(checkers.spark.session, "get_spark", lambda *args, **kwargs: quick.append(kwargs["quick"]))
    monkeypatch.setattr(harness.run, "check", lambda dirs, master=None: batches.append(len(dirs))
                        or [{"valid": True} for _ in dirs])
    monkeypatch.setattr(harness.run, "report_renderer", lambda: None)
    tmp_path.mkdir()
    path = tmp_path / "c.yaml"
    path.write_text(FILE.replace("[leader-kill]", "[leader-kill, random-kill]") + f"spark: {{batch: {batch}}}\n")
    campaign = load_campaign(path)
    runner = CampaignRunner(campaign, plan(campaign), path, tmp_path / "store", Console(quiet=True))
    for run in runner.plan.runs:
        completed_run(runner, run.run_id)
        runner.state["done"][run.run_id] = {"status": "complete", "valid": None}
    runner._check_pending()
    return quick, batches


def test_a_campaign_checked_in_one_or_two_batches_starts_a_quick_spark_session(tmp_path, monkeypatch):
    """As `chaos check` does: its JVM compiles with C1 only (checkers.spark.session.QUICK_SESSION_CHECKS)."""
    assert checked_batches(tmp_path / "one", monkeypatch, batch=16) == ([True], [4])
    assert checked_batches(tmp_path / "two", monkeypatch, batch=2) == ([True], [2, 2])
    assert checked_batches(tmp_path / "uneven", monkeypatch, batch=3) == ([True], [3, 1])


def test_a_campaign_checked_in_more_batches_starts_a_fully_compiling_spark_session(tmp_path, monkeypatch):
    """From the third check of a session on, C2's code is faster than C1's."""
    assert checked_batches(tmp_path / "four", monkeypatch, batch=1) == ([False], [1, 1, 1, 1])
