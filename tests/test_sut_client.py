"""The client's ok / fail / indeterminate classification, retries and route refresh."""
from __future__ import annotations

import asyncio
import signal

import pytest

from sut.client import Outcome, Producer
from sut.outcome import SEND_OUTCOMES, classify_error, classify_status, combine
from sut.protocol import ResponseCode, RpcConnectionError, RpcTimeout
from support.sut import TOPIC, StubCluster, sut_cluster  # noqa: F401

RC = ResponseCode
EXPECTED = {
    RC.SUCCESS: Outcome.OK,
    RC.FLUSH_DISK_TIMEOUT: Outcome.INDETERMINATE,
    RC.FLUSH_SLAVE_TIMEOUT: Outcome.INDETERMINATE,
    RC.SLAVE_NOT_AVAILABLE: Outcome.INDETERMINATE,
    RC.APPEND_TIMEOUT: Outcome.INDETERMINATE,
    RC.SYSTEM_ERROR: Outcome.INDETERMINATE,
    RC.SERVICE_NOT_AVAILABLE: Outcome.FAIL,
    RC.NOT_MASTER: Outcome.FAIL,
    RC.NOT_LEADER: Outcome.FAIL,
    RC.SYSTEM_BUSY: Outcome.FAIL,
    RC.PENDING_FULL: Outcome.FAIL,
    RC.TOPIC_NOT_EXIST: Outcome.FAIL,
    RC.BAD_REQUEST: Outcome.FAIL,
}


@pytest.mark.parametrize("code", list(EXPECTED), ids=lambda c: c.name)
def test_each_send_status_has_its_documented_outcome(code):
    assert classify_status(code) == EXPECTED[code]


def test_statuses_outside_the_table_are_indeterminate():
    for code in ResponseCode:
        if code not in SEND_OUTCOMES:
            assert classify_status(code) == Outcome.INDETERMINATE
    assert classify_status(12345) == Outcome.INDETERMINATE


def test_only_an_unsent_request_is_a_definite_failure():
    assert classify_error(RpcConnectionError("refused", sent=False)) == Outcome.FAIL
    assert classify_error(RpcConnectionError("reset", sent=True)) == Outcome.INDETERMINATE
    assert classify_error(RpcTimeout("slow")) == Outcome.INDETERMINATE
    assert Outcome.INDETERMINATE.history_type == "info" and Outcome.FAIL.history_type == "fail"


def test_attempts_combine_to_ok_then_indeterminate_then_fail():
    F, I, K = Outcome.FAIL, Outcome.INDETERMINATE, Outcome.OK
    assert combine([F, I, K]) == K and combine([F, I, F]) == I and combine([F, F]) == F


def _send_through(script: list, retries: int = 2):
    async def scenario():
        stub = StubCluster(script)
        await stub.start()
        try:
            async with Producer([stub.namesrv_addr], send_timeout=3, retries=retries) as producer:
                result = await producer.send(TOPIC, b"payload")
        finally:
            await stub.stop()
        return result, stub

    return asyncio.run(scenario())


def test_a_retryable_rejection_is_retried_with_the_same_message_id_after_a_route_refresh():
    result, stub = _send_through([RC.NOT_MASTER, RC.SYSTEM_BUSY])
    assert result.outcome == Outcome.OK and result.attempts == 3
    assert len(stub.sends) == 3 and len(set(stub.sends)) == 1
    assert stub.route_calls == 3  # first lookup, then a refresh before each retry


def test_a_dropped_connection_then_rejections_is_indeterminate():
    result, stub = _send_through(["drop", RC.NOT_MASTER, RC.NOT_MASTER])
    assert result.outcome == Outcome.INDETERMINATE and result.status == "NOT_MASTER"
    assert len(set(stub.sends)) == 1


def test_only_definite_rejections_make_a_failed_send():
    result, stub = _send_through([RC.SERVICE_NOT_AVAILABLE] * 3)
    assert result.outcome == Outcome.FAIL and result.attempts == 3


def test_indeterminate_statuses_and_bad_requests_are_not_retried():
    result, _ = _send_through([RC.FLUSH_SLAVE_TIMEOUT])
    assert result.outcome == Outcome.INDETERMINATE and result.attempts == 1
    result, _ = _send_through([RC.BAD_REQUEST])
    assert result.outcome == Outcome.FAIL and result.attempts == 1


def test_real_broker_statuses_classify_as_documented(sut_cluster):
    cluster = sut_cluster("single-broker", {"broker-a-0": {
        "store": {"flush_disk_type": "SYNC_FLUSH", "sync_flush_timeout_ms": 0,
                  "max_message_bytes": 1000}}})

    async def scenario():
        async with Producer(cluster.namesrv_addrs, send_timeout=2) as producer:
            flush = await producer.send(TOPIC, b"x")
            too_big = await producer.send(TOPIC, b"x" * 2000)
            no_topic = await producer.send("no-such-topic", b"x")
        return flush, too_big, no_topic

    flush, too_big, no_topic = asyncio.run(scenario())
    assert (flush.status, flush.outcome) == ("FLUSH_DISK_TIMEOUT", Outcome.INDETERMINATE)
    assert (too_big.status, too_big.outcome, too_big.attempts) == ("BAD_REQUEST", Outcome.FAIL, 1)
    assert (no_topic.status, no_topic.outcome) == ("ROUTE_UNAVAILABLE", Outcome.FAIL)


def test_a_paused_broker_gives_indeterminate_and_a_dead_one_fails(sut_cluster):
    cluster = sut_cluster("single-broker")

    async def send(timeout: float):
        async with Producer(cluster.namesrv_addrs, send_timeout=timeout) as producer:
            await producer.route(TOPIC)
            return await producer.send(TOPIC, b"x")

    assert asyncio.run(send(2)).outcome == Outcome.OK
    cluster.send_signal("broker-a-0", signal.SIGSTOP)
    try:
        paused = asyncio.run(send(0.5))
    finally:
        cluster.send_signal("broker-a-0", signal.SIGCONT)
    assert paused.outcome == Outcome.INDETERMINATE and paused.status == "RpcTimeout"
    cluster.kill("broker-a-0")
    dead = asyncio.run(send(2))  # the route still names it: connection refused, every retry
    # (if the nameserver already expired it under a slow run, there is no route: also a failure)
    assert dead.outcome == Outcome.FAIL and dead.status in ("RpcConnectionError", "ROUTE_UNAVAILABLE")
