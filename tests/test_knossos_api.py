"""checkers.knossos.analysis: semantics of info/fail ops, the models' op
encodings, splitting by key, limits, errors, and the JVM's life cycle."""
from __future__ import annotations

import json

import pytest

from checkers.knossos import (MODELS, HistoryError, analysis, partitions, read_edn,
                              split_by_key)
from checkers.knossos import jvm, knossos_jar

pytestmark = pytest.mark.jvm


def ev(process, kind, f, value=None, **extra):
    return {"process": process, "type": kind, "f": f, "value": value, **extra}


def op(process, f, value_in, value_out, kind="ok", **extra):
    """An invoke followed directly by its completion."""
    return [ev(process, "invoke", f, value_in, **extra), ev(process, kind, f, value_out, **extra)]


def test_an_info_write_may_take_effect_long_after_it_crashed():
    history = [ev(0, "invoke", "write", 1), ev(0, "info", "write", 1),
               *op(1, "read", None, 0), *op(1, "read", None, 1)]
    assert analysis("cas-register", history, init=0)["valid"] is True


def test_an_info_write_may_never_take_effect():
    history = [ev(0, "invoke", "write", 1), ev(0, "info", "write", 1), *op(1, "read", None, 0)]
    assert analysis("cas-register", history, init=0)["valid"] is True


def test_an_info_write_cannot_take_effect_before_it_was_invoked():
    history = [*op(1, "read", None, 1), ev(0, "invoke", "write", 1), ev(0, "info", "write", 1)]
    result = analysis("cas-register", history, init=0)
    assert result["valid"] is False
    assert result["op"] == {**history[1], "index": 1}


def test_a_failed_write_did_not_happen():
    history = [*op(0, "write", 1, 1, kind="fail"), *op(1, "read", None, 1)]
    assert analysis("register", history, init=0)["valid"] is False


def test_an_invoke_never_completed_counts_as_info():
    history = [ev(0, "invoke", "write", 5), *op(1, "read", None, 5)]
    assert analysis("register", history, init=0)["valid"] is True


def test_nemesis_events_are_ignored():
    history = [ev("nemesis", "info", "start", None), *op(0, "write", 1, 1),
               ev("nemesis", "info", "stop", None), *op(0, "read", None, 1)]
    assert analysis("register", history)["valid"] is True


def test_a_null_read_saw_an_empty_register_unless_nil_reads_are_unknown():
    history = [*op(0, "write", 1, 1), *op(1, "read", None, None)]
    assert analysis("register", history)["valid"] is False
    assert analysis("register", history, nil_reads="unknown")["valid"] is True
    assert analysis("register", op(1, "read", None, None))["valid"] is True  # never written


def test_a_null_get_reads_an_absent_key_as_empty():
    assert analysis("kv", op(0, "get", None, None, key="k"))["valid"] is True
    assert analysis("kv", [*op(0, "put", "a", "a", key="k"),
                           *op(0, "get", None, None, key="k")])["valid"] is False


def test_previous_ok_is_the_last_ok_before_the_failing_op():
    history = [*op(0, "write", 1, 1), *op(0, "read", None, 1), *op(1, "read", None, 2)]
    result = analysis("register", history, init=0)
    assert result["op"]["index"] == 5 and result["previous-ok"]["index"] == 3
    assert result["configs"][0]["model"] == 1
    assert result["configs"][0]["last-op"]["index"] == 3


def test_cas_needs_the_expected_value():
    history = [*op(0, "cas", [0, 3], [0, 3]), *op(0, "cas", [0, 4], [0, 4])]
    assert analysis("cas-register", history, init=0)["valid"] is False
    assert analysis("cas-register", history[:2] + op(0, "cas", [3, 4], [3, 4]),
                    init=0)["valid"] is True


def test_mutex_cannot_be_acquired_twice():
    history = [*op(0, "acquire", None, None), *op(1, "acquire", None, None)]
    result = analysis("mutex", history)
    assert result["valid"] is False and result["configs"][0]["model"] == "held"
    assert analysis("mutex", history[:2] + op(0, "release", None, None) + history[2:])["valid"]


def test_set_reads_must_see_exactly_the_added_elements():
    history = [*op(0, "add", 1, 1), *op(1, "read", None, [1]), *op(0, "add", 2, 2)]
    assert analysis("set", history)["valid"] is True
    assert analysis("set", history + op(1, "read", None, [2]))["valid"] is False


def test_fifo_queue_dequeues_in_order_and_null_when_empty():
    history = [*op(0, "enqueue", 1, 1), *op(0, "enqueue", 2, 2),
               *op(1, "dequeue", None, 1), *op(1, "dequeue", None, 2), *op(1, "dequeue", None, None)]
    assert analysis("fifo-queue", history)["valid"] is True
    swapped = history[:4] + op(1, "dequeue", None, 2) + op(1, "dequeue", None, 1)
    assert analysis("fifo-queue", swapped)["valid"] is False
    assert analysis("unordered-queue", swapped)["valid"] is True


@pytest.mark.parametrize("model, taken", [("fifo-queue", 1), ("unordered-queue", 2)])
def test_a_crashed_dequeue_may_have_taken_an_element(model, taken):
    enqueues = [*op(0, "enqueue", 1, 1), *op(0, "enqueue", 2, 2)]
    crashed = [ev(2, "invoke", "dequeue", None), ev(2, "info", "dequeue", None)]
    drain = [*op(1, "dequeue", None, taken), *op(1, "dequeue", None, None)]
    assert analysis(model, enqueues + crashed + drain)["valid"] is True
    assert analysis(model, enqueues + drain)["valid"] is False


def test_kv_appends_build_strings_and_absent_keys_read_empty():
    history = [*op(0, "get", None, "", key="k"), *op(0, "put", "ab", "ab", key="k"),
               *op(1, "append", "c", "c", key="k"), *op(1, "get", None, "abc", key="k")]
    assert analysis("kv", history)["valid"] is True
    assert analysis("kv", history + op(1, "get", None, "ab", key="k"))["valid"] is False


def test_kv_history_is_checked_per_key_and_names_the_bad_key():
    history = [*op(0, "put", "x", "x", key="a"), *op(1, "put", "y", "y", key="b"),
               *op(0, "get", None, "x", key="a"), *op(1, "get", None, "x", key="b")]
    result = analysis("kv", history)
    assert result["valid"] is False and result["key"] == "b" and result["partitions"] == 2
    assert result["op"] == {**history[7], "index": 7}


def test_log_offsets_are_consecutive_and_reads_past_the_end_return_null():
    history = [*op(0, "append", "m1", {"offset": 0, "value": "m1"}),
               *op(1, "append", "m2", {"offset": 1, "value": "m2"}),
               *op(0, "read", {"offset": 1}, {"offset": 1, "value": "m2"}),
               *op(0, "read", {"offset": 2}, {"offset": 2, "value": None})]
    assert analysis("log", history)["valid"] is True
    assert analysis("log", history + op(1, "append", "m3", {"offset": 1, "value": "m3"}))[
        "valid"] is False
    assert analysis("log", history + op(1, "read", {"offset": 0}, {"offset": 0, "value": "m2"}))[
        "valid"] is False


def test_multi_register_txns_read_and_write_several_registers_atomically():
    history = [*op(0, "txn", [["write", "x", 1], ["write", "y", 1]],
                   [["write", "x", 1], ["write", "y", 1]]),
               *op(1, "txn", [["read", "x", None], ["read", "y", None]],
                   [["read", "x", 1], ["read", "y", 0]])]
    result = analysis("multi-register", history, init={"x": 0, "y": 0})
    assert result["valid"] is False and result["configs"][0]["model"] == {"x": 1, "y": 1}


def test_multi_register_splits_into_groups_of_registers_no_txn_spans():
    lone = [*op(0, "txn", [["write", "x", 1]], [["write", "x", 1]]),
            *op(1, "txn", [["read", "y", None]], [["read", "y", 0]])]
    assert len(partitions("multi-register", lone, {"x": 0, "y": 0})) == 2
    spanning = lone + op(2, "txn", [["read", "x", None], ["read", "y", None]],
                         [["read", "x", 1], ["read", "y", 0]])
    assert len(partitions("multi-register", spanning, {"x": 0, "y": 0})) == 1
    assert analysis("multi-register", spanning, init={"x": 0, "y": 0})["valid"] is True


def test_split_by_key_keeps_order_and_leaves_out_the_nemesis():
    history = [ev(0, "invoke", "put", "a", key=1), ev("nemesis", "info", "kill"),
               ev(1, "invoke", "put", "b", key=2), ev(0, "ok", "put", "a", key=1)]
    assert split_by_key(history) == {1: [history[0], history[3]], 2: [history[2]]}


def _hard_history(writers: int = 18) -> list[dict]:
    """Crashed writes of values that are all read later, then a read of a
    value nobody wrote: the search must try every subset and order."""
    history = [ev(p, "invoke", "write", p + 1) for p in range(writers)]
    history += [ev(p, "info", "write", p + 1) for p in range(writers)]
    for v in range(1, writers + 1):
        history += op(100, "read", None, v)
    return history + op(100, "read", None, 999)


def test_time_limit_gives_unknown_with_the_cause():
    result = analysis("cas-register", _hard_history(), init=0, time_limit=0.2)
    assert result["valid"] == "unknown" and result["cause"] == "timeout"
    assert result["time"] < 10


def test_memory_guard_gives_unknown_with_the_cause():
    result = analysis("cas-register", _hard_history(), init=0, max_configs=5000)
    assert result["valid"] == "unknown" and result["cause"] == "memory"
    assert "5001 entries" in result["detail"]


def test_crashed_writes_nobody_read_are_left_out_of_the_search():
    # 40 concurrent crashed writes would be 2^40 subsets; none was ever read.
    history = [ev(p, "invoke", "write", p + 10) for p in range(40)]
    history += [ev(p, "info", "write", p + 10) for p in range(40)] + op(100, "read", None, 0)
    result = analysis("cas-register", history, init=0, time_limit=10)
    assert result["valid"] is True and result["configs-explored"] < 10


def test_identical_crashed_writes_are_tried_as_one():
    # 25 crashed writes of 1, each needed once later: trying them in every
    # order would be 2^25 configurations; as interchangeable ops, a handful.
    history = [ev(p, "invoke", "write", 1) for p in range(25)]
    history += [ev(p, "info", "write", 1) for p in range(25)]
    for _ in range(25):
        history += op(100, "write", 0, 0) + op(100, "read", None, 0) + op(100, "read", None, 1)
    result = analysis("cas-register", history, init=0, time_limit=20)
    assert result["valid"] is True and result["configs-explored"] < 5000
    assert analysis("cas-register", history + op(100, "write", 0, 0) + op(100, "read", None, 1),
                    init=0, time_limit=20)["valid"] is False


@pytest.mark.parametrize("history, message", [
    ([ev(0, "ok", "read", 1)], "event #0: ok of process 0 without an invoke"),
    ([ev(0, "invoke", "read"), ev(0, "invoke", "read")], "event #1: process 0 invoked again"),
    ([ev(0, "begin", "read")], "event #0: type must be invoke, ok, fail or info"),
    ([ev(0, "invoke", "frob"), ev(0, "ok", "frob")], "has no op 'frob'"),
    (["nonsense"], "event #0 is not a map"),
])
def test_malformed_history_gives_one_clear_error(history, message):
    with pytest.raises(HistoryError, match=message):
        analysis("cas-register", history)


def test_unknown_model_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown model 'queue'; known models: register"):
        analysis("queue", [])


def test_result_is_json_serializable_with_the_knossos_fields():
    result = analysis("register", [*op(0, "write", 1, 1), *op(0, "read", None, 2)])
    assert json.loads(json.dumps(result))["valid"] is False
    assert {"valid", "op", "previous-ok", "configs", "cause", "analyzer", "time"} <= set(result)


def test_edn_keywords_become_strings_and_ints():
    events = read_edn("[{:process 0 :type :invoke :f :read :value nil :error [:x :1]}\n"
                      " {:process 0 :type :ok :f :read :value #{2 1}}]")
    assert events[0] == {"process": 0, "type": "invoke", "f": "read", "value": None,
                         "error": ["x", 1]}
    assert events[1]["value"] == [1, 2]


def test_edn_beyond_the_plain_subset_is_read_by_edn_format():
    events = read_edn('[{:process 0 :type :invoke :f :read :value nil :time #inst "2020-01-01"}\n'
                      ' {:process 0 :type :ok :f :read :value \\a :note sym}]')
    assert events[0]["time"].startswith("2020-01-01") and events[1]["value"] == "a"
    assert events[1]["note"] == "sym"


def test_bad_edn_names_the_source():
    with pytest.raises(HistoryError, match="h.edn: not valid EDN"):
        read_edn("[{:process 0", "h.edn")


def test_the_jvm_starts_once_per_process_and_quickly():
    import jpype
    first = jvm.engine()
    assert jvm.engine() is first and jpype.isJVMStarted()
    assert jvm.startup_seconds() is not None and jvm.startup_seconds() < 10
    assert str(first.version()).startswith("chaos-lin")


def test_every_model_is_known_to_both_engines():
    from support.knossos_reference import STEPS
    assert set(MODELS) == set(STEPS)
    for model in MODELS:
        assert analysis(model, [])["valid"] is True


def test_the_knossos_engine_without_a_jar_says_what_to_set(monkeypatch):
    # The comparison with a real Knossos jar is bench/knossos_second_opinion.py (no jar here).
    monkeypatch.delenv("KNOSSOS_JAR", raising=False)
    with pytest.raises(jvm.EngineUnavailable, match="KNOSSOS_JAR"):
        analysis("cas-register", [], init=0, engine="knossos")


def test_a_jvm_started_by_someone_else_gets_the_engine_loaded_beside_it():
    import subprocess
    import sys
    code = ("import jpype; jpype.startJVM(convertStrings=False)\n"
            "from checkers.knossos import analysis\n"
            "h = [{'process': 0, 'type': 'invoke', 'f': 'write', 'value': 1},"
            " {'process': 0, 'type': 'ok', 'f': 'write', 'value': 1},"
            " {'process': 1, 'type': 'invoke', 'f': 'read', 'value': None},"
            " {'process': 1, 'type': 'ok', 'f': 'read', 'value': 2}]\n"
            "print(analysis('register', h)['valid'])\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=str(jvm.ROOT))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"
