"""Adversarial histories: linearizable histories of every model with one
completion made impossible (tests/support/knossos_generate.py, mutate). The engine
must say no, name the mutated op or one that depends on it, report the same
key and op every time, and stop the other keys' searches."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from checkers.knossos import MODELS, analysis, analyze_batch
from support import knossos_reference as reference
from support.knossos_generate import adversarial_history, initial, random_history
from checkers.knossos.history import operations

pytestmark = pytest.mark.jvm


@pytest.mark.parametrize("model", MODELS)
def test_every_mutated_history_is_found_and_the_mutated_op_is_named(model):
    rng = random.Random(MODELS.index(model))
    shapes = [(1000, 5, 10), (1000, 20, 10), (300, 50, 10)]
    made = [adversarial_history(model, rng, ops=ops, processes=procs, keys=keys, info=0.05)
            for ops, procs, keys in shapes for _ in range(2)]
    verdicts = analyze_batch(model, [h for h, _ in made], init=initial(model), time_limit=60)
    for (history, mutation), got in zip(made, verdicts):
        assert got["valid"] is False, (mutation, got.get("cause"))
        assert mutation.may_blame(got["op"]["index"]), (mutation, got["op"])


@pytest.mark.parametrize("model", MODELS)
def test_the_same_histories_unmutated_are_linearizable(model):
    rng = random.Random(100 + MODELS.index(model))
    histories = [random_history(model, rng, ops=1000, processes=procs, keys=keys, info=0.05,
                                values=10**9) for procs, keys in [(5, 10), (10, 10)]]
    verdicts = analyze_batch(model, histories, init=initial(model), time_limit=60)
    assert [v["valid"] for v in verdicts] == [True, True]


@pytest.mark.parametrize("model", MODELS)
def test_small_mutated_histories_are_not_linearizable_by_the_reference_either(model):
    rng = random.Random(7)
    for _ in range(50):
        history, mutation = adversarial_history(model, rng, ops=rng.randint(6, 12),
                                                processes=rng.randint(1, 4), info=0.2)
        want = reference.check(model, operations(history), initial(model))
        assert want["valid"] is False, (mutation, history)


def _two_bad_keys() -> tuple[list[dict], str]:
    """Key "a" is expensive to refute (its mutation is at the very end, with
    clients hanging over the whole history); key "b" fails at once."""
    hard, _ = adversarial_history("kv", random.Random(3), ops=300, processes=8, info=0.0,
                                  stragglers=3, late=True)  # ~170,000 configurations
    easy, _ = adversarial_history("kv", random.Random(4), ops=40, processes=3, info=0.0)
    events = [{**e, "key": "a"} for e in hard]
    events += [{**e, "key": "b", "process": f"b{e['process']}"} for e in easy]
    return events, "b"


def test_the_first_key_proven_invalid_stops_the_others_and_is_reported_every_time():
    history, cheap = _two_bad_keys()
    results = [analysis("kv", history, time_limit=60) for _ in range(4)]
    assert {r["key"] for r in results} == {cheap}
    assert len({r["op"]["index"] for r in results}) == 1
    assert all(r["stopped"] == 1 and r["partitions"] == 2 for r in results)


def test_a_key_proven_invalid_alone_is_reported_when_the_other_key_is_valid():
    history, _ = _two_bad_keys()
    valid_b = random_history("kv", random.Random(5), ops=40, processes=3, info=0.0)
    history = [e for e in history if e["key"] == "a"] + [{**e, "key": "b", "process": f"b{e['process']}"}
                                                         for e in valid_b]
    result = analysis("kv", history, time_limit=60)
    assert result["valid"] is False and result["key"] == "a" and result["stopped"] == 0


def test_the_reported_key_and_op_do_not_depend_on_the_thread_count():
    root = Path(__file__).resolve().parents[1]
    script = ("import json, sys; sys.path[:0] = ['.', 'tests'];"
              "from tests.test_knossos_adversarial import _two_bad_keys;"
              "from checkers.knossos import analysis;"
              "r = analysis('kv', _two_bad_keys()[0], time_limit=60);"
              "print(json.dumps([r['key'], r['op'], r['stopped']]))")
    outputs = []
    for threads in (1, 3):
        env = {**os.environ, "KNOSSOS_JVM_OPTS": f"-Dchaos.lin.threads={threads}"}
        done = subprocess.run([sys.executable, "-c", script], cwd=root, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        outputs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    in_process = analysis("kv", _two_bad_keys()[0], time_limit=60)
    assert outputs[0] == outputs[1] == [in_process["key"], in_process["op"], 1]
