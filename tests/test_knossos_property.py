"""Differential tests: the JVM engine and the pure-Python reference agree on
thousands of random small concurrent histories of every model, with info
(crashed) ops, failed ops and corrupted results mixed in."""
from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers.knossos import MODELS, analyze_batch
from support import knossos_reference as reference
from support.knossos_generate import adversarial_history, initial, random_history
from checkers.knossos.history import operations

pytestmark = pytest.mark.jvm

BATCH = 100      # histories per JVM call
EXAMPLES = 20    # hypothesis examples per model: 2,000 histories per model


def _batch(model: str, seed: int, processes: int, info: float) -> list[list[dict]]:
    rng = random.Random(seed)
    return [random_history(model, rng, ops=rng.randint(1, 10), processes=processes, info=info,
                           corrupt=0.6) for _ in range(BATCH)]


@pytest.mark.parametrize("model", MODELS)
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), processes=st.integers(1, 4),
       info=st.sampled_from([0.0, 0.2, 0.5]), nil_reads=st.sampled_from(["absent", "unknown"]))
def test_jvm_engine_and_python_reference_agree(model, seed, processes, info, nil_reads):
    histories = _batch(model, seed, processes, info)
    verdicts = analyze_batch(model, histories, init=initial(model), time_limit=60,
                             nil_reads=nil_reads)
    for history, got in zip(histories, verdicts):
        ops = operations(history)
        want = reference.check(model, ops, initial(model), nil_reads=nil_reads)
        assert got["valid"] == want["valid"], history
        if want["valid"] is False and got["partitions"] == 1:
            # For an invalid history both searches visit every reachable
            # configuration, so they must blame the same op.
            assert got["op"] == ops[want["op"]].shown_completion(), history


@pytest.mark.parametrize("model", MODELS)
def test_random_histories_are_both_linearizable_and_not(model):
    histories = _batch(model, seed=7, processes=3, info=0.2)
    verdicts = {r["valid"] for r in analyze_batch(model, histories, init=initial(model))}
    assert verdicts == {True, False}


@pytest.mark.parametrize("model", MODELS)
def test_uncorrupted_histories_are_linearizable(model):
    rng = random.Random(11)
    histories = [random_history(model, rng, ops=40, processes=5, info=0.3) for _ in range(20)]
    assert all(r["valid"] is True
               for r in analyze_batch(model, histories, init=initial(model)))


MUTATED_EXAMPLES = 10  # x BATCH: 1,000 mutated histories per model


@pytest.mark.parametrize("model", MODELS)
@settings(max_examples=MUTATED_EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), processes=st.integers(1, 5),
       info=st.sampled_from([0.0, 0.2]), late=st.booleans())
def test_jvm_engine_and_python_reference_agree_on_mutated_histories(model, seed, processes, info,
                                                                    late):
    rng = random.Random(seed)
    made = [adversarial_history(model, rng, ops=rng.randint(4, 14), processes=processes,
                                info=info, late=late) for _ in range(BATCH)]
    verdicts = analyze_batch(model, [h for h, _ in made], init=initial(model), time_limit=60)
    for (history, mutation), got in zip(made, verdicts):
        ops = operations(history)
        want = reference.check(model, ops, initial(model))
        assert got["valid"] is False and want["valid"] is False, (mutation, history)
        assert got["op"] == ops[want["op"]].shown_completion(), history
        assert mutation.may_blame(got["op"]["index"]), (mutation, history)
