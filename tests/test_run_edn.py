"""Import/export between our raw history and Jepsen's EDN history format."""
from __future__ import annotations

import json
from pathlib import Path

import edn_format
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.edn import (EdnError, dumps_history, export_run, guess_workload, import_history, load_history,
                         parse_history)
from harness.store import Store
from workloads.history import read_events

from conftest import knossos_testdata, require_knossos_testdata

KNOSSOS = knossos_testdata()


@pytest.fixture
def needs_testdata() -> None:
    require_knossos_testdata()

json_scalars = st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.text(max_size=12)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.from_regex(r"[a-z][a-z0-9_-]{0,8}", fullmatch=True), inner, max_size=4),
    max_leaves=12)
events = st.lists(st.fixed_dictionaries({
    "process": st.integers(0, 500),
    "type": st.sampled_from(["invoke", "ok", "fail", "info"]),
    "f": st.sampled_from(["send", "poll", "read", "write", "cas", "random-kill"]),
    "key": st.none() | st.integers(0, 9) | st.text(min_size=1, max_size=6),
    "value": json_values,
    "time": st.integers(0, 2**62),
    "node": st.none() | st.sampled_from(["n1", "n2"]),
    "error": st.none() | st.text(max_size=20),
}), max_size=15)


@given(events)
@settings(max_examples=40, deadline=None)
def test_our_history_survives_a_round_trip_through_edn(history):
    assert parse_history(dumps_history(history)) == history


def test_our_nemesis_events_survive_a_round_trip_unchanged():
    ev = {"process": "nemesis", "type": "info", "f": "random-kill", "key": None,
          "value": {"phase": "stop", "targets": ["n2"], "grudge": None}, "time": 5, "node": None,
          "error": None}
    assert parse_history(dumps_history([ev])) == [ev]


def test_exported_ops_use_jepsen_keywords_and_indices():
    text = dumps_history([
        {"process": 3, "type": "invoke", "f": "cas", "key": "r1", "value": [1, 2], "time": 10,
         "node": None, "error": None},
        {"process": "nemesis", "type": "info", "f": "random-kill", "key": None,
         "value": {"phase": "start", "targets": ["n1"]}, "time": 20, "node": None, "error": None},
    ])
    ops = edn_format.loads(text)
    k = edn_format.Keyword
    assert ops[0][k("type")] == k("invoke") and ops[0][k("f")] == k("cas")
    assert list(ops[0][k("value")]) == [1, 2] and ops[0][k("index")] == 0
    assert k("node") not in ops[0]  # nil fields are left out
    assert ops[1][k("process")] == k("nemesis")
    assert ops[1][k("value")][k("phase")] == "start"


def test_jepsen_keywords_sets_and_missing_times_become_plain_json():
    history = parse_history("""
        ; a comment
        ({:process 0, :type :invoke, :f :acquire, :value nil}
         {:process 0, :type :fail, :f :acquire, :value #{1 2}, :error :not-held, :debug {:x 1}}
         {:process :nemesis, :type :info, :f :start, :value [:n1 "n2"]})
    """)
    assert history[1] == {"process": 0, "type": "fail", "f": "acquire", "key": None, "value": [1, 2],
                          "time": 2_000_000, "node": None, "error": "not-held"}
    assert history[2]["process"] == "nemesis" and history[2]["f"] == "jepsen-nemesis"
    assert history[2]["value"] == {"phase": "start", "targets": [], "grudge": None,
                                   "jepsen_f": "start", "jepsen_value": ["n1", "n2"]}
    assert [ev["time"] for ev in history] == sorted(ev["time"] for ev in history)
    json.dumps(history)  # everything is JSON-serializable


@pytest.mark.parametrize("text,problem", [
    ("[{:process 0 :type :invoke", "not valid EDN"),
    ("[{:process 0 :f :read}]", "no :type or :process"),
    ("[{:process 0 :type :maybe :f :read}]", "unknown :type"),
    ("[{:process \"p\" :type :ok :f :read}]", ":process must be an integer"),
    ("[42]", "not an op map"),
])
def test_malformed_edn_gets_a_one_line_error_naming_the_source(text, problem):
    with pytest.raises(EdnError, match=problem) as err:
        parse_history(text, "h.edn")
    assert str(err.value).startswith("h.edn") and "\n" not in str(err.value)


@pytest.mark.usefixtures("needs_testdata")
@pytest.mark.parametrize("name", [
    "cas-register/bad/cas-failure.edn",
    "cas-register/good/mongodb-v0-ack-rollback-.edn",
    "cas-register/bad/rethink-fail-smaller.edn",
    "multi-register/good/multi-register.edn",
    "mutex/bad/etcd.edn",
])
def test_knossos_histories_import_and_export_stably(name):
    first = load_history(KNOSSOS / name)
    assert first and all(ev["type"] in ("invoke", "ok", "fail", "info") for ev in first)
    assert parse_history(dumps_history(first)) == first
    raw = edn_format.loads(Path(KNOSSOS / name).read_text())
    assert len(first) == len(raw)


@pytest.mark.usefixtures("needs_testdata")
def test_importing_a_knossos_history_makes_a_run_directory(tmp_path):
    source = KNOSSOS / "cas-register/bad/cas-failure.edn"
    run = import_history(source, Store(tmp_path / "store"))
    client = read_events(run.history_dir / "imported.jsonl")
    nemesis = read_events(run.nemesis_file)
    assert nemesis and all(ev["process"] == "nemesis" for ev in nemesis)
    assert client and all(isinstance(ev["process"], int) for ev in client)
    meta = json.loads(run.run_json.read_text())
    assert meta["kind"] == "import" and meta["model"] == "cas-register" and meta["workload"] == "register"
    assert (tmp_path / "store" / "latest").resolve() == run.campaign_dir.resolve()
    out = tmp_path / "back.edn"
    assert export_run(run.path, out) == len(client) + len(nemesis)
    assert sorted(map(json.dumps, load_history(out))) == sorted(map(json.dumps, load_history(source)))
    phases = [ev["value"]["phase"] for ev in nemesis]
    assert "start" in phases and "stop" in phases


def test_workload_is_guessed_from_operation_names():
    def ops(*names):
        return [{"process": 0, "f": n} for n in names] + [{"process": "nemesis", "f": "append"}]
    assert guess_workload(ops("send", "poll")) == "queue"
    assert guess_workload(ops("append", "read")) == "log"
    assert guess_workload(ops("read", "write", "cas")) == "register"
    assert guess_workload(ops("acquire", "release")) is None


def test_chaos_import_and_export_commands(tmp_path):
    from harness.cli import cli
    source = tmp_path / "h.edn"
    source.write_text('[{:process 0 :type :invoke :f :write :value 1 :time 5}\n'
                      ' {:process 0 :type :ok :f :write :value 1 :time 9}]\n')
    runner = CliRunner()
    imported = runner.invoke(cli, ["import", str(source), "--store", str(tmp_path / "store")])
    assert imported.exit_code == 0, imported.output
    run_dir = Path(imported.output.strip())
    assert json.loads((run_dir / "run.json").read_text())["workload"] == "register"
    exported = runner.invoke(cli, ["export", str(tmp_path / "store"), "-o", str(tmp_path / "out.edn")])
    assert exported.exit_code == 0 and "2 ops" in exported.output
    assert load_history(tmp_path / "out.edn") == load_history(source)


def test_chaos_import_of_a_broken_file_is_a_one_line_error(tmp_path):
    from harness.cli import cli
    source = tmp_path / "bad.edn"
    source.write_text("[{:process 0 :type")
    result = CliRunner().invoke(cli, ["import", str(source), "--store", str(tmp_path / "store")])
    assert result.exit_code != 0
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {source}: not valid EDN")
