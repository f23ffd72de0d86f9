"""Explicit schedules: what a run stores, `chaos run --schedule` replays the same operations
and faults at the same offsets, and bad schedule files are one-line errors."""
from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from harness import schedule as schedule_file
from harness.cli import EXIT_ERROR, cli
from harness.plan import fault_schedule, from_spec, plan_summary, spec_values, window_events
from harness.spec import build_spec

SEEDED = {"profile": "controller-unclean", "faults": ["leader-partition", "random-kill"], "targets": ["brokers"],
          "timing": "fast", "time": 30, "seed": 11, "concurrency": 6, "rate": 40, "queues": 3}


def replayed(spec, **extra):
    return build_spec({**spec_values(from_spec(spec)), **extra}, check_store=False)


def test_a_seeded_run_and_the_replay_of_its_schedule_plan_the_same_operations_and_faults():
    spec = build_spec(SEEDED, check_store=False)
    replay = replayed(spec)
    assert replay.windows is not None and len(replay.windows) >= 3
    original, again = plan_summary(spec), plan_summary(replay)
    assert again["operations_digest"] == original["operations_digest"]
    assert again["faults_digest"] == original["faults_digest"]
    events = fault_schedule(replay)
    assert all(event.roles == ("brokers",) for event in events)


def test_overlapping_faults_replay_at_the_same_offsets_with_the_same_target_seeds():
    spec = build_spec({**SEEDED, "faults": ["random-partition"], "overlap": ["random-kill"]}, check_store=False)
    timeline = lambda s: sorted((e.offset, e.phase, e.fault.label(), e.seed) for e in fault_schedule(s))  # noqa: E731
    assert timeline(replayed(spec)) == timeline(spec)


def test_the_file_round_trips_and_a_window_without_a_seed_keeps_its_targets_when_others_go():
    spec = build_spec(SEEDED, check_store=False)
    schedule = from_spec(spec)
    text = schedule_file.dump(schedule)
    assert text.startswith("# A chaos schedule") and "chaos run --schedule" in text
    assert schedule_file.parse(text) == schedule
    bare = schedule.replace(windows=[{**w.model_dump(), "seed": None} for w in schedule.windows])
    kept = bare.replace(windows=[bare.windows[-1].model_dump()])
    alone = window_events(kept.windows, kept.seed)[0]
    assert alone.seed == window_events(bare.windows, bare.seed)[-1].seed


def test_a_schedule_carries_the_runs_library_bugs_and_replays_them():
    spec = build_spec({**SEEDED, "profile": "controller-3", "bugs": ["ack-without-sync-state-set"]},
                      check_store=False)
    schedule = from_spec(spec)
    assert "ack-without-sync-state-set" in schedule_file.dump(schedule)
    assert replayed(spec).bugs == ("ack-without-sync-state-set",)
    assert "bugs" not in schedule_file.dump(from_spec(build_spec(SEEDED, check_store=False)))


def test_dry_run_of_a_stored_schedule_prints_the_same_digests(tmp_path):
    args = ["run", "--dry-run", "--profile", "controller-unclean", "--fault", "leader-partition",
            "--target", "brokers", "--timing", "fast", "--time", "20", "--seed", "5"]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0, first.output
    path = tmp_path / "schedule.yaml"
    schedule_file.save(path, from_spec(build_spec(
        {"profile": "controller-unclean", "faults": ["leader-partition"], "targets": ["brokers"],
         "timing": "fast", "time": 20, "seed": 5}, check_store=False)))
    again = CliRunner().invoke(cli, ["run", "--dry-run", "--schedule", str(path)])
    assert again.exit_code == 0, again.output
    digests = lambda out: re.findall(r"digest (\w+)", out)  # noqa: E731
    assert digests(again.output) == digests(first.output) and len(digests(first.output)) == 2
    other = CliRunner().invoke(cli, ["run", "--dry-run", "--schedule", str(path), "--seed", "6"])
    assert digests(other.output)[0] != digests(first.output)[0]


GOOD = """profile: controller-unclean
workload: queue
seed: 3
timing: fast
shape: {time: 10, recovery: 3, rate: 50, concurrency: 4, queues: 2, keys: 3}
windows:
- {fault: leader-partition, targets: [brokers], start: 1, length: 4}
"""


@pytest.mark.parametrize("text,extra,message", [
    (GOOD.replace("length: 4", "length: 40"), [], "windows[0] (leader-partition at 1s for 40s) ends after"),
    (GOOD.replace("leader-partition", "meteor"), [], "unknown fault 'meteor'"),
    (GOOD.replace("[brokers]", "[routers]"), [], "unknown role(s) routers"),
    (GOOD.replace("profile: controller-unclean", "profile: nope"), [], "unknown profile 'nope'"),
    (GOOD.replace("seed: 3", "seed: 3\nformat: 9"), [], "format 9 is not supported"),
    (GOOD + "colour: red\n", [], "colour: Extra inputs are not permitted"),
    ("- just a list\n", [], "expected a mapping"),
    ("a: [\n", [], "not YAML"),
    (GOOD, ["--fault", "random-kill"], "give the fault windows in the file, not --fault"),
])
def test_bad_schedule_files_are_one_line_errors(tmp_path, text, extra, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    result = CliRunner().invoke(cli, ["run", "--dry-run", "--schedule", str(path), *extra])
    assert result.exit_code == EXIT_ERROR, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and message.replace("Value error, ", "") in lines[0], result.output


def test_a_good_schedule_file_dry_runs(tmp_path):
    path = tmp_path / "good.yaml"
    path.write_text(GOOD)
    result = CliRunner().invoke(cli, ["run", "--dry-run", "--schedule", str(path)])
    assert result.exit_code == 0, result.output
    assert "fault windows: 1 from the schedule file" in result.output
    assert re.search(r"1\.000s\s+start\s+leader-partition", result.output)
    assert re.search(r"5\.000s\s+stop\s+leader-partition", result.output)
