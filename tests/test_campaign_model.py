"""The campaign file and its plan: validation with line numbers, seeds, the matrix."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.campaign import CampaignError, derive_seed, load_campaign, plan
from harness.campaign.plan import fault_count, run_spec

REPO = Path(__file__).resolve().parent.parent
GOOD = """\
name: tiny
profiles: [dledger-3, controller-3]
workloads: [queue]
faults: [leader-kill, leader-partition+random-loss]
targets: [brokers]
timing: fast
durations: {run: 20, between: 4, fault: 6, recovery: 5}
repeats: 2
seed: 7
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return path


def test_a_good_file_plans_profiles_times_workloads_times_faults_times_repeats(tmp_path):
    campaign = load_campaign(write(tmp_path, GOOD))
    runs = plan(campaign).runs
    assert len(runs) == 2 * 1 * 2 * 2
    assert runs[0].run_id == "dledger-3-queue-leader-kill-r1"
    assert {r.fault for r in runs} == {"leader-kill", "leader-partition+random-loss"}


def test_both_modes_get_the_same_seed_for_the_same_fault_and_repeat(tmp_path):
    runs = plan(load_campaign(write(tmp_path, GOOD))).runs
    by_profile = {p: [(r.fault, r.repeat, r.seed) for r in runs if r.profile == p] for p in ("dledger-3", "controller-3")}
    assert by_profile["dledger-3"] == by_profile["controller-3"]
    assert len({r.seed for r in runs}) == 4  # but every fault x repeat its own


def test_the_same_file_plans_the_same_runs_and_another_seed_other_runs(tmp_path):
    first = plan(load_campaign(write(tmp_path, GOOD)))
    again = plan(load_campaign(write(tmp_path, GOOD)))
    other = plan(load_campaign(write(tmp_path, GOOD.replace("seed: 7", "seed: 8"))))
    assert first.digest() == again.digest() and [r.seed for r in first.runs] == [r.seed for r in again.runs]
    assert first.digest() != other.digest()
    assert derive_seed(7, "queue", "leader-kill", 1) == first.runs[0].seed


def test_a_combination_overlaps_the_second_fault_inside_the_first_ones_windows(tmp_path):
    campaign = load_campaign(write(tmp_path, GOOD))
    run = next(r for r in plan(campaign).runs if "+" in r.fault)
    spec = run_spec(campaign, run, tmp_path, None)
    assert spec.faults == ("leader-partition",) and spec.overlap == ("random-loss",)
    assert spec.duration == 6 and spec.interval == 4 and spec.time == 20


def test_dry_run_counts_every_fault_window_of_every_run(tmp_path):
    campaign = load_campaign(write(tmp_path, GOOD))
    # 20 s with 4 s quiet + 6 s fault: two windows per run; a combination's overlap counts too.
    assert fault_count(campaign, plan(campaign)) == 8 * 2 + 4 * 2


def test_only_keeps_the_matching_runs_and_refuses_a_pattern_that_matches_none(tmp_path):
    campaign = load_campaign(write(tmp_path, GOOD))
    assert {r.profile for r in plan(campaign, only="controller-3-*").runs} == {"controller-3"}
    with pytest.raises(CampaignError, match="--only nothing: matches no run"):
        plan(campaign, only="nothing")


@pytest.mark.parametrize("change, expected", [
    (("profiles: [dledger-3, controller-3]", "profiles: [dledger-3, dledger-9]"),
     r"c.yaml: profiles\[1\] \(line 2\): unknown profile 'dledger-9'; known: "),
    (("faults: [leader-kill, leader-partition+random-loss]", "faults: [leader-kill, leader-smash]"),
     r"c.yaml: faults\[1\] \(line 4\): .*leader-smash"),
    (("durations: {run: 20, between: 4, fault: 6, recovery: 5}", "durations: {run: 5, between: 4, fault: 6, recovery: 5}"),
     r"c.yaml: durations \(line 7\): .*run 5s holds no fault"),
    (("repeats: 2", "repeats: 0"), r"c.yaml: repeats \(line 8\): Input should be greater than or equal to 1"),
    (("seed: 7", "seed: 7\nsede: 8"), r"c.yaml: sede \(line 10\): unknown field; allowed: name, "),
    (("durations: {run: 20,", "durations: {rn: 20,"), r"c.yaml: durations.rn \(line 7\): unknown field; allowed: run, fault"),
    (("timing: fast", "timing: slow"), r"c.yaml: timing \(line 6\): unknown timing scale 'slow'"),
    (("name: tiny", "name: 'a b/c'"), r"c.yaml: name \(line 1\): String should match pattern"),
])
def test_a_bad_field_is_named_with_its_line_and_what_is_allowed(tmp_path, change, expected):
    with pytest.raises(CampaignError, match=expected):
        load_campaign(write(tmp_path, GOOD.replace(*change)))


def test_a_local_cluster_can_be_containers_but_an_inventory_file_has_no_provider(tmp_path):
    campaign = load_campaign(write(tmp_path, GOOD + "inventory: {nodes: 4, provider: docker}\n"))
    assert campaign.inventory.provider == "docker" and campaign.inventory.nodes == 4
    with pytest.raises(CampaignError, match=r"inventory.provider \(line 10\): Input should be 'netns' or 'docker'"):
        load_campaign(write(tmp_path, GOOD + "inventory: {nodes: 4, provider: vagrant}\n"))
    (tmp_path / "hosts.yaml").write_text("nodes: []\n")
    with pytest.raises(CampaignError, match="provider applies to a local cluster"):
        load_campaign(write(tmp_path, GOOD + "inventory: {file: hosts.yaml, provider: docker}\n"))


def test_broken_yaml_and_missing_files_are_one_line_errors(tmp_path):
    with pytest.raises(CampaignError, match=r"c.yaml \(line 3\): not valid YAML"):
        load_campaign(write(tmp_path, "name: x\nprofiles: [a\nfaults: b: c\n"))
    with pytest.raises(CampaignError, match="cannot read"):
        load_campaign(tmp_path / "missing.yaml")
    with pytest.raises(CampaignError, match=r"inventory.file \(line 2\): nope.yaml does not exist"):
        load_campaign(write(tmp_path, GOOD.replace("name: tiny\n", "name: tiny\ninventory: {file: nope.yaml}\n")))


@pytest.mark.parametrize("name", ["smoke", "nightly", "seed-article", "rocketmq-message-types"])
def test_every_shipped_campaign_file_is_valid(name):
    campaign = load_campaign(REPO / "campaigns" / f"{name}.yaml")
    assert plan(campaign).runs


def test_cells_a_profile_cannot_host_are_skipped_with_the_reason(tmp_path):
    text = GOOD.replace("profiles: [dledger-3, controller-3]", "profiles: [dledger-3, master-slave-sync]") \
               .replace("faults: [leader-kill, leader-partition+random-loss]", "faults: [leader-kill, partition-majorities-ring]") \
               .replace("workloads: [queue]", "workloads: [queue, register]")
    the_plan = plan(load_campaign(write(tmp_path, text)))
    assert {(r.profile, r.workload, r.fault) for r in the_plan.runs} == {
        ("dledger-3", "queue", "leader-kill"), ("dledger-3", "queue", "partition-majorities-ring"),
        ("dledger-3", "register", "leader-kill"), ("dledger-3", "register", "partition-majorities-ring"),
        ("master-slave-sync", "queue", "leader-kill")}
    assert the_plan.skipped == [
        "master-slave-sync x partition-majorities-ring: fault partition-majorities-ring needs at least 3 nodes; "
        "the cluster has 2",
        "master-slave-sync x register: workload register needs a profile with a Raft key-value store "
        "(dledger-3, dledger-5), not 'master-slave-sync'"]


def test_a_local_cluster_too_small_for_a_profile_is_refused_with_both_numbers(tmp_path):
    with pytest.raises(CampaignError, match="inventory.nodes is 3 but profile dledger-3 needs 4 nodes"):
        load_campaign(write(tmp_path, GOOD + "inventory: {nodes: 3}\n"))
