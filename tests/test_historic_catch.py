"""A historic RocketMQ bug caught on real RocketMQ: #7689's recipe from sut/rocketmq/bugs.yaml,
one seeded run on 5.1.4 (the release that has the bug) and the same seed on 5.2.0 (the first
with the fix), as `chaos teeth campaigns/rocketmq-regressions.yaml --bug ...` runs them, on
one local cluster for both releases. Caught means a safety anomaly on 5.1.4 and a valid run
on 5.2.0; the two checkers' verdicts are read as they are, never relaxed."""
from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from harness.campaign import regressions
from harness.campaign.teeth import CAUGHT
from conftest import skip_unless_root

FILE = Path(__file__).resolve().parent.parent / "campaigns" / "rocketmq-regressions.yaml"
BUG_7689 = "cq-offset-shared-after-master-and-controller-kill"

pytestmark = [pytest.mark.long, pytest.mark.cluster, pytest.mark.root, pytest.mark.spark, pytest.mark.jvm]


def test_7689_is_caught_on_5_1_4_and_its_recipe_is_valid_on_5_2_0(tmp_path):
    skip_unless_root()
    spec = regressions.load(FILE, (BUG_7689,)).model_copy(update={"seeds": 1})
    [verdict] = regressions.run_regressions(spec, FILE, tmp_path / "store", Console(stderr=True),
                                            show_progress=False)
    shown = verdict.as_json()
    assert verdict.status == CAUGHT, shown
    assert shown["control_valid"] is True and shown["caught_in"] == 1, shown
    [buggy] = shown["buggy_runs"]
    assert any("lost" in anomaly or "offset" in anomaly for anomaly in buggy["safety"]), buggy
