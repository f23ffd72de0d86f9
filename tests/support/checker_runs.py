"""Run directories with known answers for the checker tests: a builder of history
files, nemesis.jsonl and run.json, and the scenarios the checker pipeline tests check."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from records import RunJson

MS = 1_000_000
ROOT = Path(__file__).resolve().parents[2]


class RunBuilder:
    """Writes a run directory: history/<worker>.jsonl, nemesis.jsonl, run.json (whose
    `checks` are `spec`)."""

    def __init__(self, store: Path, name: str, spec: dict[str, Any] | None = None,
                 origin_unix: float | None = None) -> None:
        self.dir = store / "runs" / name
        (self.dir / "history").mkdir(parents=True)
        if spec is not None:
            timings = {"history_origin_unix": origin_unix} if origin_unix is not None else {}
            (self.dir / "run.json").write_text(json.dumps(RunJson(run_id=name, checks=spec,
                                                                  timings=timings).as_json()))

    def node_file(self, node: str, process: str, name: str, *lines: str) -> Path:
        """A collected node file, nodes/<node>/<process>/<name>, with these lines."""
        path = self.dir / "nodes" / node / process / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(line + "\n" for line in lines))
        return path

    def line(self, worker: str, text: str) -> None:
        with open(self.dir / "history" / f"{worker}.jsonl", "a") as out:
            out.write(text + "\n")

    def event(self, worker: str, **event: Any) -> None:
        self.line(worker, json.dumps(event))

    def op(self, process: int, f: str, start: float, end: float | None = None, type: str = "ok",
           key: Any = None, value: Any = None, result: Any = None, error: str | None = None) -> None:
        """An invoke at `start` ms and, unless end is None, its completion at `end` ms."""
        worker = f"w{process}"
        self.event(worker, process=process, type="invoke", f=f, key=key, value=value,
                   time=int(start * MS))
        if end is not None:
            self.event(worker, process=process, type=type, f=f, key=key, value=result,
                       time=int(end * MS), error=error)

    def final_log(self, at: float, queues: dict[Any, list[dict[str, Any]]]) -> None:
        """The durability audit at `at` ms: per queue what the final log holds, then the
        empty read that says the queue was read to its end (without it the run is unknown)."""
        for n, (queue, items) in enumerate(queues.items()):
            for step, found in enumerate((items, [])):
                start = at + 20 * (2 * n + step)
                self.op(9, "audit", start, start + 5, key=queue, value={"offset": 0}, result=found)

    def fault(self, name: str, start: float, stop: float | None = None, targets=("n1",)) -> None:
        with open(self.dir / "nemesis.jsonl", "a") as out:
            for phase, at in (("start", start), ("stop", stop)):
                if at is not None:
                    out.write(json.dumps({"process": "nemesis", "type": "info", "f": name,
                                          "value": {"phase": phase, "targets": list(targets)},
                                          "time": int(at * MS)}) + "\n")


def item(msg_id: Any, queue: int | str = "q0", offset: int | None = None) -> dict[str, Any]:
    return {"id": msg_id, "key": queue, "queue": queue, "offset": offset}


def send(run: RunBuilder, process: int, msg_id: Any, start: float, end: float, type: str = "ok",
         key: Any = "q0") -> None:
    run.op(process, "send", start, end, type, key=key, value={"id": msg_id, "payload": "x"},
           result={"id": msg_id, "queue": key, "offset": None} if type == "ok" else None,
           error=None if type == "ok" else "timeout" if type == "info" else "rejected")


def poll(run: RunBuilder, process: int, start: float, end: float, items: list[dict]) -> None:
    run.op(process, "poll", start, end, "ok", key=items[0]["queue"] if items else None,
           value={"offset": 0}, result=items)


# -- scenarios ---------------------------------------------------------------------------

def queue_all(store: Path) -> None:
    """Every queue category; no run.json (the workload is inferred)."""
    run = RunBuilder(store, "queue-all")
    send(run, 1, "m1", 0, 10)
    send(run, 1, "m2", 20, 30)                 # lost
    send(run, 1, "m3", 40, 50)                 # duplicated
    send(run, 1, "m5", 60, 70, "info")         # recovered (info)
    send(run, 11, "m6", 80, 90, "fail")        # recovered although it failed
    send(run, 11, "m7", 100, 110, "info")      # retried ...
    send(run, 21, "m7", 120, 130)              # ... and acknowledged: one message
    send(run, 21, "m8", 140, 150, "info")      # indeterminate, never seen: fine
    poll(run, 2, 200, 210, [item("m1"), item("m3"), item("m4"), item("m5"), item("m6")])
    poll(run, 2, 300, 310, [item("m3"), item("m7")])


def queue_duplicates(store: Path, name: str, delivery: str) -> None:
    """Integer ids and keys, like the queue workload writes them; m2 delivered twice."""
    run = RunBuilder(store, name, {"workload": "queue", "delivery": delivery})
    for i in (1, 2, 3):
        run.op(1, "send", i * 10, i * 10 + 5, key=0, value={"id": i, "shard": "s0", "payload": "p"},
               result={"id": i, "shard": "s0", "payload": "p", "queue": 0, "offset": i - 1})
    poll(run, 2, 100, 110, [item(1, 0, 0), item(2, 0, 1), item(3, 0, 2)])
    poll(run, 2, 200, 210, [item(2, 0, 1)])
    run.final_log(300, {0: [item(1, 0, 0), item(2, 0, 1), item(3, 0, 2)]})


def queue_order(store: Path, name: str, ordered: bool) -> None:
    run = RunBuilder(store, name, {"workload": "queue", "ordered": ordered})
    send(run, 1, "m1", 0, 10)
    send(run, 1, "m2", 20, 30)
    send(run, 1, "m3", 40, 50)
    send(run, 1, "m6", 60, 70)                 # lost: loss, not an order violation
    send(run, 3, "m4", 0, 100, key="q1")       # m4 and m5 overlap: no order between them
    send(run, 4, "m5", 50, 150, key="q1")
    poll(run, 2, 200, 210, [item("m2"), item("m1")])   # m1 was acked before m2 was sent
    poll(run, 2, 300, 310, [item("m3"), item("m5", "q1"), item("m4", "q1")])


def rto_faults(store: Path) -> None:
    """Overlapping windows A [1000,3000) and B [1500,4000), and C [5000, never stopped)."""
    run = RunBuilder(store, "rto-faults", {"workload": "queue", "rto_threshold_s": 0.7})
    ids = iter(range(1000))
    for t in range(0, 1200, 100):
        send(run, 1, next(ids), t, t + 10)
    send(run, 1, next(ids), 1200, 1250, "fail")
    send(run, 5, next(ids), 1300, 2300, "info")        # in flight when B starts
    for t in range(1400, 2000, 100):
        send(run, 1, next(ids), t, t + 50, "fail")
    for t in range(2000, 5000, 100):
        send(run, 1, next(ids), t, t + 50)
    for t in range(5100, 6000, 100):
        send(run, 1, next(ids), t, t + 50, "fail")
    run.fault("random-kill", 1000, 3000)
    run.fault("random-partition", 1500, 4000, targets=("n2", "n3"))
    run.fault("random-kill", 5000, None, targets=("n4",))


def rto_register(store: Path) -> None:
    """A register run that recovers within its threshold; a cas mismatch is an answer."""
    run = RunBuilder(store, "rto-register", {"workload": "register", "rto_threshold_s": 1.0})
    run.op(1, "write", 0, 10, key="x", value=1, result=1)
    run.op(1, "cas", 150, 160, "fail", key="x", value=[5, 6], error="cas-mismatch")
    run.op(1, "write", 200, 400, "info", key="x", value=2, error="timeout")
    run.op(2, "write", 300, 320, key="x", value=3, result=3)
    run.op(3, "read", 450, 460, key="x", result=3)
    run.fault("random-kill", 100, 500)


def register_bad(store: Path) -> None:
    run = RunBuilder(store, "register-bad", {"workload": "register"})
    run.op(1, "write", 0, 10, key="y", value=1, result=1)
    run.op(2, "read", 20, 30, key="y", result=2)       # 2 was never written
    run.op(1, "write", 0 + 40, 50, key="z", value=7, result=7)
    run.op(2, "read", 60, 70, key="z", result=7)


def log_run(store: Path) -> None:
    run = RunBuilder(store, "log-good", {"workload": "log"})
    run.op(1, "append", 0, 10, key=0, value="a", result={"offset": 0, "value": "a"})
    run.op(2, "read", 20, 30, key=0, value={"offset": 0}, result={"offset": 0, "value": "a"})


def dangling(store: Path) -> None:
    run = RunBuilder(store, "dangling", {"workload": "queue"})
    send(run, 1, "m1", 0, 10)
    run.op(1, "send", 20, None, key="q0", value={"id": "m2"})        # never completed
    run.op(2, "send", 5, None, key="q0", value={"id": "m3"})         # a second invoke follows
    send(run, 2, "m4", 15, 25)
    poll(run, 3, 30, 40, [item("m1"), item("m4")])
    run.final_log(50, {"q0": [item("m1"), item("m4")]})


def malformed(store: Path) -> None:
    run = RunBuilder(store, "malformed", {"workload": "queue"})
    send(run, 1, "m1", 0, 10)                                              # lines 1-2
    run.line("w1", "garbage")                                              # 3
    run.line("w1", '{"process":1,"type":"invoke","f":"send","value":{"id":"m2"},"ti')  # 4
    run.line("w1", "")                                                     # 5
    run.line("w1", '{"process":"x","type":"invoke","f":"send","time":30}')  # 6
    run.line("w1", '{"process":1,"type":"begin","f":"send","time":40}')     # 7
    run.line("w1", '{"process":1,"type":"invoke","f":"send","time":-5}')    # 8
    send(run, 1, "m9", 50, 60)                                             # 9-10
    poll(run, 2, 100, 110, [item("m1"), item("m9")])
    run.final_log(120, {"q0": [item("m1"), item("m9")]})
    with open(run.dir / "nemesis.jsonl", "w") as out:
        out.write('{"process":"nemesis","type":"info","f":"random-kill","value":{"phase":"begin"},"time":5}\n')


def empty(store: Path) -> None:
    run = RunBuilder(store, "empty", {"workload": "queue"})
    (run.dir / "history" / "w1.jsonl").touch()


def bad_spec(store: Path) -> None:
    run = RunBuilder(store, "bad-spec")
    (run.dir / "run.json").write_text("{not json")
    send(run, 1, "m1", 0, 10)
    run.line("c 2+%é", json.dumps({"process": 2, "type": "invoke", "f": "poll", "time": 20 * MS}))
    run.line("c 2+%é", json.dumps({"process": 2, "type": "ok", "f": "poll", "value": [item("m1")],
                                   "time": 30 * MS}))
    run.final_log(40, {"q0": [item("m1")]})


# -- the durability audit's anomalies and availability over time (Jepsen's Kafka/queue
# names, snake_case): each anomaly with a history that has it and one that does not.

def msg(msg_id: str, offset: int, queue: int = 0) -> dict[str, Any]:
    return {"id": msg_id, "key": queue, "queue": queue, "offset": offset}


class QueueRun(RunBuilder):
    """A queue run on queue 0: sends that land at offsets, polls, and the audit."""

    def __init__(self, store: Path, name: str, delivery: str = "at-least-once",
                 origin_unix: float | None = None) -> None:
        super().__init__(store, name, {"workload": "queue", "delivery": delivery}, origin_unix)
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


def clean(store: Path, name: str = "clean", delivery: str = "at-least-once",
          origin_unix: float | None = None) -> QueueRun:
    run = QueueRun(store, name, delivery, origin_unix)
    for i in range(3):
        run.send(f"m{i}", i)
    run.poll(msg("m0", 0), msg("m1", 1))
    run.poll(msg("m2", 2))
    run.audit(msg("m0", 0), msg("m1", 1), msg("m2", 2))
    return run


ORIGIN_UNIX = 1_764_000_000.0   # the history's zero in the runs with node logs


def invariant_breach(store: Path) -> None:
    """A clean queue history, but a model follower cut committed entries 1.5 s into it."""
    run = clean(store, "invariant-breach", origin_unix=ORIGIN_UNIX)
    event = {"kind": "raft-committed-entries-cut", "node": "b2", "time": ORIGIN_UNIX + 1.5,
             "details": {"after_index": 1, "commit_index": 3}}
    run.node_file("n2", "broker-1", "invariants.jsonl", json.dumps(event))
    run.node_file("n2", "broker-1", "broker.log", "2025-11-24 16:00:01,000 INFO raft: all is well")


def rocketmq_bug_lines(store: Path) -> None:
    """A clean history whose broker's store.log reports a harmless [BUG] line (not safety)."""
    run = clean(store, "rocketmq-bug-line", origin_unix=ORIGIN_UNIX)
    run.node_file("n1", "broker-0", "store.log",
                  "2025-11-25 00:00:02 WARN ReputMessageService - [BUG]The message had property INNER_NUM "
                  "but is not an inner batch")


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
        "workload": "queue", "profile": "controller-3", "timing": "fast", "write_rate": 50.0,
        "detection_s": 1.5, "failover_window_s": 3.5})
    for i, t in enumerate(range(0, 1000, 100)):
        served(run, 1, f"a{i}", t, "n1")
    run.op(2, "send", 1000, 3000, "info", key=0, value={"id": "stuck"}, error="timeout")
    for i, t in enumerate(range(3000, 8000, 100)):
        served(run, 3, f"b{i}", t, "n2")
    run.fault("leader-partition", 1000, 5000)
    run.fault("leader-partition", 6000, 7000, targets=("n2",))


AUDIT_SCENARIOS = [stalled_master, clean, lambda s: clean(s, "clean-exactly-once", "exactly-once"), lost_after_consume,
             inconsistent, poll_skip, lambda s: nonmonotonic(s, "nonmonotonic", "at-least-once"),
             lambda s: nonmonotonic(s, "nonmonotonic-exactly-once", "exactly-once"), unaudited,
             log_stale_read, log_clean, log_diverged, invariant_breach, rocketmq_bug_lines]



SCENARIOS = [queue_all, lambda s: queue_duplicates(s, "dup-at-least-once", "at-least-once"),
             lambda s: queue_duplicates(s, "dup-exactly-once", "exactly-once"),
             lambda s: queue_order(s, "ordered", True), lambda s: queue_order(s, "unordered", False),
             rto_faults, rto_register, register_bad, log_run, dangling, malformed, empty, bad_spec]
SCENARIOS += AUDIT_SCENARIOS
