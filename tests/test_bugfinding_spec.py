"""Run defaults that exercise failover: fault windows derive from the profile's failure
detection (sut.systems, the one place for that fact); shorter windows are the user's
choice and `chaos run` says that no failover will be exercised."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from harness.cli import cli
from harness.spec import build_spec
from sut import systems


@pytest.mark.parametrize("profile, timing, detection", [
    ("controller-3", "default", 15.0),     # heartbeat timeout 10 s + scan 5 s
    ("controller-unclean", "fast", 1.5),
    ("dledger-3", "default", 7.0),         # 3 missed 2 s heartbeats + at most a 1 s vote
    ("master-slave-sync", "default", 15.0),  # nameserver: broker timeout 10 s + scan 5 s
])
def test_failure_detection_follows_the_profile_s_mode_and_timing(profile, timing, detection):
    assert systems.failure_detection_s(profile, timing) == pytest.approx(detection)
    assert systems.failover_window_s(profile, timing) > detection


def test_default_fault_windows_and_recovery_outlast_detection_by_a_margin():
    for name in ("controller-3", "dledger-3"):
        spec = build_spec({"profile": name}, check_store=False)
        window = systems.failover_window_s(name)
        assert spec.duration == spec.interval == spec.recovery == pytest.approx(window)
        assert spec.failover_warning() is None
    fast = build_spec({"profile": "controller-3", "timing": "fast", "time": 10}, check_store=False)
    assert fast.duration == pytest.approx(3.5)


def test_a_given_interval_sets_both_quiet_and_fault_and_warns_when_too_short():
    spec = build_spec({"profile": "controller-unclean", "interval": 10}, check_store=False)
    assert (spec.interval, spec.duration) == (10, 10)
    assert "no failover will be exercised" in spec.failover_warning()
    longer = build_spec({"profile": "controller-unclean", "interval": 5, "duration": 25}, check_store=False)
    assert longer.failover_warning() is None


def test_a_run_without_faults_never_warns():
    assert build_spec({"faults": ["noop"], "duration": 1}, check_store=False).failover_warning() is None


def test_dry_run_prints_the_windows_or_the_warning():
    ok = CliRunner().invoke(cli, ["run", "--profile", "dledger-3", "--dry-run", "--seed", "1"])
    assert ok.exit_code == 0 and "fault windows: 10.5s after 10.5s quiet (failure detection 7s)" in ok.output
    short = CliRunner().invoke(cli, ["run", "--profile", "controller-unclean", "--interval", "10",
                                     "--dry-run", "--seed", "1"])
    assert short.exit_code == 0 and "no failover will be exercised" in short.output


def test_time_must_hold_one_quiet_interval_and_one_fault():
    result = CliRunner().invoke(cli, ["run", "--profile", "controller-3", "--time", "30", "--dry-run"])
    assert result.exit_code != 0 and "--fault-duration 22.5s" in result.output
