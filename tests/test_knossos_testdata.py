"""Knossos' own test histories get the verdict of their folder (good/bad), and
the bad ones name the op Knossos' tests expect."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pytest

from checkers.knossos import analysis
from checkers.knossos import load_history as _parse
from conftest import knossos_testdata, require_knossos_testdata

pytestmark = pytest.mark.jvm

TESTDATA = knossos_testdata()
INIT = {"cas-register": 0, "multi-register": {"x": 0, "y": 0}, "mutex": None}
# Knossos reads a nil read as "value unknown"; several good histories need that.
FILES = sorted(TESTDATA.glob("*/*/*.edn"))


@lru_cache(maxsize=None)
def _parsed(path: Path) -> tuple:
    return tuple(_parse(path))  # edn_format is slow: parse each file once


def load_history(path: Path) -> list[dict]:
    return list(_parsed(path))


def test_the_knossos_test_set_is_where_ci_has_it():
    require_knossos_testdata()
    assert len(FILES) > 100, f"expected Knossos' histories under {TESTDATA}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: "/".join(p.parts[-3:]))
def test_history_gets_the_verdict_of_its_folder(path):
    model, folder = path.parts[-3], path.parts[-2]
    result = analysis(model, load_history(path), init=INIT[model], time_limit=60,
                      nil_reads="unknown")
    assert result["valid"] is (folder == "good"), result.get("cause")
    if folder == "bad":
        op = result["op"]
        assert op["type"] == "ok" and isinstance(op["index"], int)
        assert result["configs"], "an invalid verdict shows the configurations that got furthest"


# The failing op (with its index in the file) and previous ok that Knossos'
# wgl tests assert for these files.
EXPECTED = {
    "bad-analysis.edn": ({"process": 21, "f": "read", "value": 2, "index": 14},
                         {"process": 19, "f": "read", "value": 0, "index": 11}),
    "cas-failure.edn": ({"process": 70, "f": "read", "value": 0, "index": 491},
                        {"process": 74, "f": "read", "value": 0, "index": 478}),
    "rethink-fail-minimal.edn": ({"process": 1, "f": "read", "value": 3, "index": 4}, None),
    "rethink-fail-smaller.edn": ({"process": 12, "f": "read", "value": 3, "index": 217}, None),
    "immediate-failure.edn": ({"process": 1, "f": "read", "value": 3, "index": 3}, None),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_bad_history_names_the_op_knossos_names(name):
    result = analysis("cas-register", load_history(TESTDATA / "cas-register" / "bad" / name),
                      init=0, nil_reads="unknown")
    want_op, want_previous = EXPECTED[name]
    assert {k: result["op"][k] for k in want_op} == want_op
    if want_previous is not None:
        assert {k: result["previous-ok"][k] for k in want_previous} == want_previous


def test_final_configurations_show_the_register_value_and_pending_ops():
    result = analysis("cas-register",
                      load_history(TESTDATA / "cas-register" / "bad" / "cas-failure.edn"), init=0,
                      nil_reads="unknown")
    # Knossos: the only way to the final read of 0 leaves the register at 2
    # (process 76 wrote 2), so no configuration can read 0.
    assert [c["model"] for c in result["configs"]] == [2]
    pending = result["configs"][0]["pending"]
    assert {"process": 70, "type": "invoke", "f": "read"} in [
        {k: p[k] for k in ("process", "type", "f")} for p in pending]


def test_mutex_history_from_etcd_is_not_linearizable_at_a_double_acquire():
    result = analysis("mutex", load_history(TESTDATA / "mutex" / "bad" / "etcd.edn"))
    assert result["valid"] is False
    assert result["op"]["f"] == "acquire" and result["configs"][0]["model"] == "held"


def test_nil_reads_must_be_read_as_unknown_for_knossos_histories():
    history = load_history(TESTDATA / "cas-register" / "good" / "memstress3-1.edn")
    assert analysis("cas-register", history, init=0, nil_reads="unknown")["valid"] is True
    assert analysis("cas-register", history, init=0, nil_reads="absent")["valid"] is False


def test_the_fast_edn_reader_reads_test_histories_exactly_as_edn_format():
    import edn_format

    from checkers.knossos.edn import _fast_forms, from_edn
    sample = FILES[::12]
    for path in sample:
        text = path.read_text()
        assert _fast_forms(text) == [from_edn(f) for f in edn_format.loads_all(text)], path
