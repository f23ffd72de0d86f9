"""RocketMQ's message types without a cluster: the ordered, transactional and delayed
checkers on hand-made histories, the workloads' planning, the model's refusals and the
broker settings the workloads need."""
from __future__ import annotations

import asyncio
import itertools
import json
import random
from types import SimpleNamespace

from checkers.message_types import check_delayed, check_ordered, check_transactional
from sut import systems
from sut.rocketmq.config import render
from sut.systems import profile
from workloads.base import Completion, WorkloadOptions
from workloads.delayed import DELAY_TOLERANCE_MS, DelayedWorkload
from workloads.generator import PlannedOp
from workloads.ordered import OrderedWorkload
from workloads.queue import encode_message
from workloads.transactional import TransactionalWorkload, TxClient

_index = itertools.count()


def op(f, kind, value, invoke_value=None, key=None, at=None):
    """One completed operation as the checkers read it (JSON text values)."""
    i = next(_index)
    t = at if at is not None else i * 1000
    return {"index": i, "process": 0, "f": f, "key": key, "type": kind, "invoke_time": t, "complete_time": t + 1,
            "invoke_value": json.dumps(invoke_value if invoke_value is not None else value), "value": json.dumps(value)}


def sent(i, shard, seq, kind="ok"):
    return op("send", kind, {"id": i, "shard": shard, "seq": seq, "queue": shard % 4, "offset": seq})


def consumed(client, *items, f="consume"):
    """items: (id, shard, seq, queue, start_ns, end_ns)."""
    deliveries = [{"id": i, "shard": s, "seq": q, "queue": queue, "offset": q, "client": client,
                   "start_ns": start, "end_ns": end} for i, s, q, queue, start, end in items]
    return op(f, "ok", {"client": client, "locked": [], "deliveries": deliveries}, {"client": client})


# -- ordered ------------------------------------------------------------------------------

def test_orderly_consumption_in_send_order_is_valid_and_counts_a_redelivery_as_a_duplicate():
    rows = [sent(1, 0, 0), sent(2, 0, 1), sent(3, 1, 0),
            consumed("a", (1, 0, 0, 0, 10, 20), (3, 1, 0, 1, 12, 22)),
            consumed("b", (1, 0, 0, 0, 30, 40), (2, 0, 1, 0, 41, 50), f="leave")]
    section = check_ordered(rows)
    assert section["valid"] is True, section
    assert section["counts"]["duplicates"] == 1 and section["counts"]["keys"] == 2


def test_a_key_processed_past_an_acknowledged_message_is_a_gap_and_a_late_one_out_of_order():
    rows = [sent(1, 0, 0), sent(2, 0, 1), sent(3, 0, 2), sent(4, 1, 0), sent(5, 1, 1),
            consumed("a", (2, 0, 1, 0, 10, 11), (3, 0, 2, 0, 12, 13), (5, 1, 1, 1, 14, 15), (4, 1, 0, 1, 16, 17))]
    section = check_ordered(rows)
    assert section["valid"] is False
    assert section["counts"]["gap"] == 1 and section["counts"]["lost"] == 1
    assert section["counts"]["out_of_order"] == 1
    assert section["examples"]["gap"][0]["id"] == 1
    assert section["examples"]["out_of_order"][0] == {"shard": 1, "seq": 0, "id": 4, "after_seq": 1, "after_id": 5}


def test_two_members_processing_one_queue_at_once_is_concurrent_processing():
    rows = [sent(1, 0, 0), sent(2, 4, 0),
            consumed("a", (1, 0, 0, 0, 100, 200)), consumed("b", (2, 4, 0, 0, 150, 160))]
    section = check_ordered(rows)
    assert section["counts"]["concurrent_processing"] == 1 and section["valid"] is False
    apart = check_ordered([sent(1, 0, 0), sent(2, 4, 0),
                           consumed("a", (1, 0, 0, 0, 100, 200)), consumed("b", (2, 4, 0, 0, 201, 260))])
    assert apart["valid"] is True, apart


def test_the_ordered_checker_is_unknown_when_nothing_was_processed_and_ignores_unacknowledged_sends():
    assert check_ordered([sent(1, 0, 0)])["valid"] == "unknown"
    section = check_ordered([sent(1, 0, 0, kind="info"), sent(2, 0, 1), consumed("a", (2, 0, 1, 0, 1, 2))])
    assert section["valid"] is True, section


# -- transactional -------------------------------------------------------------------------

def tx(i, decision, resolution=None, kind="ok"):
    resolution = resolution or (decision if decision != "unknown" else "commit")
    return op("send", kind, {"id": i, "decision": decision, "resolution": resolution})


def polled(*ids, f="poll"):
    return op(f, "ok", [{"id": i, "queue": 0, "offset": n} for n, i in enumerate(ids)], {"offset": 0}, key=0)


def checked(*ids):
    return op("tx-check", "ok", [{"key": f"m{i}", "tx_id": f"t{i}", "answer": "commit"} for i in ids])


def test_committed_delivered_rolled_back_not_and_unknown_resolved_by_check_back_is_valid():
    rows = [tx(1, "commit"), tx(2, "rollback"), tx(3, "unknown", "commit"), tx(4, "unknown", "rollback"),
            checked(3, 4), polled(1, 3), polled(1, f="audit")]
    section = check_transactional(rows)
    assert section["valid"] is True, section
    assert section["counts"]["checks"] == 2 and section["counts"]["duplicates"] == 0
    assert section["acknowledged_by_decision"] == {"commit": 1, "rollback": 1, "unknown": 2}


def test_transaction_anomalies_are_named():
    rows = [tx(1, "commit"), tx(2, "rollback"), tx(3, "unknown", "commit"), tx(4, "unknown", "commit"),
            tx(5, "commit", kind="info"), polled(2, 4, 5, 9)]
    counts = check_transactional(rows)["counts"]
    assert counts["lost_commit"] == 1 and counts["delivered_rollback"] == 1
    assert counts["unresolved"] == 1 and counts["delivered_unchecked"] == 1
    assert counts["recovered"] == 1 and counts["unexpected"] == 1


def test_a_check_back_after_an_ended_transaction_is_counted_and_valid():
    section = check_transactional([tx(1, "commit"), checked(1), polled(1)])
    assert section["valid"] is True and section["counts"]["checked_after_end"] == 1


# -- delayed -----------------------------------------------------------------------------------

def timed(i, deliver_ms):
    return op("send", "ok", {"id": i, "delay_ms": 3000, "deliver_ms": deliver_ms, "queue": 0, "offset": None})


def seen(*pairs):
    return op("poll", "ok", [{"id": i, "queue": 0, "offset": n, "seen_ms": s} for n, (i, s) in enumerate(pairs)],
              {"offset": 0}, key=0)


def test_a_timer_message_seen_within_the_tolerance_is_on_time_and_earlier_is_early():
    on_time = check_delayed([timed(1, 10_000), timed(2, 20_000), seen((1, 10_000 - DELAY_TOLERANCE_MS + 1),
                                                                       (2, 20_500))])
    assert on_time["valid"] is True, on_time
    assert on_time["lateness_ms"]["max"] == 500
    early = check_delayed([timed(1, 10_000), seen((1, 10_000 - DELAY_TOLERANCE_MS - 1))])
    assert early["valid"] is False and early["counts"]["early"] == 1
    assert check_delayed([timed(1, 10_000)])["valid"] == "unknown"


# -- workloads and the systems they run on ----------------------------------------------------

def test_the_model_refuses_the_message_type_workloads_with_a_reason_and_rocketmq_takes_them():
    for workload in ("ordered", "transactional", "delayed"):
        assert "rmq-" in systems.refused_workload("controller-3", workload)
        assert systems.refused_workload("rmq-controller-3", workload) is None


def test_ordered_producers_own_their_keys_and_number_each_keys_sends_in_order():
    workload = OrderedWorkload(WorkloadOptions(concurrency=5, queues=4, keys=6))
    assert (workload.producers, workload.consumers) == (3, 2)
    rng = random.Random(1)
    seqs: dict[int, list[int]] = {}
    for index in range(40):
        worker = index % 5
        f, key, value = workload.plan_op(rng, index, worker, 5)
        if worker >= workload.producers:
            assert f in ("consume", "leave")
            assert workload.prepare(PlannedOp(index, 0, worker, f, key, value))[0] == "join"   # down: joins first
            continue
        assert value["shard"] % workload.producers == worker and key == value["shard"] % 4
        _, _, prepared = workload.prepare(PlannedOp(index, 0, worker, f, key, value))
        seqs.setdefault(value["shard"], []).append(prepared["seq"])
    assert all(s == list(range(len(s))) for s in seqs.values()) and len(seqs) >= 3


def test_transactional_sends_carry_a_seeded_decision_and_unknowns_a_resolution():
    workload = TransactionalWorkload(WorkloadOptions(concurrency=4, queues=4))
    rng = random.Random(2)
    planned = [workload.plan_op(rng, i, i % 4, 4) for i in range(200)]
    sends = [v for f, _, v in planned if f == "send"]
    assert {v["decision"] for v in sends} == {"commit", "rollback", "unknown"}
    assert all(v["resolution"] == v["decision"] for v in sends if v["decision"] != "unknown")
    assert {v["resolution"] for v in sends if v["decision"] == "unknown"} == {"commit", "rollback"}
    assert any(f == "tx-check" for f, _, _ in planned)


def test_delayed_sends_get_a_delivery_time_at_their_invoke():
    workload = DelayedWorkload(WorkloadOptions(concurrency=4, queues=4))
    f, key, value = workload.plan_op(random.Random(3), 0, 0, 4)
    assert f == "send" and 2000 <= value["delay_ms"] <= 8000
    _, _, prepared = workload.prepare(PlannedOp(0, 0, 0, f, key, value))
    assert prepared["deliver_ms"] == workload.last_deliver_ms and prepared["deliver_ms"] > value["delay_ms"]


def test_rocketmq_brokers_run_the_timer_wheel_and_check_half_messages_back_quickly_when_fast():
    procs = render(profile("rmq-controller-3"), ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"],
                   [f"/var/lib/chaos/n{i}" for i in range(1, 5)], "rocketmq-5.3.3-abc", "fast")
    broker = next(p for p in procs if p.role == "broker").properties
    assert broker["timerWheelEnable"] == "true"
    assert broker["transactionCheckInterval"] == "2000" and broker["transactionTimeOut"] == "2000"


def test_teeth_counts_the_message_types_invalid_findings_as_safety_anomalies():
    from harness.campaign.teeth import safety_anomalies
    results = {"ordered": {"valid": False, "counts": {"gap": 2, "duplicates": 5}},
               "transactional": {"valid": False, "counts": {"delivered_rollback": 1, "checked_after_end": 3}},
               "delayed": {"valid": True, "counts": {"early": 0}}}
    assert safety_anomalies(results) == ["ordered: 2 gap", "transactional: 1 delivered_rollback"]


def test_a_message_past_the_last_offset_processed_on_its_queue_is_unreached_and_makes_the_run_unknown():
    # Queue 0 was processed up to offset 1; the messages at offsets 2 and 3 were never reached
    # (stalled consumers look the same as a lost tail): unknown, not valid and not lost.
    rows = [sent(1, 0, 0), sent(2, 0, 1), sent(3, 0, 2), sent(4, 0, 3),
            consumed("a", (1, 0, 0, 0, 1, 2), (2, 0, 1, 0, 3, 4))]
    section = check_ordered(rows)
    assert section["valid"] == "unknown" and "unreached" in section["reason"], section
    assert section["counts"]["unreached"] == 2 and section["counts"]["lost"] == 0
    # Once any member processed past it on the same queue, the missing message is lost.
    passed = check_ordered(rows + [sent(5, 4, 4), consumed("b", (5, 4, 4, 0, 5, 6))])
    assert passed["valid"] is False and passed["counts"]["lost"] == 2 and passed["counts"]["unreached"] == 0


def test_an_unanswered_take_makes_lost_messages_unknown_but_not_an_order_violation():
    unanswered = op("consume", "info", None, {"client": "a"})
    lost = check_ordered([sent(1, 0, 0), sent(2, 4, 1), consumed("a", (2, 4, 1, 0, 1, 2)), unanswered])
    assert lost["valid"] == "unknown" and lost["counts"]["lost"] == 1
    reordered = check_ordered([sent(1, 0, 0), sent(2, 0, 1), unanswered,
                               consumed("a", (2, 0, 1, 0, 1, 2), (1, 0, 0, 0, 3, 4))])
    assert reordered["valid"] is False and reordered["counts"]["out_of_order"] == 1


# -- the workloads' effects against stand-ins for RocketMQ's clients ---------------------------

class FakeOrderly:
    """Stands in for workloads.rocketmq_types.OrderlyConsumer: what the driver would answer."""

    made: list["FakeOrderly"] = []

    def __init__(self, namesrv, group, topic, timeout, route_refresh_s=None, process_ms=5):
        self.client_id, self.closed, self.pending = f"c{len(FakeOrderly.made)}", False, []
        FakeOrderly.made.append(self)

    async def start(self):
        return self.client_id

    async def take(self):
        got, self.pending = self.pending, []
        return {"deliveries": got, "locked": [0], "now_ns": 5}

    async def close(self):
        self.closed = True
        return await self.take()


def test_ordered_members_join_consume_and_leave_with_what_they_processed(monkeypatch):
    from workloads import ordered
    monkeypatch.setattr(ordered, "OrderlyConsumer", FakeOrderly)
    workload = OrderedWorkload(WorkloadOptions(concurrency=3, queues=2))
    client = SimpleNamespace(endpoints=SimpleNamespace(namesrv=["n:9876"]))
    worker = workload.producers

    async def go():
        joined = await workload.execute(client, worker, "join", None, None)
        member = FakeOrderly.made[-1]
        member.pending = [{"client": member.client_id, "queue": 1, "offset": 4, "start_ns": 1, "end_ns": 2,
                           "body": encode_message({"id": 8, "shard": 1, "seq": 0, "payload": "x"})}]
        taken = await workload.execute(client, worker, "consume", None, {"client": member.client_id})
        workload.observe(worker, "consume", None, None, taken)
        left = await workload.execute(client, worker, "leave", None, {"client": member.client_id})
        return joined, taken, left, member

    joined, taken, left, member = asyncio.run(go())
    assert joined.type == "ok" and joined.value == {"client": member.client_id}
    [delivery] = taken.value["deliveries"]
    assert delivery == {"id": 8, "shard": 1, "seq": 0, "payload": "x", "client": member.client_id, "queue": 1,
                        "offset": 4, "start_ns": 1, "end_ns": 2, "reconsume": 0}
    assert taken.value["locked"] == [0] and workload.processed == {8}
    assert left.type == "ok" and member.closed and workload.members[worker].consumer is None


def test_a_transaction_whose_half_message_was_not_confirmed_is_info_and_a_timer_send_has_no_offset():

    class Tx:
        async def send(self, body, key, decision, resolution):
            return {"status": "FLUSH_SLAVE_TIMEOUT" if decision == "rollback" else "SEND_OK",
                    "local_state": decision.upper(), "tx_id": "t", "msg_id": "m"}

    class Queue:
        async def send(self, queue, body, msg_id, deliver_ms=None):
            self.deliver_ms = deliver_ms
            return Completion("ok", 17, "n2")

    tx_workload = TransactionalWorkload(WorkloadOptions(concurrency=4, queues=4))
    client = TxClient(SimpleNamespace(), Tx())
    ok = asyncio.run(tx_workload.execute(client, 0, "send", None, {"id": 1, "decision": "commit",
                                                                   "resolution": "commit"}))
    info = asyncio.run(tx_workload.execute(client, 0, "send", None, {"id": 2, "decision": "rollback",
                                                                     "resolution": "rollback"}))
    assert ok.type == "ok" and ok.value["local_state"] == "COMMIT" and info.type == "info"
    delayed = DelayedWorkload(WorkloadOptions(concurrency=4, queues=4))
    queue = Queue()
    done = asyncio.run(delayed.execute(queue, 0, "send", 2, {"id": 3, "delay_ms": 2000, "deliver_ms": 99}))
    assert queue.deliver_ms == 99 and done.value["offset"] is None and done.value["timer_offset"] == 17
