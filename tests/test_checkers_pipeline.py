"""The Spark checker pipeline on constructed histories with known answers.

All scenario runs are written into one store and checked by ONE check_runs
call (one Spark session, shared jobs): that is itself the test that many runs
are checked at once, and it keeps Spark's start-up and job overhead to a
minimum. Each test then reads its own run's results.json and checked/ tables.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from checkers.pipeline import check_runs, find_runs
from checkers.spark.session import get_spark
from support.checker_runs import MS, ROOT, SCENARIOS, RunBuilder, queue_all, queue_duplicates

pytestmark = [pytest.mark.spark, pytest.mark.jvm]


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory):
    """One small local Spark session for all checker tests (Spark's log goes to a file)."""
    log = tmp_path_factory.mktemp("spark") / "spark.log"
    return get_spark("local[2]", {"spark.sql.shuffle.partitions": "2",
                                  "spark.default.parallelism": "2"}, log)


@pytest.fixture(scope="session")
def checked(spark, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """All scenarios checked together: run name -> {"result", "dir"}. The store's path has
    characters that Spark's file URIs escape (space, %) or keep (+)."""
    store = tmp_path_factory.mktemp("store") / "campaign 1+%"
    for scenario in SCENARIOS:
        scenario(store)
    runs = find_runs([store])
    results = check_runs(runs)
    return {run.name: {"result": result, "dir": run} for run, result in zip(runs, results)}


def result(checked: dict[str, Any], name: str) -> dict[str, Any]:
    return checked[name]["result"]


def history_rows(checked: dict[str, Any], name: str) -> list[dict[str, Any]]:
    table = pq.read_table(checked[name]["dir"] / "checked" / "history.parquet")
    return sorted(table.to_pylist(), key=lambda r: r["index"])


# -- many runs at once ------------------------------------------------------------------

def test_one_check_gives_every_run_its_own_results_and_history(checked):
    assert len(checked) == len(SCENARIOS)
    for name, entry in checked.items():
        on_disk = json.loads((entry["dir"] / "results.json").read_text())
        assert on_disk["valid"] == entry["result"]["valid"]
        assert on_disk["run"] == name
        assert len(history_rows(checked, name)) == entry["result"]["checkers"]["stats"]["operations"]
    assert len(history_rows(checked, "queue-all")) == 10
    assert len(history_rows(checked, "log-good")) == 2


def test_top_verdict_merges_false_over_unknown_over_true(checked):
    assert result(checked, "queue-all")["valid"] is False
    assert result(checked, "dup-at-least-once")["valid"] is True
    assert result(checked, "malformed")["valid"] == "unknown"
    assert result(checked, "empty")["valid"] == "unknown"


# -- queue ---------------------------------------------------------------------------------

def test_queue_checker_finds_every_category(checked):
    queue = result(checked, "queue-all")["checkers"]["queue"]
    counts = queue["counts"]
    assert queue["valid"] is False
    assert (counts["lost"], counts["duplicated"], counts["unexpected"]) == (1, 1, 1)
    assert (counts["recovered_info"], counts["recovered_fail"]) == (1, 1)
    assert [m["id"] for m in queue["lost"]] == ["m2"]
    assert queue["lost"][0]["first_send_s"] == pytest.approx(0.02)
    assert [(m["id"], m["consumed"]) for m in queue["duplicated"]] == [("m3", 2)]
    assert [m["id"] for m in queue["unexpected"]] == ["m4"]
    assert sorted((m["id"], m["send_outcome"]) for m in queue["recovered"]) == [("m5", "info"), ("m6", "fail")]
    published = pq.read_table(checked["queue-all"]["dir"] / "checked" / "queue.parquet").to_pylist()
    assert sorted((r["category"], r["id"]) for r in published) == [
        ("duplicated", "m3"), ("lost", "m2"), ("recovered", "m5"), ("recovered", "m6"), ("unexpected", "m4")]


def test_queue_retries_of_one_message_id_count_once(checked):
    counts = result(checked, "queue-all")["checkers"]["queue"]["counts"]
    assert counts["messages"] == 7          # m1 m2 m3 m5 m6 m7 m8
    assert counts["send_attempts"] == 8
    assert counts["retried"] == 1
    assert counts["acknowledged"] == 4       # m1 m2 m3 m7


def test_duplicates_fail_only_runs_that_promise_exactly_once(checked):
    lenient = result(checked, "dup-at-least-once")["checkers"]["queue"]
    strict = result(checked, "dup-exactly-once")["checkers"]["queue"]
    assert lenient["counts"]["duplicated"] == strict["counts"]["duplicated"] == 1
    assert [m["id"] for m in lenient["duplicated"]] == ["2"]
    assert lenient["valid"] is True
    assert strict["valid"] is False


def test_order_violation_is_reported_apart_from_loss(checked):
    checkers = result(checked, "ordered")["checkers"]
    order = checkers["order"]
    assert order["checked"] is True
    assert order["valid"] is False
    assert order["violations"] == 1
    assert order["keys"] == 2
    assert [(e["key"], e["id"], e["consumed_after"]) for e in order["examples"]] == [("q0", "m1", "m2")]
    assert [m["id"] for m in checkers["queue"]["lost"]] == ["m6"]


def test_order_is_not_judged_outside_ordered_mode(checked):
    order = result(checked, "unordered")["checkers"]["order"]
    assert order == {"valid": True, "checked": False,
                     "reason": "not an ordered run (run.json has no `ordered: true`)"}


# -- rto -----------------------------------------------------------------------------------

def windows_of(checked, name):
    return {w["id"]: w for w in result(checked, name)["checkers"]["rto"]["windows"]}


def test_rto_measures_each_of_overlapping_windows(checked):
    windows = windows_of(checked, "rto-faults")
    a, b = windows[0], windows[1]
    assert (a["fault"], a["start_s"], a["stop_s"]) == ("random-kill", 1.0, 3.0)
    assert a["outage_from_s"] == pytest.approx(1.2)
    assert a["recovered_at_s"] == pytest.approx(2.05)
    assert a["unavailable_s"] == pytest.approx(0.85)
    assert b["targets"] == ["n2", "n3"]
    assert b["outage_from_s"] == pytest.approx(1.5)     # the write in flight counts from B's start
    assert b["unavailable_s"] == pytest.approx(0.55)


def test_rto_window_that_never_recovers_fails_the_run(checked):
    rto = result(checked, "rto-faults")["checkers"]["rto"]
    c = windows_of(checked, "rto-faults")[2]
    assert c["stop_s"] is None
    assert c["recovered"] is False
    assert c["unavailable_s"] == pytest.approx(0.85)     # from 5.1 s to the end of the run
    assert rto["not_recovered"] == [2]
    assert rto["valid"] is False


def test_rto_threshold_comes_from_the_run_spec(checked):
    rto = result(checked, "rto-faults")["checkers"]["rto"]
    windows = windows_of(checked, "rto-faults")
    assert rto["threshold_s"] == 0.7
    assert windows[0]["over_threshold"] is True
    assert windows[1]["over_threshold"] is False
    assert any("over the 0.7s threshold" in p for p in rto["problems"])


def test_availability_inside_and_outside_fault_windows(checked):
    rto = result(checked, "rto-faults")["checkers"]["rto"]
    a = windows_of(checked, "rto-faults")[0]
    assert (a["writes"], a["ok_writes"]) == (20, 12)
    assert a["availability_attempts"] == pytest.approx(0.6)
    assert a["availability"] == pytest.approx(12 / 20)   # 100 ms buckets with a successful write
    outside = rto["availability"]["outside_faults"]
    assert (outside["writes"], outside["ok"]) == (20, 20)     # before A and after B
    inside = rto["availability"]["in_faults"]
    assert inside["writes"] == 20 + 10 + 9             # A, then B alone, then C
    assert inside["ok"] == 12 + 10


def test_cas_mismatch_is_an_answer_and_recovery_within_threshold_is_valid(checked):
    rto = result(checked, "rto-register")["checkers"]["rto"]
    window = rto["windows"][0]
    assert window["outage_from_s"] == pytest.approx(0.2)
    assert window["unavailable_s"] == pytest.approx(0.12)
    assert rto["valid"] is True


# -- reconstruction -------------------------------------------------------------------------

def test_dangling_invocations_are_closed_as_info(checked):
    rows = {json.loads(r["invoke_value"])["id"]: r for r in history_rows(checked, "dangling")
            if r["f"] == "send"}
    m2 = rows["m2"]
    assert (m2["type"], m2["dangling"], m2["complete_time"]) == ("info", True, None)
    assert m2["error"] == "no completion in the history"
    assert rows["m4"]["type"] == "ok" and rows["m4"]["dangling"] is False
    stats = result(checked, "dangling")["checkers"]["stats"]
    assert stats["dangling"] == 2
    assert result(checked, "dangling")["checkers"]["queue"]["valid"] is True


def test_invoke_while_another_is_pending_is_reported_with_its_line(checked):
    malformed = result(checked, "dangling")["checkers"]["stats"]["malformed"]
    assert malformed["examples"] == [{
        "file": "history/w2.jsonl", "line": 1,
        "reason": "invoke of process 2 never completed before its next invoke",
        "text": '{"process": 2, "type": "invoke", "f": "send", "key": "q0", "value": {"id": "m3"}, '
                '"time": 5000000}'}]


def test_malformed_lines_are_reported_with_file_line_and_reason(checked):
    malformed = result(checked, "malformed")["checkers"]["stats"]["malformed"]
    found = [(m["file"], m["line"], m["reason"]) for m in malformed["examples"]]
    assert found == [
        ("history/w1.jsonl", 3, "not valid JSON (truncated or garbled line?)"),
        ("history/w1.jsonl", 4, "not valid JSON (truncated or garbled line?)"),
        ("history/w1.jsonl", 5, "empty line"),
        ("history/w1.jsonl", 6, '`process` must be an integer or "nemesis"'),
        ("history/w1.jsonl", 7, "`type` must be one of invoke, ok, fail, info"),
        ("history/w1.jsonl", 8, "`time` must be a non-negative integer (ns since run start)"),
        ("nemesis.jsonl", 1, 'nemesis event needs value.phase "start" or "stop"'),
    ]
    assert malformed["count"] == 7
    table = pq.read_table(checked["malformed"]["dir"] / "checked" / "malformed.parquet")
    assert table.num_rows == 7


def test_malformed_lines_leave_the_rest_checked_and_the_verdict_unknown(checked):
    checkers = result(checked, "malformed")["checkers"]
    assert checkers["stats"]["operations"] == 5     # 3 and the audit's 2
    assert checkers["stats"]["valid"] == "unknown"
    assert checkers["queue"]["valid"] is True
    assert checkers["queue"]["counts"]["consumed_ids"] == 2


def test_history_is_indexed_by_time_and_tagged_with_fault_windows(checked):
    rows = history_rows(checked, "rto-faults")
    assert [r["index"] for r in rows] == list(range(len(rows)))
    assert [r["invoke_time"] for r in rows] == sorted(r["invoke_time"] for r in rows)
    by_time = {r["invoke_time"] // MS: r for r in rows}
    assert by_time[500]["faults"] == []
    assert by_time[1200]["faults"] == [0]
    assert by_time[1600]["faults"] == [0, 1]
    assert by_time[3500]["faults"] == [1]
    assert by_time[5500]["faults"] == [2]
    faults = pq.read_table(checked["rto-faults"]["dir"] / "checked" / "faults.parquet").to_pylist()
    assert [(f["fault"], f["stop"]) for f in faults] == [
        ("random-kill", 3000 * MS), ("random-partition", 4000 * MS), ("random-kill", None)]


# -- perf, stats ------------------------------------------------------------------------------

def test_perf_gives_latency_quantiles_and_series_per_f_and_outcome(checked):
    perf = result(checked, "rto-faults")["checkers"]["perf"]
    latency = {(e["f"], e["type"]): e for e in perf["latency"]}
    assert latency[("send", "fail")]["count"] == 1 + 6 + 9
    assert latency[("send", "fail")]["p50_ms"] == pytest.approx(50.0)
    assert latency[("send", "info")]["max_ms"] == pytest.approx(1000.0)
    assert latency[("send", "ok")]["p99_ms"] == pytest.approx(50.0)
    series = {(s["f"], s["type"]): s for s in perf["series"]}
    ok = series[("send", "ok")]
    assert perf["bucket_s"] == 1
    assert ok["t_s"][:3] == [0, 1, 2]
    assert ok["ops"][0] == 10 and ok["throughput"][0] == 10.0
    assert sum(ok["ops"]) == latency[("send", "ok")]["count"]


def test_stats_count_operations_by_f_and_outcome(checked):
    stats = result(checked, "queue-all")["checkers"]["stats"]
    assert stats["workload"] == "queue"
    assert stats["by_f"]["send"] == {"ok": 4, "fail": 1, "info": 3}
    assert stats["by_f"]["poll"] == {"ok": 2, "fail": 0, "info": 0}
    assert stats["valid"] is True


def test_empty_history_is_unknown(checked):
    stats = result(checked, "empty")["checkers"]["stats"]
    assert stats["operations"] == 0
    assert stats["problems"] == ["the history has no client operations"]


def test_unreadable_run_json_is_reported_and_defaults_are_used(checked):
    res = result(checked, "bad-spec")
    assert res["workload"] == "queue"
    assert res["checkers"]["stats"]["operations"] == 4     # also the file "c 2+%é.jsonl"; 2 audit reads
    assert res["checkers"]["queue"]["valid"] is True
    assert "not readable JSON" in res["checkers"]["stats"]["problems"][0]


# -- linearizability -----------------------------------------------------------------------

def test_linearizable_checks_each_key_with_the_engine(checked):
    lin = result(checked, "register-bad")["checkers"]["linearizable"]
    assert lin["model"] == "cas-register"
    assert lin["valid"] is False
    assert lin["keys"] == 2
    assert lin["counts"] == {"valid": 1, "invalid": 1, "unknown": 0}
    assert lin["failures"][0]["key"] == "y"
    assert lin["failures"][0]["op"]["value"] == 2
    assert lin["failures"][0]["op"]["index"] == 1          # the row in checked/history.parquet
    assert lin["problems"] == ["key y: cannot linearize ok read 2 by process 2 (#1)"]


def test_linearizable_valid_register_and_log_histories(checked):
    register = result(checked, "rto-register")["checkers"]["linearizable"]
    log = result(checked, "log-good")["checkers"]["linearizable"]
    assert (register["valid"], register["keys"]) == (True, 1)
    assert (log["valid"], log["model"]) == (True, "log")


def test_queue_workload_skips_linearizability(checked):
    lin = result(checked, "queue-all")["checkers"]["linearizable"]
    assert lin["valid"] is True and lin["checked"] is False


# -- the CLI ------------------------------------------------------------------------------

def test_chaos_check_rejects_bad_arguments_in_one_line(tmp_path):
    from harness.cli import cli
    for args, message in ((["check", str(tmp_path)], "no runs found"),
                          (["check", str(tmp_path / "nope")], "no such directory"),
                          (["check", "--conf", "spark.driver.memory", str(tmp_path)], "expected KEY=VALUE")):
        out = CliRunner().invoke(cli, args)
        assert out.exit_code == 3, out.output
        assert message in out.output
        assert "Traceback" not in out.output


def test_chaos_check_rechecks_a_campaign_and_exits_with_the_worst_verdict(tmp_path):
    """In a fresh process: Spark's own log goes to spark.log, the terminal shows only verdicts."""
    campaign = tmp_path / "campaign"
    queue_duplicates(campaign, "good", "at-least-once")
    queue_all(campaign)
    env = {**os.environ, "COLUMNS": "120"}
    chaos = Path(sys.executable).parent / "chaos"
    done = subprocess.run([str(chaos), "check", str(campaign)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, env=env)
    if done.returncode not in (0, 1, 2):
        pytest.fail(done.stdout + done.stderr)
    assert done.returncode == 1
    assert "queue: 1 acknowledged message(s) never consumed" in done.stdout
    for noise in ("WARN", "log4j", "SparkContext", "Stage"):
        assert noise not in done.stdout + done.stderr
    assert (campaign / "spark.log").stat().st_size > 0
    assert json.loads((campaign / "runs" / "good" / "results.json").read_text())["valid"] is True


def test_line_numbers_stay_right_when_spark_splits_a_file(spark, tmp_path):
    """Spark reads a big file in several splits; reported line numbers must not shift."""
    from pyspark.sql import functions as F

    from checkers.parse import locate_lines, parse, read_lines, run_files

    run = RunBuilder(tmp_path, "split")
    for i in range(40):
        if i + 1 in (7, 33):
            run.line("w1", "{broken")
        else:
            run.event("w1", process=1, type="invoke" if i % 2 == 0 else "ok", f="write", value=i,
                      time=i * MS)
    previous = {k: spark.conf.get(k) for k in ("spark.sql.files.maxPartitionBytes",
                                                "spark.sql.files.openCostInBytes")}
    spark.conf.set("spark.sql.files.maxPartitionBytes", "512")
    spark.conf.set("spark.sql.files.openCostInBytes", "0")
    try:
        lines = read_lines(spark, run_files(0, run.dir))
        assert lines.rdd.getNumPartitions() >= 4
        bad = parse(lines).filter(F.col("problem").isNotNull()).select(
            "run", "seq", F.col("problem").alias("reason"))
        found = sorted((r["file"], r["line"]) for r in locate_lines(lines, bad).collect())
    finally:
        for key, value in previous.items():
            spark.conf.set(key, value)
    assert found == [("history/w1.jsonl", 7), ("history/w1.jsonl", 33)]


# (line, problem, process, key, value, time): what parse() makes of one line
DECODED = [
    ('{"process": 3, "type": "ok", "f": "send", "key": 7, "value": {"b": 1, "a": [1, 2.50, "x\\u00e9"]}, '
     '"time": 5, "node": "n1"}', None, "3", "7", '{"b": 1, "a": [1, 2.50, "x\\u00e9"]}', 5),
    ('{"process":1,"type":"ok","f":"read","value":"abc","time":1}', None, "1", None, '"abc"', 1),
    ('{"process":1,"type":"ok","f":"read","value":12.0,"time":1}', None, "1", None, "12.0", 1),
    ('{"process":1,"type":"ok","f":"read","value":null,"key":{"k": [1]},"time":1}',
     None, "1", '{"k": [1]}', None, 1),
    ("{'process':1,'type':'invoke','f':'read','time':2}", None, "1", None, None, 2),
    ("[1,2]", "not a JSON object", None, None, None, None),
    ('{"process":1,"type":"invoke","f":"read","time":1} tail',
     "trailing characters after the JSON object", "1", None, None, 1),
    ('{"process":1,"type":"invoke","f":"read","value":{"a":1},"time":1',
     "not valid JSON (truncated or garbled line?)", None, None, None, None),
    ('{"process":{"x":1},"type":"invoke","f":"read","time":1}',
     '`process` must be an integer or "nemesis"', '{"x":1}', None, None, 1),
    *[('{"process":1,"type":"invoke","f":"read","time":%s}' % time,
       "`time` must be a non-negative integer (ns since run start)", "1", None, None, None)
      for time in ("1.5", '"5"', "99999999999999999999", "[1]")],
]


def test_each_line_is_decoded_once_and_its_value_keeps_the_exact_text(spark, tmp_path):
    """The JVM decoder (chaos.events.EventDecoder) reads fields as text, `time` as a
    64-bit integer, and keeps the value exactly as the line wrote it; what it cannot
    read gets the same reasons as before."""
    from checkers.parse import parse, read_lines, run_files

    run = RunBuilder(tmp_path, "decoded")
    for line, *_ in DECODED:
        run.line("w1", line)
    rows = parse(read_lines(spark, run_files(0, run.dir))).orderBy("seq").collect()
    found = [(r["problem"], r["process"], r["key"], r["value"], r["time"]) for r in rows]
    assert found == [tuple(expected) for _, *expected in DECODED]


VALUES = ['[{"id":"m1","key":0,"queue":0,"offset":5}]', '[{"id":1,"offset":"5"}]', '[{"id":"m1"}, null]',
          '{"id":"m1","offset":2}', '"abc"', "5", "[1,2]", '[{"id":"m1"}, 3]', "[]", '[{"id":{"a":1}}]',
          '[{"id":"m1","offset":1.5}]', "garbage", '[{"id":"m1"', None, "null", "[{'id':'m1'}]",
          '[{"id":"m1","offset":99999999999999999999}]', '{"id":7,"key":[1,2],"queue":"q","x":{"y":1}}']


def test_queue_reads_values_as_spark_json_functions_would(spark):
    """chaos_poll_items answers what from_json of the items' schema answers (an object is
    a list of one, a bad offset is null, anything but a list of objects is unreadable), and
    chaos_json_fields what json_tuple answers; both read each value's bytes once."""
    from pyspark.sql import functions as F

    from checkers.spark import jvmfunctions

    jvmfunctions.register(spark)
    names = ("id", "key", "queue", "offset", "x")
    values = spark.createDataFrame([(i, v) for i, v in enumerate(VALUES)], "i int, value string")
    spark_fields = values.select("i", F.json_tuple("value", *names).alias(*names)).select(
        "i", F.array(*names).alias("spark_fields"))
    rows = values.join(spark_fields, "i").select(
        "value", "spark_fields",
        F.from_json("value", jvmfunctions.POLL_ITEMS_TYPE).alias("spark_items"),
        jvmfunctions.poll_items(F.col("value")).alias("items"),
        jvmfunctions.json_fields(F.col("value"), *names).alias("fields")).orderBy("i").collect()
    for row in rows:
        assert row["items"] == row["spark_items"], row["value"]
        assert row["fields"] == row["spark_fields"], row["value"]
    assert rows[-1]["fields"] == ["7", "[1,2]", "q", None, '{"y":1}']


def test_without_the_engine_jar_the_checks_say_how_to_build_it(spark, tmp_path, monkeypatch):
    """The JVM functions live in the engine jar; without it (no javac) a check ends in an
    error naming the set-up script, and every run still gets its results.json."""
    from checkers.spark import jvmfunctions, shipping

    monkeypatch.setattr(jvmfunctions, "_registered", set())
    monkeypatch.setattr(shipping, "engine_jar", lambda: None)
    with pytest.raises(jvmfunctions.FunctionsUnavailable, match="scripts/setup.sh"):
        jvmfunctions.register(spark)
    run = RunBuilder(tmp_path, "no-jar", {"workload": "register"})
    run.op(1, "write", 0, 10, key="r1", value=1)
    [found] = check_runs([run.dir])
    assert found["valid"] == "unknown" and "scripts/setup.sh" in found["error"]
    assert json.loads((run.dir / "results.json").read_text())["error"] == found["error"]


def test_lines_whose_file_uri_matches_no_run_stop_the_check_instead_of_vanishing(spark, tmp_path,
                                                                               monkeypatch):
    """Which run a line of a check of several runs belongs to is looked up by its file's URI;
    if Spark ever wrote that URI in a form the lookup does not know, the check must fail,
    not lose the lines."""
    import checkers.parse

    runs = [RunBuilder(tmp_path, name, {"workload": "register"}) for name in ("unmatched", "other")]
    for run in runs:
        run.op(1, "write", 0, 10, key="r1", value=1)
    monkeypatch.setattr(checkers.parse, "_uri_keys", lambda uri: (uri + "#elsewhere",))
    outcomes = check_runs([run.dir for run in runs])
    assert [o["valid"] for o in outcomes] == ["unknown", "unknown"]
    assert all("no run for the lines of" in o["error"] for o in outcomes)
    assert "/history/w1.jsonl" in outcomes[0]["error"]


def test_the_lines_of_a_single_run_need_no_lookup_of_their_file(spark, tmp_path, monkeypatch):
    """One run's lines all belong to it: no URI is looked up (Spark's listing is still
    checked against the files given)."""
    import checkers.parse

    run = RunBuilder(tmp_path, "alone", {"workload": "register"})
    run.op(1, "write", 0, 10, key="r1", value=1)
    monkeypatch.setattr(checkers.parse, "_uri_keys", lambda uri: (uri + "#elsewhere",))
    [outcome] = check_runs([run.dir])
    assert outcome["valid"] is True and outcome["checkers"]["stats"]["operations"] == 1


def test_a_small_check_leaves_no_blocks_in_spark_memory(spark, tmp_path):
    """A small check keeps its tables as local checkpoints; they are dropped when it ends,
    not when the JVM next collects garbage (a campaign checks run after run in one session)."""
    def blocks() -> int:
        return sum(1 for info in spark.sparkContext._jsc.sc().getRDDStorageInfo() if info.memSize() > 0)

    run = RunBuilder(tmp_path, "blocks", {"workload": "queue"})
    for i in range(20):
        run.op(1, "send", i * 10, i * 10 + 5, key=0, value={"id": f"m{i}"})
        run.op(2, "poll", i * 10 + 6, i * 10 + 8, key=0, result=[{"id": f"m{i}", "queue": "0", "offset": i}])
    before = blocks()
    [outcome] = check_runs([run.dir])
    assert outcome["checkers"]["queue"]["counts"]["consumed_ids"] == 20
    assert blocks() == before


# -- the durability audit's anomalies, availability over time, failovers ------------------

def queue_of(checked, name):
    return result(checked, name)["checkers"]["queue"]


def anomalies(section) -> dict[str, int]:
    names = ("lost", "lost_after_consume", "inconsistent_offsets", "poll_skip", "nonmonotonic_poll",
             "duplicated")
    return {name: section["counts"][name] for name in names if section["counts"].get(name)}


def test_a_clean_audited_run_has_no_anomaly_and_a_complete_audit(checked):
    for name in ("clean", "clean-exactly-once"):
        section = queue_of(checked, name)
        assert section["valid"] is True and anomalies(section) == {}
        assert section["audit"] == {"complete": True, "messages_in_final_log": 3}


def test_a_consumed_message_missing_from_the_final_log_is_lost_after_consume(checked):
    section = queue_of(checked, "lost-after-consume")
    assert section["valid"] is False
    assert anomalies(section) == {"lost_after_consume": 2}
    assert section["counts"]["lost_after_consume_acknowledged"] == 2
    assert sorted(m["id"] for m in section["lost_after_consume"]) == ["m1", "m2"]


def test_without_an_audit_consumed_messages_are_not_judged_and_the_run_is_unknown(checked):
    section = queue_of(checked, "unaudited")
    assert section["valid"] == "unknown" and section["audit"]["complete"] is False
    assert section["audit"]["unchecked"] == ["lost_after_consume"]
    assert any("lost_after_consume not checked" in p for p in section["problems"])


def test_one_offset_holding_two_messages_is_an_inconsistent_offset(checked):
    section = queue_of(checked, "inconsistent")
    assert section["valid"] is False
    assert section["counts"]["inconsistent_offsets"] == 1
    example = section["inconsistent_offsets"][0]
    assert (example["key"], example["offset"], example["ids"]) == ("0", 1, ["m1", "m2"])
    assert set(example["sources"]) == {"send", "poll", "audit"}
    assert [m["id"] for m in section["lost_after_consume"]] == ["m1"]


def test_a_poll_that_jumps_over_existing_offsets_is_a_poll_skip(checked):
    section = queue_of(checked, "poll-skip")
    assert section["valid"] is False
    assert anomalies(section) == {"poll_skip": 1}
    assert [(e["id"], e["offset"], e["previous"], e["skipped"]) for e in section["poll_skip"]] == [("m3", 3, 0, 2)]


def test_a_poll_that_goes_back_is_nonmonotonic_and_fails_only_exactly_once_runs(checked):
    lenient, strict = queue_of(checked, "nonmonotonic"), queue_of(checked, "nonmonotonic-exactly-once")
    for section in (lenient, strict):
        assert anomalies(section) == {"nonmonotonic_poll": 1, "duplicated": 1}
        assert [(e["id"], e["offset"], e["previous"]) for e in section["nonmonotonic_poll"]] == [("m1", 1, 1)]
    assert lenient["valid"] is True and strict["valid"] is False


def test_a_log_read_of_nothing_below_the_acknowledged_end_is_a_stale_read(checked):
    section = queue_of(checked, "log-stale-read")
    assert section["workload"] == "log" and section["valid"] is False
    assert anomalies(section) == {"poll_skip": 1}
    stale = section["poll_skip"][0]
    assert (stale["id"], stale["offset"], stale["acknowledged_end"]) == ("7", 0, 2)


def test_a_log_read_concurrent_with_its_append_may_find_nothing(checked):
    section = queue_of(checked, "log-clean")
    assert section["valid"] is True and anomalies(section) == {}
    assert result(checked, "log-clean")["checkers"]["linearizable"]["valid"] is True


def test_a_log_offset_read_with_another_value_is_inconsistent_and_a_missing_append_is_lost(checked):
    section = queue_of(checked, "log-diverged")
    assert section["valid"] is False
    assert anomalies(section) == {"inconsistent_offsets": 1, "lost": 1}
    assert section["inconsistent_offsets"][0]["ids"] == ["8", "9"]
    assert [m["id"] for m in section["lost"]] == ["8"]


def test_availability_over_time_shows_an_outage_that_the_attempt_ratio_hides(checked):
    window = result(checked, "stalled-master")["checkers"]["rto"]["windows"][0]
    assert window["availability_attempts"] == pytest.approx(20 / 21)
    assert window["availability"] == pytest.approx(20 / 40)       # 2 s of 4 s had a successful write
    assert window["goodput"] == pytest.approx(20 / 4 / 50)        # 5 ok writes/s of 50 requested
    assert window["unavailable_s"] == pytest.approx(2.01)


def test_each_window_says_whether_it_outlasted_failure_detection(checked):
    rto = result(checked, "stalled-master")["checkers"]["rto"]
    long, short = rto["windows"]
    assert long["detection_s"] == short["detection_s"] == pytest.approx(1.5)
    assert (long["exercises_failover"], short["exercises_failover"]) == (True, False)
    assert rto["short_windows"] == [1] and rto["windows_exercising_failover"] == 1


def test_failovers_count_changes_of_the_node_serving_successful_writes(checked):
    rto = result(checked, "stalled-master")["checkers"]["rto"]
    assert rto["failovers"] == 1
    assert [m["node"] for m in rto["masters"]] == ["n1", "n2"]


# -- small and large inputs take different paths to the same results ---------------------

_MEASURED = {"checked_at", "engine-seconds", "engine-cpu-seconds"}  # times, not results


def _comparable(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: _comparable(v) for k, v in doc.items() if k not in _MEASURED}
    if isinstance(doc, list):
        return [_comparable(v) for v in doc]
    return doc


def _unchecked_copy(run_dir: Path, target: Path) -> Path:
    """A copy of a run as it was before its check (no checked/, no results.json)."""
    import shutil

    shutil.copytree(run_dir, target, ignore=shutil.ignore_patterns("checked", "results.json"))
    return target


@pytest.mark.parametrize("path", ["small", "large"])
def test_every_input_path_gives_the_same_results_as_the_tiny_one(checked, tmp_path, monkeypatch, path):
    """The scenarios are a tiny input (interpreted, cached tables). Above TINY_INPUT_BYTES
    Spark compiles generated code; above SMALL_INPUT_BYTES tables are staged as Parquet
    and Spark plans adaptively. Every results.json and history table must stay the same."""
    from checkers import pipeline

    copies = [_unchecked_copy(entry["dir"], tmp_path / "runs" / name) for name, entry in checked.items()]
    monkeypatch.setattr(pipeline, "TINY_INPUT_BYTES", -1)
    if path == "large":
        monkeypatch.setattr(pipeline, "SMALL_INPUT_BYTES", -1)
    large = check_runs(copies)
    for run_dir, result in zip(copies, large):
        original = checked[run_dir.name]
        # a message may name the run's file: the copy's path stands for the original's
        moved = json.loads(json.dumps(_comparable(result)).replace(str(run_dir), str(original["dir"])))
        assert moved == _comparable(original["result"]), run_dir.name
        again = pq.read_table(run_dir / "checked" / "history.parquet").to_pylist()
        assert sorted(again, key=lambda r: r["index"]) == history_rows(checked, run_dir.name)
        # docs/history-format.md: the files, read in name order, are in index order
        assert [r["index"] for r in again] == list(range(len(again))), run_dir.name


@pytest.mark.parametrize("name", ["rto-faults", "queue-all"])
def test_one_run_alone_on_the_large_path_is_numbered_as_among_many(checked, tmp_path, monkeypatch, name):
    """A check of one run sorts its history without a run column (a literal stands for
    it); the numbering, the rows and the file order must not change."""
    from checkers import pipeline

    target = _unchecked_copy(checked[name]["dir"], tmp_path / name)
    monkeypatch.setattr(pipeline, "TINY_INPUT_BYTES", -1)
    monkeypatch.setattr(pipeline, "SMALL_INPUT_BYTES", -1)
    check_runs([target])
    again = pq.read_table(target / "checked" / "history.parquet").to_pylist()
    assert [r["index"] for r in again] == list(range(len(again)))
    assert again == history_rows(checked, name)


def test_partition_keys_land_where_spark_hashes_them(spark):
    """index_history sends slice i to shuffle partition i by a key whose hash is i mod n:
    the hash must be Spark's."""
    from pyspark.sql import functions as F

    from checkers.reconstruct import partition_keys, spark_hash_int

    values = [0, 1, -1, 7, 42, 2**31 - 1, -2**31, 123456789]
    hashed = spark.createDataFrame([(v,) for v in values], "v int").select(F.hash("v").alias("h")).collect()
    assert [spark_hash_int(v) for v in values] == [r["h"] for r in hashed]
    for parts in (1, 2, 16, 200):
        keys = partition_keys(parts)
        placed = (spark.createDataFrame([(k, i) for i, k in enumerate(keys)], "k int, i int")
                  .repartition(parts, "k").select("i", F.spark_partition_id().alias("p")).collect())
        assert all(r["i"] == r["p"] for r in placed), parts


def test_small_tables_reach_spark_as_the_rows_given(spark):
    from checkers.spark.frames import local_frame

    rows = [(0, 5, 9, [1, 2]), (3, None, 7, [])]
    frame = local_frame(spark, rows, "s_run int, lo long, hi long, ids array<int>")
    assert [tuple(r) for r in frame.collect()] == rows
    assert local_frame(spark, [], "path string, run int").count() == 0


def test_input_settings_are_restored_and_leave_a_user_setting_alone(spark):
    from checkers.spark.session import DEFAULT_CONF, input_settings

    keys = ("spark.sql.adaptive.enabled", "spark.sql.shuffle.partitions")
    session_had = {k: spark.conf.get(k) for k in keys}
    try:
        for partitions, inside in ((DEFAULT_CONF["spark.sql.shuffle.partitions"],
                                    str(spark.sparkContext.defaultParallelism)),   # ours: changed
                                   ("7", "7")):                                     # a user's: kept
            spark.conf.set("spark.sql.adaptive.enabled", "true")
            spark.conf.set("spark.sql.shuffle.partitions", partitions)
            with input_settings(spark, small=True):
                assert spark.conf.get("spark.sql.adaptive.enabled") == "false"
                assert spark.conf.get("spark.sql.shuffle.partitions") == inside
            assert spark.conf.get("spark.sql.adaptive.enabled") == "true"
            assert spark.conf.get("spark.sql.shuffle.partitions") == partitions
    finally:
        for key, value in session_had.items():
            spark.conf.set(key, value)
    # tiny inputs: interpreted, not compiled; Spark's defaults again after; a user's value is kept
    codegen = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
    before = {key: spark.conf.get(key) for key in codegen}
    with input_settings(spark, small=True):
        assert {key: spark.conf.get(key) for key in codegen} == before
    with input_settings(spark, small=True, tiny=True):
        assert {key: spark.conf.get(key) for key in codegen} == codegen
    assert {key: spark.conf.get(key) for key in codegen} == before == {
        "spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK"}
    spark.conf.set("spark.sql.codegen.wholeStage", "false")
    try:
        with input_settings(spark, small=True, tiny=True):
            assert spark.conf.get("spark.sql.codegen.factoryMode") == "NO_CODEGEN"
        assert spark.conf.get("spark.sql.codegen.wholeStage") == "false"
    finally:
        spark.conf.set("spark.sql.codegen.wholeStage", "true")
    # large inputs: at least four scan tasks per core, unset again after; a user's value is kept
    minimum = "spark.sql.files.minPartitionNum"
    assert spark.conf.get(minimum, None) is None
    with input_settings(spark, small=False):
        assert spark.conf.get(minimum) == str(4 * spark.sparkContext.defaultParallelism)
    assert spark.conf.get(minimum, None) is None
    spark.conf.set(minimum, "3")
    try:
        with input_settings(spark, small=False):
            assert spark.conf.get(minimum) == "3"
    finally:
        spark.conf.unset(minimum)


def test_a_tiny_input_is_checked_without_generated_code(spark, checked, tmp_path, monkeypatch):
    """What the check runs with, seen at each of its steps: interpreted below
    TINY_INPUT_BYTES, compiled above, Spark's default again afterwards."""
    import shutil

    from checkers import pipeline

    run = tmp_path / "queue-all"
    shutil.copytree(checked["queue-all"]["dir"], run, ignore=shutil.ignore_patterns("checked", "results.json"))
    seen: dict[str, set[str]] = {}

    def record(_step: str) -> None:
        for key in ("spark.sql.codegen.wholeStage", "spark.sql.codegen.factoryMode"):
            seen.setdefault(key, set()).add(spark.conf.get(key))

    assert check_runs([run], progress=record)[0]["valid"] == result(checked, "queue-all")["valid"]
    assert seen == {"spark.sql.codegen.wholeStage": {"false"}, "spark.sql.codegen.factoryMode": {"NO_CODEGEN"}}
    seen.clear()
    monkeypatch.setattr(pipeline, "TINY_INPUT_BYTES", -1)
    assert check_runs([run], progress=record)[0]["valid"] == result(checked, "queue-all")["valid"]
    assert seen == {"spark.sql.codegen.wholeStage": {"true"}, "spark.sql.codegen.factoryMode": {"FALLBACK"}}
    assert spark.conf.get("spark.sql.codegen.wholeStage") == "true"


# -- the SUT's own invariant breaches ------------------------------------------------------

def test_a_model_invariant_event_makes_an_otherwise_clean_run_invalid(checked):
    res = result(checked, "invariant-breach")
    assert res["checkers"]["queue"]["valid"] is True and res["valid"] is False
    section = res["checkers"]["invariants"]
    assert section["valid"] is False and section["counts"] == {"raft-committed-entries-cut": 1}
    [breach] = section["anomalies"]
    assert (breach["node"], breach["process"], breach["safety"], breach["time_s"]) == ("n2", "broker-1", True, 1.5)
    assert json.loads(breach["line"])["details"] == {"after_index": 1, "commit_index": 3}


def test_a_rocketmq_bug_line_that_breaks_no_safety_is_listed_and_the_run_stays_valid(checked):
    res = result(checked, "rocketmq-bug-line")
    section = res["checkers"]["invariants"]
    assert res["valid"] is True and section["valid"] is True
    [line] = section["anomalies"]
    assert (line["kind"], line["node"], line["safety"], line["time_s"]) == ("rocketmq-bug-line", "n1", False, 2.0)


def test_runs_without_node_logs_are_not_checked_for_invariants(checked):
    section = result(checked, "clean")["checkers"]["invariants"]
    assert section["valid"] is True and section["checked"] is False
