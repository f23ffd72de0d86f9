"""Gates decide a campaign's exit code: each one can fail, and says why."""
from __future__ import annotations

from harness.campaign.gates import evaluate, families
from harness.campaign.model import Gates
from reports.campaign import RunRow
from support.stores import PROFILES


def row(profile: str, fault: str = "leader-kill", valid=True, lost=0, rto=(1.0,), status="complete", error=None,
        repeat=1) -> RunRow:
    return RunRow(f"{profile}-{fault}-r{repeat}", profile, "queue", fault, repeat, 1, status, valid, error=error,
                  lost=lost, rto=list(rto))


def by_name(results):
    return {g.name: g for g in results}


def test_a_campaign_that_catches_its_unsafe_profile_and_loses_nothing_elsewhere_passes_every_gate():
    runs = [row("dledger-3"), row("controller-3"), row("controller-unclean", valid=False, lost=12)]
    gates = by_name(evaluate(Gates(rto_p99_s=5), runs, PROFILES))
    assert all(g.passed for g in gates.values()), gates
    assert "controller-unclean invalid in 1 of 1" in gates["unsafe-found"].detail


def test_a_lost_message_on_a_safe_profile_fails_the_gate_and_names_the_run():
    gates = by_name(evaluate(Gates(), [row("controller-3", valid=False, lost=3)], PROFILES))
    assert not gates["no-lost-on-safe"].passed and "controller-3-leader-kill-r1: 3 lost" in gates["no-lost-on-safe"].detail


def test_an_unsafe_profile_that_passes_every_exercising_run_means_the_campaign_lost_its_teeth():
    gates = by_name(evaluate(Gates(), [row("controller-unclean", valid=True)], PROFILES))
    assert not gates["unsafe-found"].passed and "lost its teeth" in gates["unsafe-found"].detail


def test_an_unsafe_profile_never_run_under_its_fault_families_fails_the_gate_too():
    gates = by_name(evaluate(Gates(), [row("controller-unclean", fault="random-loss", valid=True)], PROFILES))
    assert not gates["unsafe-found"].passed and "never ran under" in gates["unsafe-found"].detail


def test_a_profile_unsafe_only_under_crash_must_still_lose_nothing_under_kill():
    profiles = {**PROFILES, "master-slave-async": {"mode": "master-slave", "expected_safe": False,
                                                   "unsafe_under": ["crash"]}}
    runs = [row("master-slave-async", fault="leader-kill", valid=False, lost=2),
            row("master-slave-async", fault="leader-crash", valid=False, lost=5)]
    gates = by_name(evaluate(Gates(), runs, profiles))
    assert not gates["no-lost-on-safe"].passed
    assert "master-slave-async-leader-kill-r1: 2 lost" in gates["no-lost-on-safe"].detail
    assert "leader-crash" not in gates["no-lost-on-safe"].detail
    assert gates["unsafe-found"].passed and "invalid in 1 of 1" in gates["unsafe-found"].detail


def test_a_campaign_without_unsafe_profiles_passes_the_unsafe_gate_and_says_so():
    gates = by_name(evaluate(Gates(), [row("dledger-3")], PROFILES))
    assert gates["unsafe-found"].passed and "no expected-unsafe profile" in gates["unsafe-found"].detail


def test_rto_p99_over_the_bound_on_a_safe_profile_fails_but_an_unsafe_profiles_rto_is_not_held_to_it():
    runs = [row("dledger-3", rto=[1.0, 2.0, 9.0]), row("controller-unclean", valid=False, lost=1, rto=[50.0])]
    gate = by_name(evaluate(Gates(rto_p99_s=5), runs, PROFILES))["rto-p99"]
    assert not gate.passed and "dledger-3 x leader-kill" in gate.detail and "unclean" not in gate.detail


def test_unknown_verdicts_and_runs_in_error_fail_their_gates_with_the_reason():
    runs = [row("dledger-3", valid="unknown"), row("controller-3", status="error", valid=None,
                                                   error="node n2 unreachable")]
    gates = by_name(evaluate(Gates(), runs, PROFILES))
    assert not gates["no-unknown"].passed and "dledger-3" in gates["no-unknown"].detail
    assert not gates["no-error"].passed and "node n2 unreachable" in gates["no-error"].detail


def test_switched_off_gates_are_not_evaluated():
    gates = by_name(evaluate(Gates(no_unknown=False, no_error=False), [row("dledger-3", valid="unknown")], PROFILES))
    assert set(gates) == {"safe-valid", "no-lost-on-safe", "unsafe-found"}


def test_fault_families_come_from_every_part_of_a_combination():
    assert families("leader-kill+random-partition") == {"kill", "partition"}
    assert families("random-loss:probability=0.3") == {"loss"}
    assert families("noop") == set()
