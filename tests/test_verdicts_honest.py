"""Verdicts never err in the user's favour: unknown is never merged into valid, a
verdict is compared by value and type, missing evidence is unknown, CI never skips."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from checkers import anomalies
from checkers.knossos.api import merge
from checkers.verdict import UNKNOWN, as_verdict, is_verdict, merge_valid
from harness.commands.run import exit_code, verdict_word
from records.results import ResultsJson

ROOT = Path(__file__).resolve().parent.parent


def decoded_parts(text: str) -> list[tuple[int, dict]]:
    return list(enumerate(json.loads(text)))


def test_a_valid_part_then_an_unknown_part_decoded_from_json_merge_to_unknown():
    merged = merge(decoded_parts('[{"valid": true}, {"valid": "unknown", "cause": "timeout"}]'))
    assert merged["valid"] == "unknown" and merged["cause"] == "timeout" and merged["key"] == 1


def test_an_invalid_part_decoded_from_json_beats_an_unknown_one():
    merged = merge(decoded_parts('[{"valid": "unknown", "cause": "timeout"}, {"valid": false}]'))
    assert merged["valid"] is False and merged["key"] == 1


def test_a_part_whose_verdict_is_not_a_verdict_merges_to_unknown():
    merged = merge(decoded_parts('[{"valid": true}, {"valid": 1}]'))
    assert merged["valid"] == "unknown" and "not a verdict" in merged["cause"]


def test_only_true_parts_merge_to_valid():
    assert merge(decoded_parts('[{"valid": true}, {"valid": true}]'))["valid"] is True


def test_verdicts_compare_by_value_and_type_never_by_identity_or_truthiness():
    decoded = json.loads('"unknown"')
    assert is_verdict(decoded, UNKNOWN)
    assert not is_verdict(1, True) and not is_verdict(0, False) and not is_verdict("true", True)
    assert as_verdict(1) == UNKNOWN and as_verdict(None) == UNKNOWN and as_verdict(False) is False
    with pytest.raises(ValueError):
        merge_valid([True, 1])
    assert merge_valid([True, decoded]) == UNKNOWN


def test_the_cli_gives_no_valid_exit_code_for_a_verdict_that_only_looks_true():
    assert [exit_code("complete", v) for v in (True, False, "unknown", 1, 0, None)] == [0, 1, 2, 2, 2, 2]
    assert verdict_word(1) == "unknown" and verdict_word(True) == "valid"


@pytest.mark.parametrize("value", [1, 0, "true", "yes"])
def test_results_json_refuses_a_verdict_that_is_not_true_false_or_unknown(value):
    with pytest.raises(ValidationError):
        ResultsJson.model_validate({"valid": value})


def test_a_queue_section_without_a_complete_durability_audit_is_unknown_with_the_reason():
    totals = {"acknowledged": 10, "lost": 0}
    for audit in (None, anomalies.audit_summary(False, totals)):
        section = anomalies.queue_section(totals, {}, True, audit)
        assert section["valid"] == "unknown"
        assert any("lost_after_consume not checked" in p for p in section["problems"])
    complete = anomalies.queue_section(totals, {}, True, anomalies.audit_summary(True, totals))
    assert complete["valid"] is True and complete["problems"] == []


def test_a_log_section_without_a_complete_audit_names_lost_as_unchecked():
    audit = anomalies.audit_summary(False, {}, anomalies.LOG_AUDITED)
    section = anomalies.queue_section({}, {}, True, audit)
    assert section["valid"] == "unknown" and section["audit"]["unchecked"] == ["lost"]
    assert "lost not checked" in section["problems"][0]


def test_a_missing_audit_still_lets_a_real_loss_make_the_run_invalid():
    section = anomalies.queue_section({"lost": 2}, {}, True, None)
    assert section["valid"] is False


def test_ci_script_sets_ci_itself_before_running_the_tests():
    script = (ROOT / ".ci" / "run").read_text()
    exported = re.search(r"^export CI=true$", script, re.M)
    runs = re.search(r"^bash scripts/test\.sh", script, re.M)
    assert exported and runs and exported.start() < runs.start()


def load_catch_rate():
    import importlib.util
    spec = importlib.util.spec_from_file_location("catch_rate", ROOT / "bench" / "catch_rate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_catch_rate_counts_a_run_that_did_not_complete_as_not_caught_and_prints_both_rates():
    catch_rate = load_catch_rate()
    lost = {"valid": False, "checkers": {"queue": {"valid": False, "counts": {"lost": 3}}}}
    slow = {"valid": False, "checkers": {"queue": {"valid": True, "counts": {"lost": 0}},
                                         "rto": {"valid": False}}}
    tally = catch_rate.tally([1, 2, 3, 4], [1, 2], [lost, slow])
    assert tally == {"attempted": 4, "completed": 2, "caught": 1, "invalid": 2}
    line = catch_rate.rate_line(tally)
    assert "caught 1 of 4 seeds (25%)" in line and "1 of 2 completed runs (50%)" in line
