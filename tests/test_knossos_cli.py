"""`chaos lin FILE...`: a verdict line per file and exit codes 0/1/2."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import UserError, cli
from harness.commands.lin import lin
from tests.conftest import require

pytestmark = pytest.mark.jvm

KNOSSOS = Path(__file__).resolve().parents[1].parent / "shared" / "testdata" / "knossos"


@pytest.fixture(autouse=True)
def _knossos_testdata():
    require(KNOSSOS.is_dir(), f"Knossos' test histories are missing at {KNOSSOS}")


def run(*args: str):
    return CliRunner().invoke(lin, [str(a) for a in args])


def test_lin_is_a_chaos_command():
    assert cli.get_command(None, "lin") is lin


def test_chaos_lin_does_not_load_the_deployment_stack():
    """Commands load lazily: checking a history file needs no Fabric, Paramiko or deployer."""
    code = ("import sys; from harness.cli import cli; cli.get_command(None, 'lin'); "
            "print(sorted(m for m in ('fabric', 'paramiko', 'sut.deploy', 'pyspark') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_good_edn_histories_are_valid_and_exit_0():
    good = KNOSSOS / "cas-register" / "good"
    result = run(good / "cas-register-bug.edn", good / "mongodb-v0-ack-rollback-9.edn",
                 "--model", "cas-register", "--init", "0")
    assert result.exit_code == 0, result.output
    assert result.output.count(": valid") == 2


def test_a_bad_history_exits_1_and_names_the_op():
    result = run(KNOSSOS / "cas-register" / "bad" / "bad-analysis.edn",
                 KNOSSOS / "cas-register" / "good" / "cas-register-bug.edn", "--init", "0")
    assert result.exit_code == 1
    assert "bad-analysis.edn: INVALID cannot linearize #14 ok read 2 by process 21" in result.output
    assert "cas-register-bug.edn: valid" in result.output


def test_our_json_lines_with_keys_are_checked_per_key(tmp_path):
    events = [{"process": 0, "type": "invoke", "f": "put", "key": "a", "value": "x"},
              {"process": 0, "type": "ok", "f": "put", "key": "a", "value": "x"},
              {"process": 1, "type": "invoke", "f": "get", "key": "b", "value": None},
              {"process": 1, "type": "ok", "f": "get", "key": "b", "value": "x"}]
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    result = run(path, "--model", "kv", "--json")
    assert result.exit_code == 1
    line = json.loads(result.output)
    assert line["valid"] is False and line["key"] == "b" and line["op"]["index"] == 3


def test_a_time_limit_exits_2_with_the_cause(tmp_path):
    history = [{"process": p, "type": "invoke", "f": "write", "value": p + 1} for p in range(18)]
    history += [{"process": p, "type": "info", "f": "write", "value": p + 1} for p in range(18)]
    for v in [*range(1, 19), 999]:
        history += [{"process": 99, "type": "invoke", "f": "read", "value": None},
                    {"process": 99, "type": "ok", "f": "read", "value": v}]
    path = tmp_path / "hard.json"
    path.write_text(json.dumps(history))
    result = run(path, "--init", "0", "--time-limit", "0.2")
    assert result.exit_code == 2
    assert "hard.json: unknown (timeout" in result.output


def test_multi_register_init_may_be_edn():
    result = run(KNOSSOS / "multi-register" / "good" / "multi-register.edn",
                 "--model", "multi-register", "--init", "{:x 0 :y 0}")
    assert result.exit_code == 0, result.output


def test_a_malformed_file_is_one_line_and_the_user_error_exit_code(tmp_path):
    path = tmp_path / "broken.jsonl"
    path.write_text('{"process": 0, "type": "invoke", "f": "read"}\n{"process": 0, "type":\n')
    result = run(path, KNOSSOS / "cas-register" / "good" / "cas-register-bug.edn")
    assert result.exit_code == UserError.exit_code
    assert "cas-register-bug.edn: valid" in result.output
    assert "broken.jsonl:2: malformed history line" in result.output
    assert "Traceback" not in result.output


def test_an_unknown_model_is_refused_by_the_option():
    result = run("x.edn", "--model", "queue")
    assert result.exit_code == 2 and "Invalid value for '--model'" in result.output


def test_an_init_that_is_neither_json_nor_edn_is_refused():
    result = run(KNOSSOS / "mutex" / "bad" / "etcd.edn", "--init", "{:x")
    assert result.exit_code == UserError.exit_code and "--init '{:x' is neither JSON nor EDN" in result.output


def test_many_files_in_one_call_each_get_their_own_verdict_in_order(tmp_path):
    import random

    from support.knossos_generate import adversarial_history, random_history
    rng = random.Random(4)
    expected = []
    paths = []
    for i in range(30):
        if i % 3 == 0:
            history, _ = adversarial_history("cas-register", rng, ops=30, processes=4)
        else:
            history = random_history("cas-register", rng, ops=30, processes=4, values=10**6)
        path = tmp_path / f"h{i:02}.json"
        path.write_text(json.dumps(history))
        paths.append(path)
        expected.append("INVALID" if i % 3 == 0 else "valid")
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps([{"process": 0, "type": "ok", "f": "read", "value": 1}]))
    result = run(*paths[:15], broken, *paths[15:], "--init", "0")
    lines = result.output.splitlines()
    assert result.exit_code == 1
    assert [line.split(": ")[1].split(" ")[0] for line in lines
            if not line.startswith("error")] == expected
    assert f"error: {broken}: event #0: ok of process 0 without an invoke" in result.output
