"""`chaos teeth` on a regressions file (historic RocketMQ bugs) without a cluster: each bug's
recipe becomes two cells with the same seeds on its buggy and its fixed release, the verdict
counts a catch only by a safety anomaly with every control valid, and bad files are refused
in one line before anything starts."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from harness.campaign import historic, regressions
from harness.campaign.model import CampaignError
from harness.campaign.plan import plan
from harness.campaign.teeth import CAUGHT, CONTROL_INVALID, ERROR, MISSED, RunResult
from harness.cli import cli

ROOT = Path(__file__).resolve().parent.parent
FILE = ROOT / "campaigns" / "rocketmq-regressions.yaml"
BUG_7689 = "cq-offset-shared-after-master-and-controller-kill"


def test_each_reachable_bug_runs_its_recipe_on_both_releases_with_the_same_seeds(tmp_path):
    spec = regressions.load(FILE)
    registry = historic.load()
    assert {b.id for b in spec.selected()} == {b.id for b in registry.bugs}
    bug = registry.get(BUG_7689)
    planned = plan(regressions.bug_campaign(spec, bug), store=tmp_path).runs
    by_release = {v: [r for r in planned if r.profile.endswith("@" + v)] for v in ("5.1.4", "5.2.0")}
    assert [len(runs) for runs in by_release.values()] == [spec.seeds, spec.seeds]
    assert [r.seed for r in by_release["5.1.4"]] == [r.seed for r in by_release["5.2.0"]]
    assert len({r.seed for r in by_release["5.1.4"]}) == spec.seeds
    assert {r.fault for r in planned} == {"+".join(bug.recipe.faults)}


def test_a_recipe_with_its_own_rate_and_concurrency_runs_at_them_and_the_others_at_the_files():
    spec = regressions.load(FILE)
    bugs = [b for b in spec.selected() if b.reachable]
    assert any(b.recipe.rate for b in bugs) and any(b.recipe.rate is None for b in bugs)
    for bug in bugs:
        campaign = regressions.bug_campaign(spec, bug)
        assert campaign.rate == (bug.recipe.rate or spec.rate)
        assert campaign.concurrency == (bug.recipe.concurrency or spec.concurrency)


def test_a_regressions_file_is_told_from_a_campaign_by_its_kind():
    assert regressions.is_regressions(FILE)
    assert not regressions.is_regressions(ROOT / "campaigns" / "rocketmq-smoke.yaml")


def _run(run_id: str, valid, safety=(), status="complete") -> RunResult:
    return RunResult(run_id, status, valid, tuple(safety))


def test_a_bug_is_caught_by_a_safety_anomaly_on_its_buggy_release_only_with_every_control_valid():
    bug = historic.load().get(BUG_7689)
    lost = ("queue: 3 lost",)
    caught = regressions.verdict_of(bug, [1, 2], [_run("b1", False, lost), _run("b2", True)],
                                    [_run("f1", True), _run("f2", True)])
    assert (caught.status, caught.caught_seeds, caught.valid_controls, caught.control_valid) == \
        (CAUGHT, [1], [1, 2], True)
    assert caught.as_json()["caught_in"] == 1 and caught.as_json()["buggy_version"] == "5.1.4"
    # the fixed release loses too: the recipe, not the bug
    spoiled = regressions.verdict_of(bug, [1, 2], [_run("b1", False, lost), _run("b2", True)],
                                     [_run("f1", False, lost), _run("f2", True)])
    assert (spoiled.status, spoiled.control_valid) == (CONTROL_INVALID, False)
    # invalid by recovery time alone is no catch
    slow = regressions.verdict_of(bug, [1], [_run("b1", False)], [_run("f1", True)])
    assert (slow.status, slow.caught_seeds) == (MISSED, [])


def test_a_run_that_did_not_complete_catches_nothing_and_is_no_valid_control():
    bug = historic.load().get(BUG_7689)
    broken = regressions.verdict_of(bug, [1], [_run("b1", "unknown", status="missing results (OSError)")],
                                    [_run("f1", True)])
    assert (broken.status, broken.caught_seeds) == (ERROR, [])
    uncontrolled = regressions.verdict_of(bug, [1], [_run("b1", False, ("queue: 1 lost",))],
                                          [_run("f1", "unknown", status="missing results (OSError)")])
    assert (uncontrolled.status, uncontrolled.control_valid) == (CONTROL_INVALID, "unknown")


def test_an_unknown_bug_or_a_release_override_is_refused_in_one_line_before_anything_starts(tmp_path):
    bad = tmp_path / "r.yaml"
    bad.write_text(yaml.safe_dump({**yaml.safe_load(FILE.read_text()), "bugs": ["no-such-bug"]}))
    with pytest.raises(CampaignError, match="no historic RocketMQ bug 'no-such-bug'; known: cq-offset"):
        regressions.load(bad)
    store = tmp_path / "store"
    out = CliRunner().invoke(cli, ["teeth", str(bad), "--store", str(store)])
    assert out.exit_code == 3 and "no-such-bug" in out.output and "Traceback" not in out.output
    out = CliRunner().invoke(cli, ["teeth", str(FILE), "--rocketmq-version", "5.5.0", "--store", str(store)])
    assert out.exit_code == 3 and "names each bug's releases itself" in out.output
    assert not store.exists()


def test_dry_run_names_both_releases_per_bug_and_what_an_unreachable_one_needs(tmp_path):
    out = CliRunner().invoke(cli, ["teeth", str(FILE), "--dry-run", "--json", "--store", str(tmp_path / "s")])
    shown = {b["bug"]: b for b in json.loads(out.output)["bugs"]}
    assert out.exit_code == 1   # some catalogued bugs are not reachable here
    assert shown[BUG_7689]["runs"] == ["rmq-controller-3-5.1.4-queue-master-controller-kill-slaves-pause-r1",
                                       "rmq-controller-3-5.1.4-queue-master-controller-kill-slaves-pause-r2",
                                       "rmq-controller-3-5.1.4-queue-master-controller-kill-slaves-pause-r3",
                                       "rmq-controller-3-5.2.0-queue-master-controller-kill-slaves-pause-r1",
                                       "rmq-controller-3-5.2.0-queue-master-controller-kill-slaves-pause-r2",
                                       "rmq-controller-3-5.2.0-queue-master-controller-kill-slaves-pause-r3"]
    assert "controllers on nodes of their own" in shown["confirm-offset-moves-on-an-unrecognised-master"]["needs"]
