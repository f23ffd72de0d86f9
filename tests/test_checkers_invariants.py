"""The invariants checker without Spark: the model's events and RocketMQ's own `[BUG]` lines
become anomalies with node, process, time and line; safety ones make the section invalid."""
from __future__ import annotations

import json

import pytest

from checkers import invariants
from support.checker_runs import ORIGIN_UNIX, RunBuilder

STORE_LINES = {
    "rocketmq-consume-queue-order": "2025-11-25 00:00:03 WARN ReputMessageService - [BUG]logic queue order maybe "
                                    "wrong, expectLogicOffset: 40 currentLogicOffset: 60 Topic: chaos QID: 1 Diff: -20",
    "rocketmq-message-size-mismatch": "2025-11-25 00:00:04 ERROR ReputMessageService - [BUG]read total count not "
                                      "equals msg total size. reputFromOffset=1024",
    "rocketmq-mapped-files-damaged": "2025-11-25 00:00:05 ERROR main - [BUG]The mappedFile queue's data is damaged, "
                                     "the adjacent mappedFile's offset don't match. pre file a, cur file b",
    "rocketmq-dispatch-error": "2025-11-25 00:00:06 ERROR ReputMessageService - [BUG]dispatch message to consume "
                               "queue error, COMMITLOG OFFSET: 4096",
    "rocketmq-consume-queue-unwritable": "2025-11-25 00:00:07 ERROR x - [BUG]consume queue can not write, chaos 2",
    "dledger-two-leaders-one-term": "2025-11-25 00:00:08 ERROR y - [n1][BUG] currTerm 4 has leader n2, but received "
                                    "leader n3",
}


def run_with(tmp_path, name="r", origin=ORIGIN_UNIX) -> RunBuilder:
    return RunBuilder(tmp_path, name, {"workload": "queue"}, origin)


@pytest.mark.parametrize("kind", sorted(STORE_LINES))
def test_each_safety_pattern_of_rocketmq_makes_the_run_invalid(tmp_path, kind):
    run = run_with(tmp_path)
    run.node_file("n3", "broker-2", "store.log", "2025-11-25 00:00:01 INFO main - started", STORE_LINES[kind])
    section = invariants.section_of(run.dir)
    assert section["valid"] is False and section["counts"] == {kind: 1}
    [found] = section["anomalies"]
    assert (found["node"], found["process"], found["file"], found["line_number"]) == ("n3", "broker-2", "store.log", 2)
    assert found["line"] == STORE_LINES[kind] and found["safety"] is True
    assert found["time_s"] == float(STORE_LINES[kind][17:19])


def test_every_pattern_names_the_source_that_writes_it_and_the_docs_list_it():
    docs = (invariants.Path(__file__).resolve().parent.parent / "docs" / "invariants.md").read_text()
    for pattern in invariants.PATTERNS:
        assert pattern.source and f"`{pattern.kind}`" in docs


def test_model_events_are_safety_anomalies_at_their_time_and_a_torn_line_is_reported(tmp_path):
    run = run_with(tmp_path)
    event = {"kind": "ha-truncated-below-confirm", "node": "broker-a", "time": ORIGIN_UNIX + 7.25,
             "details": {"consistent_point": 100, "confirm_offset": 300}}
    run.node_file("n1", "broker-0", "invariants.jsonl", json.dumps(event), '{"kind": "raft-comm')
    section = invariants.section_of(run.dir)
    assert section["valid"] is False and section["safety_breaches"] == 1
    breach, torn = section["anomalies"]
    assert (breach["kind"], breach["time_s"], breach["details"]) == ("ha-truncated-below-confirm", 7.25,
                                                                    event["details"])
    assert torn["kind"] == "malformed-invariant-event" and torn["safety"] is False


def test_without_a_history_origin_the_anomaly_keeps_its_unix_time_only(tmp_path):
    run = run_with(tmp_path, origin=None)
    run.node_file("n1", "broker-0", "store.log", STORE_LINES["rocketmq-dispatch-error"])
    [found] = invariants.section_of(run.dir)["anomalies"]
    assert found["time_s"] is None and found["time_unix"] == ORIGIN_UNIX + 6


def test_quiet_logs_give_a_valid_checked_section(tmp_path):
    run = run_with(tmp_path)
    run.node_file("n1", "broker-0", "broker.log", "2025-11-25 00:00:01 INFO main - the broker boots")
    section = invariants.section_of(run.dir)
    assert (section["valid"], section["checked"], section["files"], section["anomalies"]) == (True, True, 1, [])


def test_the_timeline_places_each_breach_at_its_time_in_the_lane_of_the_nearest_operation():
    from reports.history import NS, History
    from reports.timeline import INVARIANT_CATEGORY, anomaly_traces, invariant_entries
    history = History({"index": [0, 1, 2], "process": [4, 7, 9], "f": ["send", "poll", "send"],
                       "type": ["ok", "ok", "info"], "invoke_time": [0, 2 * NS, 5 * NS],
                       "complete_time": [1 * NS, 3 * NS, None], "node": ["n1", "n2", None]})
    section = {"anomalies": [{"kind": "raft-commit-index-back", "safety": True, "node": "n2", "process": "broker-1",
                              "time_s": 3.4, "file": "invariants.jsonl", "line_number": 1, "line": "{...}"},
                             {"kind": "rocketmq-bug-line", "safety": False, "node": "n3", "time_s": None,
                              "line": "[BUG] x"}]}
    placed, unplaced = invariant_entries(history, section)
    assert placed["category"] == INVARIANT_CATEGORY and placed["label"] == "raft-commit-index-back on n2"
    assert placed["ops"] == [{"index": 1, "process": 7, "f": "poll", "node": "n2", "x": 3.4, "type": "ok"}]
    assert ["line", "{...}"] in placed["fields"]
    assert unplaced["ops"] == [] and unplaced["label"].endswith("(not safety)")
    [trace] = anomaly_traces({INVARIANT_CATEGORY: [placed, unplaced]})
    assert (trace["x"], trace["y"]) == ([3.4], [7])
