"""A single broker as real processes on loopback: round trips, crash recovery, restarts."""
from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

from support.sut import TOPIC, counts, drain, send_many, status, sut_cluster  # noqa: F401

from sut.client import Consumer, Outcome, Producer
from sut.local import wait_until

SYNC_FLUSH = {"broker-a-0": {"store": {"flush_disk_type": "SYNC_FLUSH"}}}


def test_send_and_pull_round_trip(sut_cluster):
    cluster = sut_cluster("single-broker")

    async def scenario():
        async with Producer(cluster.namesrv_addrs) as producer:
            single = await producer.send(TOPIC, b"hello", queue=1)
            batch = await producer.send_batch(TOPIC, [b"a", b"bb", b"ccc"], queue=1)
        assert single.outcome == Outcome.OK and single.queue_offset == 0
        assert batch.outcome == Outcome.OK and batch.queue_offset == 1
        async with Consumer(cluster.namesrv_addrs, "g") as consumer:
            mq = next(q for q in await consumer.queues(TOPIC) if q.queue_id == 1)
            pulled = await consumer.pull(mq, 0)
            assert [m.body for m in pulled.messages] == [b"hello", b"a", b"bb", b"ccc"]
            assert [m.msg_id for m in pulled.messages] == [single.msg_id, *batch.msg_ids]
            assert [m.queue_offset for m in pulled.messages] == [0, 1, 2, 3]
            assert pulled.next_offset == 4 and pulled.max_offset == 4
            empty = await consumer.pull(mq, 4)
            assert empty.status == "PULL_NOT_FOUND" and empty.messages == []
            moved = await consumer.pull(mq, 9)
            assert moved.status == "PULL_OFFSET_MOVED" and moved.next_offset == 4
            assert (await consumer.max_offset(mq)).offset == 4

    asyncio.run(scenario())


def test_long_polling_pull_returns_when_a_message_arrives(sut_cluster):
    cluster = sut_cluster("single-broker")

    async def scenario():
        async with Consumer(cluster.namesrv_addrs, "g") as consumer, Producer(cluster.namesrv_addrs) as producer:
            mq = (await consumer.queues(TOPIC))[0]
            waiting = asyncio.create_task(consumer.pull(mq, 0, suspend_ms=5000))
            await asyncio.sleep(0.3)
            assert not waiting.done()
            await producer.send(TOPIC, b"late", queue=mq)
            pulled = await asyncio.wait_for(waiting, 3)
            assert [m.body for m in pulled.messages] == [b"late"]

    asyncio.run(scenario())


def test_ten_thousand_acked_messages_survive_kill_9_of_a_sync_flush_broker(sut_cluster):
    cluster = sut_cluster("single-broker", SYNC_FLUSH)
    ns = cluster.namesrv_addrs

    async def send_and_kill():
        sending = asyncio.create_task(send_many(ns, 10_000, concurrency=48))
        # kill -9 in the middle of the stream
        await asyncio.get_running_loop().run_in_executor(None, lambda: wait_until(
            lambda: status(cluster.address("broker-a-0")).get("max_offset", 0) > 5000 * 150, 60,
            what="half the messages stored"))
        cluster.kill("broker-a-0", signal.SIGKILL)
        return await sending

    first = asyncio.run(send_and_kill())
    cluster.restart("broker-a-0")
    by_outcome = {o: {i for i, r in first.items() if r.outcome == o} for o in Outcome}
    assert len(by_outcome[Outcome.OK]) >= 3000

    # send again what was not acknowledged (same ids are new attempts, so new ids here)
    second = asyncio.run(send_many(ns, 10_000 - len(by_outcome[Outcome.OK]), concurrency=48))
    assert all(r.outcome == Outcome.OK for r in second.values())

    stored = counts(asyncio.run(drain(ns)))
    assert all(stored[i] == 1 for i in by_outcome[Outcome.OK]), "an acknowledged message was lost"
    assert all(stored[i] == 1 for i in second)
    assert not any(stored[i] for i in by_outcome[Outcome.FAIL]), "a failed send was stored"
    assert max(stored.values()) == 1, "a message is duplicated in the log"
    assert set(stored) <= set(first) | set(second)
    assert len(set(stored) & (by_outcome[Outcome.OK] | set(second))) >= 10_000


def _segment(cluster) -> Path:
    return cluster.data_dir("broker-a-0") / "commitlog" / f"{0:020d}"


def _log_end(segment: Path) -> int:
    """End of the written data: the last non-zero byte (bodies never end in zero)."""
    data = segment.read_bytes()
    return len(data.rstrip(b"\0"))


def _torn_tail_case(sut_cluster, damage) -> tuple[list, list]:
    cluster = sut_cluster("single-broker")
    ns = cluster.namesrv_addrs
    sent = asyncio.run(send_many(ns, 50, concurrency=4))
    assert all(r.outcome == Outcome.OK for r in sent.values())
    cluster.kill("broker-a-0", signal.SIGKILL)
    segment = _segment(cluster)
    end = _log_end(segment)
    damage(segment, end)
    cluster.restart("broker-a-0")
    after = asyncio.run(drain(ns))
    more = asyncio.run(send_many(ns, 10, concurrency=2))
    assert all(r.outcome == Outcome.OK for r in more.values())
    final = asyncio.run(drain(ns))
    assert "truncated the tail" in cluster.log_text("broker-a-0")
    assert counts(final) == counts(after) + counts([m for m in final if m.msg_id in more])
    return list(sent), after


def test_a_partly_written_record_at_the_tail_is_truncated_on_recovery(sut_cluster):
    def write_half_a_record(segment: Path, end: int) -> None:
        first = segment.read_bytes()[:200]
        size = int.from_bytes(first[:4], "big")
        with open(segment, "r+b") as f:
            f.seek(end)
            f.write(segment.read_bytes()[:size // 2])

    sent, after = _torn_tail_case(sut_cluster, write_half_a_record)
    assert sorted(m.msg_id for m in after) == sorted(sent)


def test_garbage_after_the_last_record_is_truncated_on_recovery(sut_cluster):
    def write_garbage(segment: Path, end: int) -> None:
        with open(segment, "r+b") as f:
            f.seek(end)
            f.write(os.urandom(3000))

    sent, after = _torn_tail_case(sut_cluster, write_garbage)
    assert sorted(m.msg_id for m in after) == sorted(sent)


def test_a_last_record_with_a_bad_crc_is_dropped_on_recovery(sut_cluster):
    def flip_last_byte(segment: Path, end: int) -> None:
        with open(segment, "r+b") as f:
            f.seek(end - 1)
            f.write(b"Z")

    sent, after = _torn_tail_case(sut_cluster, flip_last_byte)
    assert len(after) == len(sent) - 1 and {m.msg_id for m in after} < set(sent)


def test_consumer_offsets_survive_a_clean_restart(sut_cluster):
    cluster = sut_cluster("single-broker")

    async def commit():
        async with Consumer(cluster.namesrv_addrs, "group-1") as consumer:
            mq = (await consumer.queues(TOPIC))[2]
            assert (await consumer.fetch_offset(mq)).offset is None
            assert (await consumer.commit_offset(mq, 42)).outcome == Outcome.OK
            return mq

    mq = asyncio.run(commit())
    assert cluster.stop("broker-a-0") == 0
    cluster.restart("broker-a-0")

    async def fetch():
        async with Consumer(cluster.namesrv_addrs, "group-1") as consumer:
            return (await consumer.fetch_offset(mq)).offset

    assert asyncio.run(fetch()) == 42


def test_sigterm_shuts_down_cleanly_and_removes_the_pidfile(sut_cluster):
    cluster = sut_cluster("single-broker")
    pidfile = cluster.data_dir("broker-a-0") / "broker.pid"
    assert int(pidfile.read_text()) == cluster.popen["broker-a-0"].pid
    assert cluster.stop("broker-a-0") == 0
    assert not pidfile.exists()
    log = cluster.log_text("broker-a-0")
    assert "shutting down (signal)" in log and "stopped" in log
    checkpoint = (cluster.data_dir("broker-a-0") / "checkpoint").read_bytes()
    assert len(checkpoint) == 12


def test_nameserver_drops_a_dead_broker_after_the_liveness_timeout(sut_cluster):
    cluster = sut_cluster("single-broker")
    ns = cluster.namesrv_addrs[0]
    from sut import admin
    info = admin.run_sync(admin.cluster_info(ns))
    assert cluster.address("broker-a-0") in info["live"]
    cluster.kill("broker-a-0", signal.SIGKILL)
    wait_until(lambda: not admin.run_sync(admin.cluster_info(ns))["live"], 10,
               what="broker expired from the nameserver")
    assert "expired" in cluster.log_text("namesrv")

    async def route():
        async with Producer(cluster.namesrv_addrs, send_timeout=1.0) as producer:
            return await producer.send(TOPIC, b"x")

    result = asyncio.run(route())
    assert result.outcome == Outcome.FAIL and result.status == "ROUTE_UNAVAILABLE"


def test_a_second_broker_on_the_same_data_dir_is_refused(sut_cluster, tmp_path):
    cluster = sut_cluster("single-broker")
    config = json.loads(cluster.config_path("broker-a-0").read_text())
    config["port"] += 1  # a different port, same data directory
    other = tmp_path / "other.json"
    other.write_text(json.dumps(config))
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-m", "sut", "broker", "--config", str(other)],
                          capture_output=True, text=True, timeout=30,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
    assert proc.returncode == 1
    assert "in use by another broker process" in proc.stderr and "Traceback" not in proc.stderr
    assert status(cluster.address("broker-a-0")).get("ready")
