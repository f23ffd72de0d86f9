"""Inputs without bounds are refused in one line before anything is created: `chaos run`,
`chaos campaign` and `chaos import`; and the operation plan is never held whole."""
from __future__ import annotations

import tracemalloc

import pytest
from click.testing import CliRunner

from harness.cli import EXIT_ERROR, cli
from harness.plan import make_workload, operation_plan, plan_summary
from harness.spec import build_spec
from workloads.generator import worker_streams


def chaos(*args: str):
    return CliRunner().invoke(cli, list(args))


def one_error_line(result) -> str:
    assert result.exit_code in (2, EXIT_ERROR), result.output
    assert "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    return lines[0]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("args,message", [
    (["--rate", "inf"], "--rate inf: Input should be a finite number"),
    (["--rate", "nan"], "--rate nan: Input should be a finite number"),
    (["--time", "inf"], "--time inf: Input should be a finite number"),
    (["--time", "1e300"], "more than the 2.592e+06s (30 days)"),
    (["--rate", "1e9", "--time", "3600"], "more than the 5e+07 one control node can record"),
    (["--fault", "random-kill", "--rate", "1", "--time", "2000000", "--interval", "0.001", "--fault-duration", "0.001"],
     "fault windows"),
])
def test_unbounded_run_options_are_refused_before_the_store_exists(tmp_path, args, message):
    store = tmp_path / "store"
    line = one_error_line(chaos("run", "--profile", "single-broker", "--fault", "noop", *args,
                                "--store", str(store), "--dry-run"))
    assert message in line, line
    assert not store.exists()


CAMPAIGN = """\
name: bounded
profiles: [single-broker]
faults: [noop]
durations: {run: RUN, between: 2, fault: 2, recovery: 2}
rate: RATE
seed: 3
"""


@pytest.mark.parametrize("run,rate,message", [
    ("10", ".inf", "Input should be a finite number"),
    ("1e400", "20", "Input should be a finite number"),
    ("2000000", "1000", "one control node can record"),
])
def test_unbounded_campaign_sizes_are_refused_before_the_store_exists(tmp_path, run, rate, message):
    path = tmp_path / "bounded.yaml"
    path.write_text(CAMPAIGN.replace("RUN", run).replace("RATE", rate))
    store = tmp_path / "store"
    line = one_error_line(chaos("campaign", str(path), "--store", str(store)))
    assert message in line, line
    assert not store.exists()


@pytest.mark.parametrize("text,message", [
    ('[{:process 0 :type :invoke :f :read :time "abc"}]', ":time must be a number"),
    ("[{:process 0 :type :invoke :f :read :time 1e400}]", ":time must be a number"),
    ("[{:process 0 :type :invoke :f :read :value " + "[" * 5000 + "]" * 5000 + "}]", "nested"),
    ("[" * 100000 + "]" * 100000, "not"),
])
def test_bad_edn_imports_are_one_line_errors_before_the_store_exists(tmp_path, text, message):
    source = tmp_path / "bad.edn"
    source.write_text(text)
    store = tmp_path / "store"
    line = one_error_line(chaos("import", str(source), "--store", str(store)))
    assert line.startswith(f"Error: {source}") and message in line, line
    assert not store.exists()


def test_the_operation_plan_is_generated_as_it_is_followed():
    """A soak's plan is not held whole: drawing every operation of a long plan through the
    workers' streams keeps memory far below the plan's size; the digest is unchanged."""
    spec = build_spec({"profile": "single-broker", "fault": None, "faults": ["noop"], "time": 200,
                       "rate": 100, "recovery": 0}, check_store=False)
    ops = operation_plan(spec, make_workload(spec))
    tracemalloc.start()
    try:
        count = sum(1 for _ in _round_robin(worker_streams(ops, spec.concurrency)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert count > 15_000
    assert peak < 1_500_000, f"peak {peak} bytes for {count} operations"  # held whole: ~13 MB
    assert plan_summary(spec, ops)["operations"] == count


def _round_robin(streams):
    """Draw the streams as the workers do: each in turn, one operation at a time."""
    live = list(streams)
    while live:
        for stream in list(live):
            op = next(stream, None)
            if op is None:
                live.remove(stream)
            else:
                yield op
