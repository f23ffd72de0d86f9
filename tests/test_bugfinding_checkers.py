"""The durability-audit anomalies on constructed histories: each one with a history
that has it and one that does not (Jepsen's Kafka/queue names, snake_case)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checkers.pipeline import check_runs, find_runs
from test_checkers_pipeline import MS, RunBuilder, spark  # noqa: F401 - the session's Spark fixture

pytestmark = [pytest.mark.spark, pytest.mark.jvm]


def msg(msg_id: str, offset: int, queue: int = 0) -> dict[str, Any]:
    return {"id": msg_id, "key": queue, "queue": queue, "offset": offset}


class QueueRun(RunBuilder):
    """A queue run on queue 0: sends that land at offsets, polls, and the audit."""

    def __init__(self, store: Path, name: str, delivery: str = "at-least-once") -> None:
        super().__init__(store, name, {"workload": "queue", "delivery": delivery})
        self.now = 0.0

    def _next(self) -> tuple[float, float]:
        self.now += 10
        return self.now, self.now + 5

    def send(self, msg_id: str, offset: int) -> None:
        start, end = self._next()
        self.op(1, "send", start, end, key=0, value={"id": msg_id, "payload": "p"},
                result={"id": msg_id, "payload": "p", "queue": 0, "offset": offset})

    def poll(self, *items: dict[str, Any]) -> None:
        start, end = self._next()
        self.op(2, "poll", start, end, key=0, value={"offset": 0}, result=list(items))

    def audit(self, *items: dict[str, Any]) -> None:
        for found in (list(items), []):       # the last, empty read is the end marker
            start, end = self._next()
            self.op(3, "audit", start, end, key=0, value={"offset": 0}, result=found)


def clean(store: Path, name: str = "clean", delivery: str = "at-least-once") -> QueueRun:
    run = QueueRun(store, name, delivery)
    for i in range(3):
        run.send(f"m{i}", i)
    run.poll(msg("m0", 0), msg("m1", 1))
    run.poll(msg("m2", 2))
    run.audit(msg("m0", 0), msg("m1", 1), msg("m2", 2))
    return run


def lost_after_consume(store: Path) -> None:
    run = QueueRun(store, "lost-after-consume")
    for i in range(3):
        run.send(f"m{i}", i)
    run.poll(msg("m0", 0), msg("m1", 1), msg("m2", 2))
    run.audit(msg("m0", 0))                    # the tail was truncated by a failover


def inconsistent(store: Path) -> None:
    run = QueueRun(store, "inconsistent")
    run.send("m0", 0)
    run.send("m1", 1)
    run.poll(msg("m0", 0), msg("m1", 1))
    run.send("m2", 1)                          # a new master handed out offset 1 again
    run.poll(msg("m2", 1))
    run.audit(msg("m0", 0), msg("m2", 1))


def poll_skip(store: Path) -> None:
    run = QueueRun(store, "poll-skip")
    for i in range(4):
        run.send(f"m{i}", i)
    run.poll(msg("m0", 0))
    run.poll(msg("m3", 3))                     # offsets 1 and 2 hold m1, m2
    run.audit(*(msg(f"m{i}", i) for i in range(4)))


def nonmonotonic(store: Path, name: str, delivery: str) -> None:
    run = QueueRun(store, name, delivery)
    run.send("m0", 0)
    run.send("m1", 1)
    run.poll(msg("m0", 0), msg("m1", 1))
    run.poll(msg("m1", 1))                     # the position went back: redelivery
    run.audit(msg("m0", 0), msg("m1", 1))


def unaudited(store: Path) -> None:
    """No audit: a consumed message cannot be judged missing from the final log."""
    run = QueueRun(store, "unaudited")
    run.send("m0", 0)
    run.poll(msg("m0", 0))


class LogRun(RunBuilder):
    def __init__(self, store: Path, name: str) -> None:
        super().__init__(store, name, {"workload": "log"})

    def append(self, value: int, offset: int, start: float, end: float) -> None:
        self.op(1, "append", start, end, key=0, value=value, result={"offset": offset, "value": value})

    def read(self, offset: int, value: Any, start: float, end: float) -> None:
        self.op(2, "read", start, end, key=0, value={"offset": offset}, result={"offset": offset, "value": value})

    def audit(self, *values: int) -> None:
        items = [{"key": 0, "queue": 0, "offset": i, "value": v} for i, v in enumerate(values)]
        self.op(3, "audit", 1000, 1010, key=0, value={"offset": 0}, result=items)
        self.op(3, "audit", 1020, 1030, key=0, value={"offset": len(values)}, result=[])


def log_stale_read(store: Path) -> None:
    run = LogRun(store, "log-stale-read")
    run.append(7, 0, 0, 10)
    run.append(8, 1, 20, 30)
    run.read(0, None, 40, 50)                  # offsets 0-1 acknowledged, yet nothing at 0
    run.audit(7, 8)


def log_clean(store: Path) -> None:
    run = LogRun(store, "log-clean")
    run.read(0, None, 0, 30)                   # concurrent with the append: nothing is fine
    run.append(7, 0, 5, 10)
    run.read(0, 7, 40, 50)
    run.audit(7)


def log_diverged(store: Path) -> None:
    run = LogRun(store, "log-diverged")
    run.append(7, 0, 0, 10)
    run.append(8, 1, 20, 30)
    run.read(1, 9, 40, 50)                     # offset 1 holds 8, and 9 was never appended there
    run.audit(7)                               # and 8 is gone: lost


def served(run: RunBuilder, process: int, msg_id: str, start: float, node: str) -> None:
    """An ok send invoked at `start` ms, served by `node` 10 ms later."""
    worker, value = f"w{process}", {"id": msg_id}
    run.event(worker, process=process, type="invoke", f="send", key=0, value=value, time=int(start * MS))
    run.event(worker, process=process, type="ok", f="send", key=0, value=value, time=int((start + 10) * MS),
              node=node)


def stalled_master(store: Path) -> None:
    """controller-3 at fast timing (detection 1.5 s, window needed 3.5 s): a 4 s window in which
    one client blocks on the stalled master for 2 s, then n2 takes over; and a 1 s window."""
    run = RunBuilder(store, "stalled-master", {
        "workload": "queue", "profile": "controller-3", "timing": "fast", "rate": 100,
        "plan": {"operations": 100, "by_f": {"send": 50, "poll": 50}}})
    for i, t in enumerate(range(0, 1000, 100)):
        served(run, 1, f"a{i}", t, "n1")
    run.op(2, "send", 1000, 3000, "info", key=0, value={"id": "stuck"}, error="timeout")
    for i, t in enumerate(range(3000, 8000, 100)):
        served(run, 3, f"b{i}", t, "n2")
    run.fault("leader-partition", 1000, 5000)
    run.fault("leader-partition", 6000, 7000, targets=("n2",))


SCENARIOS = [stalled_master, clean, lambda s: clean(s, "clean-exactly-once", "exactly-once"), lost_after_consume,
             inconsistent, poll_skip, lambda s: nonmonotonic(s, "nonmonotonic", "at-least-once"),
             lambda s: nonmonotonic(s, "nonmonotonic-exactly-once", "exactly-once"), unaudited,
             log_stale_read, log_clean, log_diverged]


@pytest.fixture(scope="module")
def checked(spark, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:  # noqa: F811
    store = tmp_path_factory.mktemp("store") / "campaign"
    for scenario in SCENARIOS:
        scenario(store)
    runs = find_runs([store])
    return {run.name: result for run, result in zip(runs, check_runs(runs))}


def queue_of(checked, name):
    return checked[name]["checkers"]["queue"]


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
    assert sorted(m["id"] for m in section["lost_after_consume"]) == ["m1", "m2"]


def test_without_an_audit_consumed_messages_are_not_judged(checked):
    section = queue_of(checked, "unaudited")
    assert section["valid"] is True and section["audit"]["complete"] is False


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
    assert checked["log-clean"]["checkers"]["linearizable"]["valid"] is True


def test_a_log_offset_read_with_another_value_is_inconsistent_and_a_missing_append_is_lost(checked):
    section = queue_of(checked, "log-diverged")
    assert section["valid"] is False
    assert anomalies(section) == {"inconsistent_offsets": 1, "lost": 1}
    assert section["inconsistent_offsets"][0]["ids"] == ["8", "9"]
    assert [m["id"] for m in section["lost"]] == ["8"]


def test_availability_over_time_shows_an_outage_that_the_attempt_ratio_hides(checked):
    window = checked["stalled-master"]["checkers"]["rto"]["windows"][0]
    assert window["availability_attempts"] == pytest.approx(20 / 21)
    assert window["availability"] == pytest.approx(20 / 40)       # 2 s of 4 s had a successful write
    assert window["goodput"] == pytest.approx(20 / 4 / 50)        # 5 ok writes/s of 50 requested
    assert window["unavailable_s"] == pytest.approx(2.01)


def test_each_window_says_whether_it_outlasted_failure_detection(checked):
    rto = checked["stalled-master"]["checkers"]["rto"]
    long, short = rto["windows"]
    assert long["detection_s"] == short["detection_s"] == pytest.approx(1.5)
    assert (long["exercises_failover"], short["exercises_failover"]) == (True, False)
    assert rto["short_windows"] == [1] and rto["windows_exercising_failover"] == 1


def test_failovers_count_changes_of_the_node_serving_successful_writes(checked):
    rto = checked["stalled-master"]["checkers"]["rto"]
    assert rto["failovers"] == 1
    assert [m["node"] for m in rto["masters"]] == ["n1", "n2"]
