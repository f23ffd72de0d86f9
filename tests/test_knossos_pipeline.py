"""The pipeline's per-partition check (checkers.linearizable.check_partition)
with the real engine: the keys of a run in one Spark partition are checked
together, and once one is proven invalid the others stop."""
from __future__ import annotations

import json
import random

import pytest

from checkers import linearizable
from support.knossos_generate import adversarial_history, random_history

pytestmark = pytest.mark.jvm


def _rows(run: int, key: str, history: list[dict]) -> list[dict]:
    """History events -> rows of checked/history.parquet (times are positions)."""
    rows, pending = [], {}
    for pos, e in enumerate(history):
        if e["type"] == "invoke":
            pending[e["process"]] = row = {
                "run": run, "key": key, "index": pos, "process": e["process"], "f": e["f"],
                "type": "info", "invoke_time": pos, "complete_time": None,
                "invoke_value": json.dumps(e["value"]), "value": None}
            rows.append(row)
        else:
            row = pending.pop(e["process"])
            row.update(type=e["type"], complete_time=pos, value=json.dumps(e["value"]))
    return rows


def test_keys_of_a_partition_are_checked_together_and_stop_at_the_first_invalid_key():
    hard, _ = adversarial_history("kv", random.Random(3), ops=300, processes=8, info=0.0,
                                  stragglers=3, late=True)
    easy, _ = adversarial_history("kv", random.Random(4), ops=40, processes=3, info=0.0)
    valid = random_history("kv", random.Random(5), ops=60, processes=3, info=0.1)
    rows = _rows(0, "a", hard) + _rows(0, "b", easy) + _rows(0, "c", valid)
    out = {key: json.loads(v) for _, key, v in
           linearizable.check_partition(iter(rows), {0: "kv"}, {0: 60.0})}
    assert out["b"]["valid"] is False and out["c"]["valid"] is True
    assert out["a"]["valid"] == "unknown" and out["a"]["cause"] == "stopped"
    section = linearizable.linearizable_section("kv", 60.0, sorted(out.items()))
    assert section["valid"] is False
    assert section["counts"] == {"valid": 1, "invalid": 1, "unknown": 0}
    assert section["stopped_keys"] == 1 and section["problems"] == [section["problems"][0]]


def test_a_malformed_key_history_keeps_its_error_and_the_other_keys_their_verdicts():
    valid = random_history("register", random.Random(6), ops=20, processes=2, info=0.0)
    rows = _rows(0, "a", valid)
    rows.append({"run": 0, "key": "b", "index": 999, "process": 1, "f": "read", "type": "ok",
                 "invoke_time": 5, "complete_time": 6, "invoke_value": "null", "value": "{"})
    out = {key: json.loads(v) for _, key, v in
           linearizable.check_partition(iter(rows), {0: "register"}, {0: 10.0})}
    assert out["a"]["valid"] is True
    assert out["b"]["valid"] == "unknown" and "JSONDecodeError" in out["b"]["error"]
