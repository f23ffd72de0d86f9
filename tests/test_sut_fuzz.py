"""Malformed input at a real broker and nameserver: they log, close that connection, keep serving."""
from __future__ import annotations

import asyncio
import json
import os
import random
import struct
import time

from support.sut import TOPIC, status, sut_cluster  # noqa: F401

from sut.client import Consumer, Outcome, Producer
from sut.protocol import FLAG_ONEWAY, FLAG_RESPONSE, MAX_FRAME_BYTES, Command, RequestCode, encode

FUZZ_SECONDS = 4.0
CODES = [int(c) for c in RequestCode]


VALID_REQUESTS = [
    (RequestCode.SEND_MESSAGE, {"topic": TOPIC, "queue_id": 1, "msg_id": "fuzz", "born_ts": 1}),
    (RequestCode.SEND_BATCH, {"topic": TOPIC, "queue_id": 1, "msg_ids": ["a", "b"], "sizes": [1, 2]}),
    (RequestCode.PULL_MESSAGE, {"topic": TOPIC, "queue_id": 1, "offset": 0, "max_count": 4,
                                "suspend_ms": 0}),
    (RequestCode.QUERY_MAX_OFFSET, {"topic": TOPIC, "queue_id": 1}),
    (RequestCode.COMMIT_CONSUMER_OFFSET, {"topic": TOPIC, "queue_id": 1, "group": "g", "offset": 1}),
    (RequestCode.QUERY_CONSUMER_OFFSET, {"topic": TOPIC, "queue_id": 1, "group": "g"}),
    (RequestCode.CREATE_TOPIC, {"topic": "fuzzed", "queues": 2}),
    (RequestCode.GET_ROUTE, {"topic": TOPIC}),
    (RequestCode.BROKER_HEARTBEAT, {"addr": "127.0.0.1:1", "broker_name": "b", "broker_id": 1}),
]


def _random_value(rng: random.Random):
    return rng.choice([None, True, -1, 0, 2**63, rng.randint(-5, 40), "", "x" * rng.randint(0, 300),
                       TOPIC, "bad topic/../", [1, "a"], {"k": []}, 1.5])


def _random_frame(rng: random.Random, well_framed: bool) -> bytes:
    kind = rng.randrange(6, 9) if well_framed else rng.randrange(9)
    if kind == 0:  # noise
        return os.urandom(rng.randint(1, 200))
    if kind == 1:  # a length prefix with garbage behind it
        body = os.urandom(rng.randint(0, 100))
        return struct.pack(">I", len(body)) + body
    if kind == 2:  # oversized
        return struct.pack(">I", MAX_FRAME_BYTES + rng.randint(1, 1000)) + b"x" * 10
    if kind == 3:  # header length beyond the frame
        return struct.pack(">II", 8, 1000) + b"{}{}"
    if kind == 4:  # valid JSON that is not a header
        header = json.dumps(rng.choice([[], "x", {"code": "1"}, {"code": 1}, {"code": 1, "opaque": 1,
                                                                             "fields": []}])).encode()
        return struct.pack(">II", 4 + len(header), len(header)) + header
    if kind == 5:  # a response frame sent to a server
        return encode(Command(0, {}, b"", 1, FLAG_RESPONSE))
    if kind == 6:  # a valid broker request with one or two fields replaced
        code, fields = rng.choice(VALID_REQUESTS)
        fields = dict(fields)
        for _ in range(rng.randint(1, 2)):
            fields[rng.choice(list(fields))] = _random_value(rng)
        return encode(Command(code, fields, os.urandom(rng.randint(0, 64)), rng.randint(0, 2**31)))
    # well-framed requests with random codes and fields
    fields = {rng.choice(["topic", "queue_id", "msg_id", "offset", "max_count", "msg_ids", "sizes",
                          "group", "queues", "suspend_ms", "born_ts", "addr", "broker_name",
                          "broker_id", "cluster"]): _random_value(rng) for _ in range(rng.randint(0, 6))}
    flags = rng.choice([0, 0, FLAG_ONEWAY])
    return encode(Command(rng.choice(CODES + [9999, -1]), fields, os.urandom(rng.randint(0, 64)),
                          rng.randint(0, 2**31), flags))


async def _fuzz(addr: str, seconds: float, seed: int) -> int:
    host, port = addr.rsplit(":", 1)
    rng = random.Random(seed)
    deadline = time.monotonic() + seconds
    sent = 0
    while time.monotonic() < deadline:
        try:
            reader, writer = await asyncio.open_connection(host, int(port))
        except OSError:
            await asyncio.sleep(0.01)
            continue
        # half the connections carry only well-framed requests, which the broker must answer
        well_framed = rng.random() < 0.5
        for _ in range(rng.randint(1, 20)):
            frame = _random_frame(rng, well_framed)
            if not well_framed and rng.random() < 0.1:  # truncated: stop in the middle of a frame
                frame = frame[:rng.randint(0, max(0, len(frame) - 1))]
            writer.write(frame)
            sent += 1
        try:
            await asyncio.wait_for(writer.drain(), 1)
            await asyncio.wait_for(reader.read(65536), 0.02)
        except (asyncio.TimeoutError, ConnectionError):
            pass
        writer.close()
    return sent


def test_fuzzed_frames_never_stop_the_broker_or_nameserver_from_serving(sut_cluster):
    cluster = sut_cluster("single-broker")
    broker, namesrv = cluster.address("broker-a-0"), cluster.address("namesrv")

    async def scenario():
        counts = await asyncio.gather(*(_fuzz(broker, FUZZ_SECONDS, seed) for seed in range(4)),
                                      _fuzz(namesrv, FUZZ_SECONDS / 2, 99))
        async with Producer(cluster.namesrv_addrs) as producer:
            sent = await producer.send(TOPIC, b"after the storm", queue=0)
        async with Consumer(cluster.namesrv_addrs, "g") as consumer:
            mq = next(q for q in await consumer.queues(TOPIC) if q.queue_id == 0)
            top = (await consumer.max_offset(mq)).offset
            pulled = await consumer.pull(mq, top - 1)
        return sum(counts), sent, pulled

    frames, sent, pulled = asyncio.run(scenario())
    assert frames > 500
    assert sent.outcome == Outcome.OK and pulled.messages[-1].body == b"after the storm"
    assert cluster.popen["broker-a-0"].poll() is None and cluster.popen["namesrv"].poll() is None
    log = cluster.log_text("broker-a-0")
    assert "malformed frame" in log and "truncated frame" in log
    # every bad request was answered by validation, never by a handler crash
    assert "handler failed" not in log and "handler failed" not in cluster.log_text("namesrv")
    assert status(broker)["ready"]
