"""A historic RocketMQ bug caught on real RocketMQ, and a second release fetched and started:
#9713's recipe from sut/rocketmq/bugs.yaml, one seeded run on 5.3.3 (the pinned release, which
has the bug) and the same seed on 5.4.0 (the first with the fix), as `chaos teeth
campaigns/rocketmq-regressions.yaml --bug ...` runs them, on one local cluster for both
releases. Caught means a safety anomaly on 5.3.3 and a valid run on 5.4.0; the checkers'
verdicts are read as they are, never relaxed. The 5.4.0 run also shows a release other than the
pinned one fetched, started, recorded in the run and given class-data-sharing archives its
JVMs can map.

#9713 is the catalogued bug whose recipe does not hang on a race: a failed fsync is
acknowledged on every send of the fault window, and the crash drops what was not written
back (docs/rocketmq-bugs.md has each bug's catch rate over seeds)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from harness.campaign import regressions
from harness.campaign.model import InventoryChoice
from harness.campaign.teeth import CAUGHT
from support.rocketmq_deploy import rocketmq_cluster

FILE = Path(__file__).resolve().parent.parent / "campaigns" / "rocketmq-regressions.yaml"
BUG_9713 = "sync-flush-acknowledged-after-failed-force"
BUGGY, FIXED = "5.3.3", "5.4.0"

pytestmark = [pytest.mark.long, pytest.mark.cluster, pytest.mark.root, pytest.mark.spark, pytest.mark.jvm]


@pytest.fixture(scope="module")
def cluster(make_cluster):
    inventory, _ = rocketmq_cluster(make_cluster, FIXED)
    return inventory


def test_9713_is_caught_on_5_3_3_and_its_recipe_is_valid_on_a_fetched_5_4_0_with_its_archives(cluster, tmp_path):
    spec = regressions.load(FILE, (BUG_9713,)).model_copy(
        update={"seeds": 1, "inventory": InventoryChoice(file=cluster.source)})
    [bug] = spec.selected()
    assert (bug.buggy_version, bug.fixed_version) == (BUGGY, FIXED)
    [verdict] = regressions.run_regressions(spec, FILE, tmp_path / "store", Console(stderr=True),
                                            show_progress=False)
    shown = verdict.as_json()
    assert verdict.status == CAUGHT, shown
    assert shown["control_valid"] is True and shown["caught_in"] == 1, shown
    [buggy] = shown["buggy_runs"]
    assert any("lost" in anomaly for anomaly in buggy["safety"]), buggy

    [fixed_run] = [path.parent for path in (tmp_path / "store" / "latest" / "runs").glob("*/run.json")
                   if json.loads(path.read_text())["spec"]["rocketmq_version"] == FIXED]
    record = json.loads((fixed_run / "run.json").read_text())
    assert record["versions"]["rocketmq"] == FIXED and record["valid"] is True, record["versions"]
    assert yaml.safe_load((fixed_run / "schedule.yaml").read_text())["rocketmq_version"] == FIXED
    assert json.loads((fixed_run / "results.json").read_text())["checkers"]["queue"]["counts"]["acknowledged"] > 100
    # The broker's node holds both releases' jars, each with the brokers' class-data-sharing
    # archive made at install, which a JVM with that class path maps (with -Xshare:on a JVM
    # that cannot map it refuses to start).
    homes = sorted(home for node in cluster.nodes for home in (Path(node.workdir) / "rocketmq").glob("rocketmq-*")
                   if (home / "cds" / "broker.jsa").is_file())
    versions = {home.name.split("-")[1] for home in homes}
    assert versions == {BUGGY, FIXED}, homes
    for home in homes:
        version = home.name.split("-")[1]
        assert (home / "lib" / f"rocketmq-broker-{version}.jar").is_file()
        mapped = subprocess.run(["java", "-Xshare:on", f"-XX:SharedArchiveFile={home}/cds/broker.jsa",
                                 "-XX:+UseSerialGC", "-cp", f"{home}/lib/*", "-version"],
                                capture_output=True, text=True, timeout=60)
        assert mapped.returncode == 0, mapped.stderr[-500:]
