"""The pure parts of the checkers: verdicts, fault windows, run specs, sections.

No Spark here: these are the decisions, tested on plain values.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from checkers import linearizable, perf, pipeline, queue, rto
from checkers.context import RunFacts
from checkers.ops import WRITE_FUNCTIONS
from checkers.routes import infer_workload, linearizability_model
from checkers.verdict import crashed, exit_code, guarded, merge_results, merge_valid
from checkers.windows import LONG_MAX, LONG_MIN, FaultEvent, FaultWindow, fault_windows, segments
from records import SCHEMA_VERSION, CheckInputs, OldStoreError, RunJson, StoreFormatError, read_check_inputs
from records.base import parse_model

S = 1_000_000_000


# -- verdicts -------------------------------------------------------------------------------

def test_false_beats_unknown_beats_true():
    assert merge_valid([True, "unknown", False, True]) is False
    assert merge_valid([True, "unknown", True]) == "unknown"
    assert merge_valid([True, True]) is True
    assert merge_valid([]) is True


def test_merge_rejects_what_is_not_a_verdict():
    with pytest.raises(ValueError, match="not a verdict"):
        merge_valid([True, "maybe"])


def test_exit_codes_follow_jepsen():
    assert [exit_code(v) for v in (True, False, "unknown")] == [0, 1, 2]


def test_a_checker_that_raises_becomes_unknown_with_its_error():
    def broken():
        raise ZeroDivisionError("division by zero")

    sections = guarded(("queue", "order"), broken, 2)
    assert sections == [{"queue": {"valid": "unknown", "error": "ZeroDivisionError: division by zero"},
                         "order": {"valid": "unknown", "error": "ZeroDivisionError: division by zero"}}] * 2
    assert merge_results({"stats": {"valid": True}, **sections[0]}) == "unknown"


def test_a_checker_that_answers_for_the_wrong_runs_is_unknown():
    sections = guarded(("rto",), lambda: [{"rto": {"valid": True}}], 2)
    assert [s["rto"]["valid"] for s in sections] == ["unknown", "unknown"]


def test_crash_section_names_the_exception():
    assert crashed(KeyError("x")) == {"valid": "unknown", "error": "KeyError: 'x'"}


# -- operations -----------------------------------------------------------------------------

def test_workload_inferred_from_operation_names():
    assert infer_workload(["send", "poll"]) == "queue"
    assert infer_workload(["append", "read"]) == "log"
    assert infer_workload(["read", "write", "cas"]) == "register"
    assert infer_workload(["read"]) is None


def test_models_per_workload():
    assert linearizability_model("register") == "cas-register"
    assert linearizability_model("log") == "log"
    assert linearizability_model("queue") is None
    assert set(WRITE_FUNCTIONS) == {"send", "append", "write", "cas", "put", "enqueue"}


# -- fault windows --------------------------------------------------------------------------

def start(fault, t, targets=("n1",), order=0):
    return FaultEvent(fault, "start", t, {"phase": "start", "targets": list(targets)}, order)


def stop(fault, t, targets=("n1",), order=0):
    return FaultEvent(fault, "stop", t, {"phase": "stop", "targets": list(targets)}, order)


def test_starts_pair_with_stops_of_the_same_fault_and_targets():
    windows, problems = fault_windows([
        start("kill", 1 * S, ["n1"]), start("kill", 2 * S, ["n2"]),
        stop("kill", 3 * S, ["n2"]), stop("kill", 4 * S, ["n1"])])
    assert problems == []
    assert [(w.targets, w.start, w.stop) for w in windows] == [(["n1"], S, 4 * S), (["n2"], 2 * S, 3 * S)]


def test_stop_without_targets_closes_the_oldest_open_window():
    windows, _ = fault_windows([start("pause", 1 * S, ["n1"]), start("pause", 2 * S, ["n2"]),
                                stop("pause", 3 * S, [])])
    assert [(w.start, w.stop) for w in windows] == [(S, 3 * S), (2 * S, None)]


def test_fault_never_stopped_stays_open_and_stray_stop_is_a_problem():
    windows, problems = fault_windows([stop("loss", 1 * S), start("kill", 2 * S)])
    assert [(w.fault, w.stop) for w in windows] == [("kill", None)]
    assert problems == ["stop of loss at 1.000s has no matching start"]


def test_window_details_keep_the_grudge():
    event = FaultEvent("partition", "start", 0, {"phase": "start", "targets": ["n1"],
                                                 "grudge": {"n1": ["n2"]}})
    windows, _ = fault_windows([event])
    assert windows[0].details == {"grudge": {"n1": ["n2"]}}


def test_segments_cover_the_timeline_with_overlapping_windows():
    a = FaultWindow(0, "kill", 10, 30, [], {})
    b = FaultWindow(1, "partition", 20, None, [], {})
    assert segments([a, b]) == [(LONG_MIN, 10, []), (10, 20, [0]), (20, 30, [0, 1]), (30, LONG_MAX, [1])]
    assert segments([]) == [(LONG_MIN, LONG_MAX, [])]


# -- run specs --------------------------------------------------------------------------------

def test_check_inputs_are_read_from_run_json_checks(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps(RunJson(checks={
        "workload": "queue", "ordered": True, "seed": 5, "rto_threshold_s": 2, "min_availability": 0.5}).as_json()))
    spec = read_check_inputs(tmp_path)
    assert (spec.workload, spec.ordered, spec.seed) == ("queue", True, 5)
    assert (spec.rto_threshold_s, spec.min_availability) == (2.0, 0.5)


def test_spec_errors_name_the_file_and_field(tmp_path):
    with pytest.raises(StoreFormatError, match=r"run.json: `checks.rto_threshold_s`: .*number.*got 'fast'"):
        parse_model(RunJson, {"schema_version": SCHEMA_VERSION, "checks": {"rto_threshold_s": "fast"}}, "run.json")
    with pytest.raises(StoreFormatError, match="delivery"):
        parse_model(RunJson, {"schema_version": SCHEMA_VERSION, "checks": {"delivery": "at-most-once"}}, "run.json")
    (tmp_path / "run.json").write_text("[1,")
    with pytest.raises(StoreFormatError, match=f"{tmp_path / 'run.json'}: not readable JSON"):
        read_check_inputs(tmp_path)


def test_a_run_json_of_an_older_version_is_refused_in_one_line(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"workload": "queue", "thresholds": {"rto_threshold_s": 2}}))
    with pytest.raises(OldStoreError, match=r"run.json: written by an older rocketmq-chaos \(no schema_version\)"):
        read_check_inputs(tmp_path)


def test_missing_run_json_gives_defaults(tmp_path):
    assert read_check_inputs(tmp_path) == CheckInputs()
    assert CheckInputs().tolerates_duplicates
    assert not CheckInputs(delivery="exactly-once").tolerates_duplicates


# -- queue and order sections ---------------------------------------------------------------------

TOTALS = dict.fromkeys(("messages", "acknowledged", "send_attempts", "retried", "consumed_ids",
                        "consumptions", "lost", "duplicated", "unexpected", "recovered_info",
                        "recovered_fail", "sends_without_id", "unreadable_polls", "items_without_id"), 0)


@pytest.mark.parametrize("counts, tolerant, valid, problems", [
    ({}, True, True, 0),
    ({"lost": 1}, True, False, 1),
    ({"unexpected": 2}, True, False, 1),
    ({"recovered_info": 3}, True, True, 0),
    ({"recovered_fail": 1}, True, False, 1),
    ({"duplicated": 1}, True, True, 0),
    ({"duplicated": 1}, False, False, 1),
    ({"unreadable_polls": 1}, True, "unknown", 1),
    ({"unreadable_polls": 1, "lost": 1}, True, False, 2),
])
def test_queue_verdict_from_counts(counts, tolerant, valid, problems):
    section = queue.queue_section({**TOTALS, **counts}, {}, tolerant, {"complete": True})
    assert section["valid"] == valid
    assert len(section["problems"]) == problems


def test_order_section_only_judges_ordered_runs():
    assert queue.order_section(False, 3, 1, [])["valid"] is True
    assert queue.order_section(True, 0, 2, [])["valid"] is True
    assert queue.order_section(True, 1, 2, [{"id": "m1"}])["valid"] is False


# -- rto ---------------------------------------------------------------------------------------

WINDOW = FaultWindow(0, "kill", 10 * S, 20 * S, ["n1"], {})


def test_window_without_failed_writes_has_no_outage():
    # a 10 s window has 100 buckets of 100 ms; every one saw a successful write
    stats = {"writes": 5, "ok_writes": 5, "outage_from": None, "ok_buckets": 100}
    entry = rto.window_report(WINDOW, stats, None, 30 * S, 1.0)
    assert (entry["unavailable_s"], entry["recovered"], entry["availability"]) == (0.0, True, 1.0)
    assert entry["availability_attempts"] == 1.0


def test_window_outage_until_the_first_success():
    stats = {"writes": 4, "ok_writes": 1, "outage_from": 11 * S, "ok_buckets": 20}
    entry = rto.window_report(WINDOW, stats, 13 * S, 30 * S, 1.5)
    assert entry["unavailable_s"] == 2.0
    assert entry["over_threshold"] is True
    # availability over time (buckets with a success) and the attempt ratio, apart
    assert (entry["availability"], entry["availability_attempts"]) == (0.2, 0.25)


def test_window_without_success_after_the_outage_is_not_recovered():
    entry = rto.window_report(WINDOW, {"writes": 3, "ok_writes": 0, "outage_from": 12 * S}, None, 30 * S, None)
    assert entry["recovered"] is False
    assert entry["unavailable_s"] == 18.0


def facts(**spec) -> RunFacts:
    return RunFacts(index=0, run_dir=Path("."), spec=CheckInputs(**spec), windows=[WINDOW])


def test_rto_section_fails_on_low_availability_in_faults():
    entry = rto.window_report(WINDOW, {"writes": 4, "ok_writes": 1, "outage_from": None}, None, 30 * S, None)
    avail = {"in_faults": {"writes": 4, "ok": 1}, "outside_faults": {"writes": 10, "ok": 10}}
    assert rto.rto_section(facts(), [entry], avail)["valid"] is True
    section = rto.rto_section(facts(min_availability=0.5), [entry], avail)
    assert section["valid"] is False
    assert section["problems"] == ["availability during faults 0.250 is under 0.5"]


def _counts(run, in_fault, ok, second, node, writes):
    return {"run": run, "in_fault": in_fault, "ok": ok, "second": second, "node": node, "writes": writes}


def test_write_counts_give_availability_per_side():
    counts = [_counts(0, True, True, 3, "n1", 4), _counts(0, True, False, None, None, 6),
              _counts(0, False, True, 1, "n1", 5), _counts(0, False, True, 2, "n2", 5),
              _counts(1, False, False, None, None, 2)]
    assert rto.availability(counts) == {
        0: {"in_faults": {"writes": 10, "ok": 4}, "outside_faults": {"writes": 10, "ok": 10}},
        1: {"outside_faults": {"writes": 2, "ok": 0}}}


def test_failovers_follow_the_node_serving_most_writes_per_second():
    counts = [_counts(0, False, True, 0, "n1", 9),
              _counts(0, False, True, 1, "n1", 2), _counts(0, True, True, 1, "n2", 2),
              _counts(0, True, True, 1, "n2", 1),  # n2 served 3 in second 1, over both sides
              _counts(0, False, True, 2, "n1", 3), _counts(0, False, True, 2, "n3", 3),  # tie: n3
              _counts(0, True, False, None, None, 50)]
    found = rto.failovers(counts)[0]
    assert found["failovers"] == 2
    assert [(m["node"], m["from_s"]) for m in found["masters"]] == [("n1", 0.0), ("n2", 1.0), ("n3", 2.0)]


def test_rto_without_any_write_is_unknown():
    entry = rto.window_report(WINDOW, None, None, 30 * S, None)
    assert rto.rto_section(facts(), [entry], {})["valid"] == "unknown"


# -- perf ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("seconds, width", [(0, 1), (299, 1), (301, 2), (1500, 5), (10 * 3600, 120),
                                            (400 * 3600, 7200)])
def test_bucket_width_keeps_series_short(seconds, width):
    assert perf.bucket_seconds(seconds * S) == width
    assert seconds / width <= perf.MAX_BUCKETS


# -- linearizability plumbing ---------------------------------------------------------------------

def op(index, process, f, start, end, type="ok", value=None, result=None, key="x"):
    return {"run": 0, "key": key, "index": index, "process": process, "f": f, "type": type,
            "invoke_time": start, "complete_time": end, "invoke_value": json.dumps(value),
            "value": None if result is None else json.dumps(result)}


def test_key_history_orders_events_by_time_invokes_first_on_ties():
    events = linearizable.key_history([
        op(0, 1, "write", 0, 10, value=1, result=1),
        op(1, 2, "read", 10, 20, result=1),
        op(2, 3, "write", 15, None, "info", value=2)])
    assert [(e["process"], e["type"], e["time"]) for e in events] == [
        (1, "invoke", 0), (2, "invoke", 10), (1, "ok", 10), (3, "invoke", 15), (2, "ok", 20)]
    assert events[0]["value"] == 1 and events[1]["value"] is None


def test_partition_checks_each_key_alone_and_survives_errors():
    seen = []

    def fake(model, history, time_limit):
        seen.append((model, len(history), time_limit))
        if history[0]["process"] == 9:
            raise ValueError("bad history")
        return {"valid": True}

    rows = [op(0, 1, "write", 0, 5, value=1, result=1, key="a"),
            op(1, 2, "read", 6, 9, result=1, key="a"),
            op(2, 9, "write", 0, 5, value=1, result=1, key="b")]
    out = list(linearizable.check_partition(iter(rows), {0: "cas-register"}, {0: 3.0}, fake))
    assert seen == [("cas-register", 4, 3.0), ("cas-register", 2, 3.0)]
    assert [(run, key, json.loads(v)["valid"]) for run, key, v in out] == [
        (0, "a", True), (0, "b", "unknown")]
    assert json.loads(out[1][2])["error"] == "ValueError: bad history"


def test_linearizable_section_merges_keys():
    section = linearizable.linearizable_section("cas-register", 5.0, [
        ("a", {"valid": True}), ("b", {"valid": "unknown", "cause": "timeout"}),
        ("c", {"valid": False, "op": {"f": "read"}, "key": None})])
    assert section["valid"] is False
    assert section["counts"] == {"valid": 1, "invalid": 1, "unknown": 1}
    assert section["failures"] == [{"valid": False, "op": {"f": "read"}, "key": "c"}]
    assert section["unknown"] == [{"key": "b", "cause": "timeout", "error": None}]
    assert section["problems"] == ["key c: cannot linearize None read null by process None",
                                   "key b: unknown (timeout)"]


def test_missing_engine_makes_linearizable_unknown_with_the_reason(monkeypatch):
    monkeypatch.setitem(sys.modules, "checkers.knossos", None)  # as if not installed
    problem = linearizable.engine_problem()
    assert problem.startswith("linearizability engine not available: ")

    class Ctx:  # the checker must not touch Spark when it cannot check anything
        runs = [RunFacts(index=0, run_dir=Path("."), spec=CheckInputs(workload="register")),
                RunFacts(index=1, run_dir=Path("."), spec=CheckInputs(workload="queue"))]

    sections = pipeline.checker_sections(linearizable.LinearizableChecker(), Ctx())
    assert sections[0]["linearizable"] == {"valid": "unknown", "checked": False, "model": "cas-register",
                                           "reason": problem, "problems": [problem]}
    assert sections[1]["linearizable"]["valid"] is True


def test_unknown_workload_has_no_linearizability_verdict():
    class Ctx:
        runs = [RunFacts(index=0, run_dir=Path("."), spec=CheckInputs(workload="bank"))]

    section = pipeline.checker_sections(linearizable.LinearizableChecker(), Ctx())[0]["linearizable"]
    assert section["valid"] == "unknown"
    assert section["reason"] == "no linearizability model for workload 'bank'"


# -- reconstruction ----------------------------------------------------------------------

def test_index_plan_deals_seconds_in_order_and_counts_each_run_from_zero():
    from checkers.reconstruct import index_plan

    buckets = [(0, 0, 2), (0, 1, 2), (0, 2, 4), (1, 0, 4), (1, 5, 4)]  # (run, second, operations)
    plan = index_plan(buckets, 4)
    assert [part for _, _, part, _ in plan] == [0, 0, 1, 2, 3]   # about 4 operations per part
    # offset: the run's operations before the second, less the part's rows before it
    assert [offset for *_, offset in plan] == [0, 0, 4, 0, 4]
    assert [p for _, _, p, _ in index_plan(buckets, 1)] == [0] * 5
    assert index_plan([], 3) == []


def test_index_plan_offsets_number_each_run_from_zero_within_a_shared_part():
    """A part's rows are sorted by (run, invoke time): an index is the row's position in
    its part plus its second's offset."""
    from checkers.reconstruct import index_plan

    buckets = [(0, 0, 3), (1, 0, 2), (1, 1, 2), (2, 7, 1)]
    plan = index_plan(buckets, 1)
    positions, indexed = 0, []
    for (run, _, _, offset), (_, _, count) in zip(plan, buckets):
        indexed += [(run, positions + i + offset) for i in range(count)]
        positions += count
    assert indexed == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (1, 3), (2, 0)]


# -- the driver JVM's class archive ---------------------------------------------------------

def test_the_class_archive_is_named_after_the_jdk_that_runs_spark(tmp_path, monkeypatch):
    """A JVM ignores an archive another JDK wrote: after a JDK upgrade the archive's
    name changes, so the set-up script builds one for the new JDK."""
    from checkers.spark import session

    jdk = tmp_path / "jdk"
    jdk.mkdir()
    monkeypatch.setenv("JAVA_HOME", str(jdk))
    assert session.java_version() == "unknown"          # no release file
    (jdk / "release").write_text('IMPLEMENTOR="x"\nJAVA_VERSION="17.0.15"\nJAVA_VERSION_DATE="2025-04-15"\n')
    assert session.java_version() == "17.0.15"
    old = session.class_archive()
    (jdk / "release").write_text('JAVA_VERSION="21.0.2 beta/x"\n')
    assert session.java_version() == "21.0.2_beta_x"    # safe in a file name
    assert session.class_archive() != old and session.class_archive().parent == old.parent
    assert old.name.endswith("-java-17.0.15.jsa")


def test_without_java_home_the_jdk_is_the_one_on_path(tmp_path, monkeypatch):
    from checkers.spark import session

    jdk = tmp_path / "jdk"
    (jdk / "bin").mkdir(parents=True)
    java = jdk / "bin" / "java"
    java.write_text("#!/bin/sh\n")
    java.chmod(0o755)
    (jdk / "release").write_text('JAVA_VERSION="11.0.1"\n')
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(jdk / "bin"))
    assert session.java_version() == "11.0.1"
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert session.java_version() == "unknown"
