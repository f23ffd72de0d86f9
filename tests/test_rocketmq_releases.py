"""Any served RocketMQ 5.x release, chosen per run: which releases and profiles are refused
and why (pure), the fetch script's second call (offline, without Maven or a JDK), the keys
written for each release (javap), the release carried from a campaign cell, a schedule or
`chaos shrink` into the run spec, the class-data-sharing archive in the JVMs' argv, the
registry of historic bugs. A second release fetched and run on real RocketMQ, recorded in its
run and given archives its JVMs map, is shown by tests/test_historic_catch.py (5.4.0, the
control of a historic bug's recipe).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from harness import plan as plan_of_run
from harness import schedule
from harness.campaign.model import Campaign
from harness.campaign.plan import plan, run_spec
from harness.spec import SpecError, build_spec
from sut import systems
from sut.rocketmq import release
from conftest import require

SECOND = "5.1.4"
REPO = Path(__file__).resolve().parents[1]


def test_a_release_maven_central_serves_only_in_part_is_refused_in_one_line_saying_what_is_missing():
    with pytest.raises(release.ReleaseError) as caught:
        release.check_version("5.5.1")
    assert "no rocketmq-namesrv" in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(release.ReleaseError, match="not a release Maven Central serves whole; served releases: 5.1.0"):
        release.check_version("5.9.9")


def test_a_profile_its_release_cannot_run_is_refused_with_the_first_release_that_can():
    jraft, plain = systems.profile("rmq-controller-3-jraft"), systems.profile("rmq-controller-3")
    assert "from 5.2.0" in release.profile_refusal(jraft, "5.1.4")
    assert release.profile_refusal(jraft, "5.2.0") is None
    assert release.profile_refusal(plain, "5.1.0") is None   # before persistent broker ids: the driver reads both
    assert release.profile_refusal(systems.profile("rmq-dledger-3"), "5.1.0") is None


def test_a_run_spec_records_the_pinned_release_unless_given_and_refuses_one_for_a_model_profile(tmp_path):
    base = {"workload": "queue", "faults": ["noop"], "time": 10, "store": tmp_path}
    assert build_spec({**base, "profile": "rmq-controller-3"}).rocketmq_version == release.pinned()
    assert build_spec({**base, "profile": "rmq-controller-3", "rocketmq_version": SECOND}).rocketmq_version == SECOND
    assert build_spec({**base, "profile": "controller-3"}).rocketmq_version is None
    with pytest.raises(SpecError, match="controller-3 runs the model SUT, which has no releases"):
        build_spec({**base, "profile": "controller-3", "rocketmq_version": SECOND})
    with pytest.raises(SpecError, match="JRaft controllers"):
        build_spec({**base, "profile": "rmq-controller-3-jraft", "rocketmq_version": SECOND})


def test_the_release_goes_into_schedule_yaml_and_comes_back_from_it_for_a_replay(tmp_path):
    spec = build_spec({"profile": "rmq-controller-3", "rocketmq_version": SECOND, "workload": "queue",
                       "faults": ["noop"], "time": 10, "store": tmp_path})
    text = schedule.dump(plan_of_run.from_spec(spec))
    assert yaml.safe_load(text)["rocketmq_version"] == SECOND
    assert plan_of_run.spec_values(schedule.parse(text))["rocketmq_version"] == SECOND


def test_a_campaign_cell_names_its_own_release_and_the_others_take_the_campaign_s(tmp_path):
    campaign = Campaign.model_validate({
        "name": "releases", "profiles": [f"rmq-controller-3@{SECOND}", "rmq-dledger-3"], "faults": ["noop"],
        "rocketmq_version": "5.5.0", "seed": 1, "inventory": {"nodes": 4},
        "durations": {"run": 20, "fault": 5, "between": 5, "recovery": 5}})
    specs = {run.profile: run_spec(campaign, run, tmp_path, None) for run in plan(campaign, store=tmp_path).runs}
    assert specs[f"rmq-controller-3@{SECOND}"].profile == "rmq-controller-3"
    assert specs[f"rmq-controller-3@{SECOND}"].rocketmq_version == SECOND
    assert specs["rmq-dledger-3"].rocketmq_version == "5.5.0"
    with pytest.raises(ValueError, match="JRaft controllers"):
        Campaign.model_validate({**campaign.model_dump(), "profiles": [f"rmq-controller-3-jraft@{SECOND}"]})


def test_every_jvm_maps_its_role_s_archive_beside_its_release_only_when_archives_are_on():
    from sut.rocketmq.config import render
    profile = systems.profile("rmq-controller-3")
    hosts, workdirs = [f"10.0.0.{i}" for i in range(1, 5)], [f"/w/n{i}" for i in range(4)]
    for proc in render(profile, hosts, workdirs, "rocketmq-5.3.3-abc", class_archive=True):
        home = f"/w/n{proc.node}/rocketmq/rocketmq-5.3.3-abc"
        assert f"-XX:SharedArchiveFile={home}/cds/{proc.role}.jsa" in proc.argv
    assert not any(a.startswith("-XX:SharedArchiveFile") for p in render(profile, hosts, workdirs, "r")
                   for a in p.argv)


def test_jvms_rendered_before_their_release_is_fetched_point_at_the_directory_it_is_uploaded_to(tmp_path,
                                                                                                 monkeypatch):
    from inventory import Inventory, Node
    from sut.rocketmq.deploy import RocketMQDeployer
    monkeypatch.setattr(release, "REPO", tmp_path)   # no build/: nothing fetched yet
    inventory = Inventory(name="planned", kind="netns",
                          nodes=[Node(name=f"n{i}", host=f"192.0.2.{i}", workdir=f"/w/n{i}") for i in range(1, 5)])
    deployer = RocketMQDeployer(None, inventory, "rmq-controller-3", tmp_path / "run", version=SECOND)
    uploaded_to = f"rocketmq-{SECOND}-{release.stamp(SECOND)[:12]}"
    assert deployer.release == uploaded_to == release.release_id(SECOND)
    for ref in deployer.refs:
        assert any(f"/rocketmq/{uploaded_to}/" in arg for arg in ref.argv), ref.argv


@pytest.mark.jvm
def test_a_fetched_release_is_found_again_offline_and_the_pinned_one_keeps_its_stamp(tmp_path):
    release.ensure(SECOND)
    # The digest the deployer names the nodes' copy by is the one the fetch wrote.
    assert (release.local_dir(SECOND) / ".stamp").read_text().strip() == release.stamp(SECOND)
    # A PATH with the shell tools the stamp check uses and neither Maven nor a JDK.
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("bash", "sed", "sha256sum", "cut", "cat", "dirname"):
        (tools / tool).symlink_to(shutil.which(tool))
    began = time.monotonic()
    out = subprocess.run([str(tools / "bash"), str(release.FETCH), SECOND], capture_output=True, text=True,
                         timeout=30, env={**os.environ, "PATH": str(tools)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == str(release.local_dir(SECOND))
    assert time.monotonic() - began < 5
    pinned = release.local_dir()
    if (pinned / ".stamp").is_file():
        digest = subprocess.run(["sha256sum", str(release.POM)], capture_output=True, text=True).stdout.split()[0]
        assert (pinned / ".stamp").read_text().strip() == digest


# -- the registry of historic bugs -------------------------------------------------------------

def test_every_historic_bug_names_served_releases_known_anomalies_and_a_recipe_both_releases_accept(tmp_path):
    from harness.campaign import historic
    registry = historic.load()
    assert len(registry.bugs) >= 5
    for bug in registry.bugs:
        for version in (bug.buggy_version, bug.fixed_version):
            values = {**bug.recipe.spec_values(version), "store": tmp_path, "seed": 1}
            if bug.reachable:
                assert build_spec(values).rocketmq_version == version
            elif release.profile_refusal(systems.profile(bug.recipe.profile), version):
                assert "refused" in bug.needs


def test_a_registry_entry_with_its_releases_reversed_is_refused_naming_the_field(tmp_path):
    from harness.campaign import historic
    text = historic.REGISTRY.read_text().replace('fixed_version: "5.2.0"', 'fixed_version: "5.1.1"', 1)
    (tmp_path / "bugs.yaml").write_text(text)
    with pytest.raises(historic.RegistryError, match=r"bugs\.0: .*not older than fixed_version 5\.1\.1"):
        historic.load(tmp_path / "bugs.yaml")


# Where each role's keys land: the config objects its startup fills from the file.
CONFIG_CLASSES = {
    "namesrv": ("org.apache.rocketmq.common.namesrv.NamesrvConfig", "org.apache.rocketmq.remoting.netty.NettyServerConfig"),
    "controller": ("org.apache.rocketmq.common.ControllerConfig", "org.apache.rocketmq.common.JraftConfig",
                   "org.apache.rocketmq.remoting.netty.NettyServerConfig"),
    "broker": ("org.apache.rocketmq.common.BrokerConfig", "org.apache.rocketmq.common.BrokerIdentity",
               "org.apache.rocketmq.store.config.MessageStoreConfig", "org.apache.rocketmq.remoting.netty.NettyServerConfig"),
}


@pytest.mark.jvm
@pytest.mark.parametrize("version", ["5.1.0", SECOND, release.pinned()])
def test_every_key_the_deployer_writes_for_a_release_is_a_setting_that_release_has(version):
    import re
    from sut.rocketmq.config import render
    require(shutil.which("javap") is not None, "no javap: the JDK's tools (openjdk-17-jdk-headless)")
    home = release.ensure(version)
    written: dict[str, set[str]] = {role: set() for role in CONFIG_CLASSES}
    for profile in systems.profiles().values():
        if profile.system != "rocketmq" or release.profile_refusal(profile, version):
            continue
        for proc in render(profile, [f"10.0.0.{i}" for i in range(1, 6)], [f"/w/n{i}" for i in range(5)], "r",
                           version=version):
            written[proc.role] |= set(proc.properties)
    assert written["broker"] and written["namesrv"]
    for role, classes in CONFIG_CLASSES.items():
        shown = subprocess.run(["javap", "-cp", f"{home}/lib/*", *classes], capture_output=True, text=True).stdout
        setters = {name[0].lower() + name[1:] for name in re.findall(r"void set(\w+)\(", shown)}
        assert written[role] <= setters, (role, sorted(written[role] - setters))


def test_shrink_runs_its_candidates_on_another_release_only_if_that_release_can_run_the_profile(tmp_path):
    from harness.shrink import original as original_run
    spec = build_spec({"profile": "rmq-controller-3-jraft", "workload": "queue", "faults": ["noop"], "time": 10,
                       "store": tmp_path})
    run = original_run.OriginalRun(run=None, schedule=plan_of_run.from_spec(spec), classes=frozenset({"lost"}),
                                   spec={}, inventory=tmp_path / "inventory.yaml")
    moved = original_run.on_release(run, "5.5.0")
    assert moved.schedule.rocketmq_version == "5.5.0"
    assert plan_of_run.spec_values(moved.schedule)["rocketmq_version"] == "5.5.0"
    with pytest.raises(original_run.ShrinkRefused, match="--rocketmq-version: profile rmq-controller-3-jraft cannot "
                                                          "run on RocketMQ 5.1.4: JRaft"):
        original_run.on_release(run, "5.1.4")


def test_the_campaign_page_names_the_campaign_s_release_and_each_cell_keeps_its_own(tmp_path):
    from reports.campaign import render_campaign
    from support.stores import make_campaign, results
    runs = [{"profile": f"rmq-controller-3@{SECOND}", "fault": "major-kill", "seed": 3, "results": results(True)},
            {"profile": "rmq-controller-3", "fault": "major-kill", "seed": 3, "results": results(True)}]
    campaign = make_campaign(tmp_path, "20260101T000000Z-aaaa-releases", runs, name="releases")
    meta = json.loads((campaign / "campaign.json").read_text())
    (campaign / "campaign.json").write_text(json.dumps({**meta, "settings": {"rocketmq_version": "5.5.0"}}))
    html = render_campaign(campaign).read_text()
    assert 'data-rocketmq-version="5.5.0"' in html
    assert f'data-cell="rmq-controller-3@{SECOND}|queue|major-kill"' in html
