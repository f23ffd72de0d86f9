"""RocketMQ's own client driven from Python, against a real RocketMQ on loopback.

One nameserver (with an embedded controller) and one broker in Controller mode
(tests/support/rocketmq.py) for the module; the workloads' clients share one driver JVM
(sut/rocketmq/driver.py), the admin and lifetime tests start their own.
"""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sut.rocketmq.driver import Driver, SharedDriver, DriverDied, DriverError, classify_error, classify_send
from support.rocketmq import BROKER_NAME, require_rocketmq, rmq_cluster, rmq_loopback  # noqa: F401 - fixtures
from support.workloads import check_process_rules, consumed_ids, run_on_sut
from workloads.base import Completion, WorkloadOptions
from sut.rocketmq.profiles import SYSTEM as ROCKETMQ
from workloads.clients import Endpoints, broker_client
from workloads.log import LogWorkload
from workloads.queue import QueueWorkload
from workloads.rocketmq_client import RocketMQClient

pytestmark = pytest.mark.jvm
REPO = Path(__file__).resolve().parent.parent
QUEUES = 4


def endpoints(cluster) -> Endpoints:
    return Endpoints(namesrv=[cluster.namesrv], brokers=[cluster.broker], system=ROCKETMQ)


def client(cluster, topic: str, op_timeout: float = 6.0) -> RocketMQClient:
    made = broker_client(endpoints(cluster), topic, "chaos-test-group", op_timeout,
                         {"127.0.0.1": "n1"}, route_refresh_s=1.0)
    assert isinstance(made, RocketMQClient)
    return made


def eventually(call, timeout: float = 30.0):
    """call()'s answer once it stops raising DriverError (e.g. a route not registered yet)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except DriverError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def test_send_to_a_queue_then_pull_it_back_by_offset(rmq_loopback):
    async def scenario() -> tuple[list[Completion], Completion, Completion]:
        rmq = client(rmq_loopback, "t-send-pull")
        try:
            await rmq.create_topic(QUEUES)
            sent = [await rmq.send(2, f"m{i}".encode(), f"m{i}") for i in range(3)]
            pulled = await rmq.pull(2, 1, 32)
            empty = await rmq.pull(3, 0, 32)
            await rmq.commit(2, 3)
            return sent, pulled, empty
        finally:
            await rmq.close()

    sent, pulled, empty = asyncio.run(scenario())
    assert [s.type for s in sent] == ["ok"] * 3, sent
    assert [s.value for s in sent] == [0, 1, 2]          # the queue offsets, in order
    assert {s.node for s in sent} == {"n1"}               # the broker's address, as a node name
    assert pulled.type == "ok" and pulled.node == "n1"
    batch, next_offset, from_master = pulled.value
    assert batch == [(1, b"m1"), (2, b"m2")] and next_offset == 3 and from_master
    assert empty.type == "ok" and empty.value[0] == [] and empty.value[2]   # the broker says it is master


def test_admin_creates_the_topic_and_names_the_master_and_the_controller_leader(rmq_loopback):
    namesrv, controller = rmq_loopback.namesrv, rmq_loopback.controller_addr
    with Driver() as driver:
        done = driver.call("create_topic", timeout=30, namesrv=namesrv, topic="t-admin", queues=3)
        cluster = driver.call("cluster", timeout=30, namesrv=namesrv)
        # The broker registers the new topic with the nameserver in the background.
        route = eventually(lambda: driver.call("topic_route", timeout=30, namesrv=namesrv, topic="t-admin"))
        meta = driver.call("controller_meta", timeout=30, namesrv=namesrv, controller=controller)
        sync = driver.call("sync_state", timeout=30, namesrv=namesrv, controller=controller, brokers=[BROKER_NAME])
        opened = driver.call("open", timeout=30, namesrv=namesrv, route_refresh_ms=1000)
        sent = eventually(lambda: driver.call("send", timeout=30, client=opened["client"], topic="t-admin",
                                              queue=1, body="aGk=", key="k1"))
    assert done["created"] == {rmq_loopback.broker: 0} and not done["failed"]
    assert cluster["brokers"] == {BROKER_NAME: {"0": rmq_loopback.broker}}   # id 0: the master
    assert BROKER_NAME in cluster["clusters"]["chaos-test"]
    assert route["queues"][BROKER_NAME]["write"] == 3
    assert meta["is_leader"] and meta["leader_addr"] == controller
    group = sync[BROKER_NAME]
    assert group["master_addr"] == rmq_loopback.broker and group["master_epoch"] >= 1
    assert [r["addr"] for r in group["in_sync"]] == [rmq_loopback.broker]
    assert sent["status"] == "SEND_OK" and sent["queue_id"] == 1 and sent["queue_offset"] == 0
    assert sent["msg_id"] and sent["broker_name"] == BROKER_NAME


def test_the_queue_and_log_workloads_record_the_same_fields_as_on_the_model(rmq_loopback, tmp_path):
    """Through the workloads' own client hook (Endpoints.system), the runner and the audit."""
    queue = QueueWorkload(WorkloadOptions(concurrency=4, queues=3, topic="t-wq", ordered=True))
    events, _ = run_on_sut(queue, endpoints(rmq_loopback), tmp_path / "q", duration=3)
    check_process_rules(events, 4)
    acked = {ev["value"]["id"]: ev for ev in events if ev["f"] == "send" and ev["type"] == "ok"}
    assert len(acked) >= 5   # a loaded 2-core box may manage few; the checks below hold for any number
    assert set(acked) == set(consumed_ids(events))
    for ev in acked.values():
        assert ev["key"] == ev["value"]["queue"] and isinstance(ev["value"]["offset"], int) and ev["node"]
    audited = {m["id"] for ev in events if ev["f"] == "audit" and ev["type"] == "ok" for m in ev["value"]}
    assert set(acked) <= audited
    placed = [(ev["value"]["queue"], ev["value"]["offset"]) for ev in acked.values()]
    assert len(placed) == len(set(placed))   # one offset per message and queue

    log = LogWorkload(WorkloadOptions(concurrency=3, queues=2, topic="t-wl"))
    events, _ = run_on_sut(log, endpoints(rmq_loopback), tmp_path / "l", duration=1.5)
    check_process_rules(events, 3)
    appended = {ev["value"]["value"]: ev["value"]["offset"] for ev in events
                if ev["f"] == "append" and ev["type"] == "ok"}
    reads = [ev["value"] for ev in events if ev["f"] == "read" and ev["type"] == "ok" and ev["value"]["value"] is not None]
    assert appended and reads
    assert all(appended.get(r["value"]) == r["offset"] for r in reads if r["value"] in appended)


def test_a_killed_driver_turns_sends_in_flight_into_info(rmq_loopback):
    async def scenario() -> tuple[list[Completion], Completion]:
        rmq = client(rmq_loopback, "t-killed")
        try:
            await rmq.create_topic(QUEUES)
            await rmq.send(0, b"warm", "warm")
            driver = rmq._driver
            assert driver is not None and driver.alive
            sends = [asyncio.ensure_future(rmq.send(q % QUEUES, b"x", f"k{q}")) for q in range(40)]
            await asyncio.sleep(0)   # the requests are written before the kill
            os.kill(driver.pid, signal.SIGKILL)
            done = await asyncio.gather(*sends)
            after = await rmq.send(1, b"after", "after")  # a fresh driver and producer
            return done, after
        finally:
            await rmq.close()

    done, after = asyncio.run(scenario())
    types = {c.type for c in done}
    assert types <= {"ok", "info"} and "info" in types, done
    assert all("DriverDied" in c.error for c in done if c.type == "info")
    assert after.type == "ok"


def test_a_stopped_broker_gives_fail_or_info_never_ok(rmq_loopback):
    """Sends to a killed broker: a refused connection is fail (nothing was written), a
    timeout or a dropped connection is info; the same statuses as the outcome table.
    The broker stays stopped: the next test that needs it starts it again."""
    async def scenario() -> list[Completion]:
        rmq = client(rmq_loopback, "t-stopped", op_timeout=2.0)
        try:
            await rmq.create_topic(QUEUES)
            assert (await rmq.send(0, b"before", "before")).type == "ok"
            rmq_loopback.stop("broker")
            return [await rmq.send(q % QUEUES, b"y", f"s{q}") for q in range(3)]
        finally:
            await rmq.close()

    results = asyncio.run(scenario())
    assert all(r.type in ("fail", "info") for r in results), results
    refused = [r for r in results if "RemotingConnectException" in (r.error or "")]
    assert refused and all(r.type == "fail" for r in refused), results


def test_the_outcome_table():
    broker = lambda code: DriverError({"class": "MQBrokerException", "code": code})  # noqa: E731
    assert classify_send("SEND_OK") == "ok"
    assert {classify_send(s) for s in ("FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE")} == {"info"}
    assert classify_error(broker(2)) == "fail" and classify_error(broker(17)) == "fail"
    assert classify_error(broker(14)) == "fail" and classify_error(broker(1)) == "info"
    assert classify_error(broker(999)) == "info"
    assert classify_error(DriverError({"class": "RemotingConnectException"})) == "fail"
    assert classify_error(DriverError({"class": "RemotingTimeoutException"})) == "info"
    assert classify_error(DriverError({"class": "RemotingSendRequestException"})) == "info"
    assert classify_error(DriverError({"class": "MQClientException", "cause": "RemotingTimeoutException"})) == "info"
    assert classify_error(DriverDied("gone")) == "info"


def test_closing_the_driver_leaves_no_jvm():
    require_rocketmq()
    driver = Driver().start()
    pid = driver.pid
    assert driver.call("ping", timeout=30) == "pong"
    driver.close()
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{pid}")
    with pytest.raises(DriverDied):
        driver.call("ping", timeout=5)


def test_a_shared_driver_ends_after_its_last_holder_and_restarts_on_demand():
    require_rocketmq()
    shared = SharedDriver(linger_s=0.5)
    try:
        first = shared.acquire()
        assert shared.acquire() is first          # a second holder shares the JVM
        shared.release()
        shared.release()
        deadline = time.monotonic() + 10
        while first.alive and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not first.alive and not _alive(first.pid)
        second = shared.acquire()
        assert second is not first and second.call("ping", timeout=30) == "pong"
        shared.release()
    finally:
        shared.close()


def test_a_killed_harness_leaves_no_driver_jvm(tmp_path):
    """SIGKILL of the Python process that started the driver: the JVM reads EOF and ends."""
    require_rocketmq()
    script = ("import sys, time; sys.path.insert(0, %r)\n"
              "from sut.rocketmq.driver import Driver\n"
              "d = Driver(log_dir=%r).start(); print(d.pid, flush=True); time.sleep(600)\n") % (
                  str(REPO), str(tmp_path / "driver"))
    harness = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        jvm = int(harness.stdout.readline())
        assert _alive(jvm)
        harness.kill()
        harness.wait(10)
        deadline = time.monotonic() + 15
        while _alive(jvm) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(jvm), "the driver JVM outlived the process that started it"
    finally:
        harness.kill()
        harness.wait()


def _alive(pid: int) -> bool:
    """Running (a zombie left for its dead parent's reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
