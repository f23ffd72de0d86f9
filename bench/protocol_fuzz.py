"""Protocol fuzzing: a million malformed and truncated frames at a broker's port on loopback.

Starts a real `python -m sut` single-broker cluster (sut.local.LocalCluster)
and, from several connections at once, sends frames that are wrong in every
way the framing allows: random bytes, a length prefix with garbage behind it,
lengths beyond the frame limit, header lengths beyond the frame, JSON headers
that are not headers, responses sent as requests, unknown codes and fields of
the wrong type, oneway requests, and frames cut off mid-way. Each connection
carries a burst of well-framed bad requests (the broker answers each with an
error and keeps the connection) and ends with a malformed or truncated frame
(the broker logs it and closes that connection). Meanwhile a correct producer
keeps sending and must keep being served.

Prints frames/s, the broker's resident memory (VmRSS) before and after, the
correct client's sends (ok / total, p99 latency) and whether the broker is
still alive and ready.

    .venv/bin/python bench/protocol_fuzz.py                   # 1,000,000 frames
    .venv/bin/python bench/protocol_fuzz.py --frames 200000 --connections 8
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sut import admin  # noqa: E402
from sut.client import Producer  # noqa: E402
from sut.local import LocalCluster  # noqa: E402
from sut.protocol import FLAG_ONEWAY, FLAG_RESPONSE, MAX_FRAME_BYTES, Command, RequestCode, encode  # noqa: E402

TOPIC = "chaos"
U32 = struct.Struct(">I")
ODD_VALUES = [None, True, -1, 2**64, "", "x" * 300, "../../etc", [1, "a"], {"k": []}, 1.5]


def bad_request(rng: random.Random) -> bytes:
    """A well-framed request the broker must refuse (unknown code, wrong field types)."""
    code = rng.choice([*map(int, RequestCode), 0, 9999, -7])
    fields = {rng.choice(["topic", "queue_id", "offset", "max_count", "msg_id", "group", "queues"]):
              rng.choice(ODD_VALUES) for _ in range(rng.randint(0, 4))}
    flags = rng.choice([0, 0, 0, FLAG_ONEWAY])
    return encode(Command(code, fields, rng.randbytes(rng.randint(0, 32)), rng.getrandbits(31), flags))


def broken_frame(rng: random.Random) -> bytes:
    """A frame the framing itself rejects, or a valid one cut off mid-way."""
    kind = rng.randrange(7)
    if kind == 0:
        return rng.randbytes(rng.randint(1, 64))
    if kind == 1:
        garbage = rng.randbytes(rng.randint(0, 64))
        return U32.pack(len(garbage)) + garbage
    if kind == 2:
        return U32.pack(MAX_FRAME_BYTES + rng.randint(1, 1 << 20)) + b"\0" * 8
    if kind == 3:
        return U32.pack(8) + U32.pack(rng.randint(5, 1 << 30)) + b"{}{}"
    if kind == 4:
        header = json.dumps(rng.choice([[], "code", {"code": "1"}, {"code": 1, "opaque": 1, "fields": 3}])).encode()
        return U32.pack(4 + len(header)) + U32.pack(len(header)) + header
    if kind == 5:
        return encode(Command(0, {}, b"", 1, FLAG_RESPONSE))
    whole = bad_request(rng)
    return whole[:rng.randint(1, len(whole) - 1)]


def frame_pool(seed: int, size: int = 4096) -> list[tuple[bytes, int]]:
    """Pre-built bursts and their frame counts, so the fuzzer measures the broker, not
    frame generation."""
    rng = random.Random(seed)
    bursts = []
    for _ in range(size):
        count = rng.randint(20, 200)
        bursts.append((b"".join(bad_request(rng) for _ in range(count)) + broken_frame(rng), count + 1))
    return bursts


async def fuzz(host: str, port: int, bursts: list[tuple[bytes, int]], budget: list[int]) -> tuple[int, int]:
    """Send bursts until the shared budget of frames is used; returns (frames, connections)."""
    frames = connections = 0
    index = random.Random(port + len(budget)).randrange(len(bursts))
    while budget[0] > 0:
        index = (index + 1) % len(bursts)
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError:
            await asyncio.sleep(0.01)
            continue
        connections += 1
        burst, count = bursts[index]
        writer.write(burst)
        budget[0] -= count
        frames += count
        try:
            writer.write_eof()  # a truncated frame is only known to be one at end of input
            await asyncio.wait_for(writer.drain(), 5)
            while await asyncio.wait_for(reader.read(1 << 16), 5):  # until the broker closes
                pass
        except (asyncio.TimeoutError, ConnectionError):
            pass
        writer.close()
    return frames, connections


async def correct_client(namesrv: list[str], stop: asyncio.Event) -> tuple[int, int, list[float]]:
    ok = total = 0
    latencies: list[float] = []
    async with Producer(namesrv, send_timeout=5.0) as producer:
        while not stop.is_set():
            started = time.perf_counter()
            result = await producer.send(TOPIC, b"still served")
            total += 1
            if result.outcome.value == "ok":
                ok += 1
                latencies.append(time.perf_counter() - started)
            await asyncio.sleep(0.01)
    return ok, total, latencies


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def scenario(cluster: LocalCluster, frames: int, connections: int, seed: int) -> dict:
    host, port = cluster.address("broker-a-0").rsplit(":", 1)
    bursts = frame_pool(seed)
    stop = asyncio.Event()
    client = asyncio.ensure_future(correct_client(cluster.namesrv_addrs, stop))
    await asyncio.sleep(0.5)
    budget = [frames]
    started = time.perf_counter()
    sent = await asyncio.gather(*(fuzz(host, int(port), bursts, budget) for _ in range(connections)))
    elapsed = time.perf_counter() - started
    stop.set()
    ok, total, latencies = await client
    return {"frames": sum(f for f, _ in sent), "connections": sum(c for _, c in sent), "seconds": elapsed,
            "client_ok": ok, "client_total": total,
            "client_p99_ms": (statistics.quantiles(latencies, n=100)[98] * 1000) if len(latencies) > 1 else 0.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--connections", type=int, default=4, help="fuzzing connections at a time")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f} (2-core machine: above 2 means contention)")
    with tempfile.TemporaryDirectory(prefix="sut-fuzz-") as tmp, LocalCluster("single-broker", tmp) as cluster:
        cluster.start_all()
        broker = cluster.popen["broker-a-0"]
        before = rss_kib(broker.pid)
        result = asyncio.run(scenario(cluster, args.frames, args.connections, args.seed))
        after = rss_kib(broker.pid)
        alive = broker.poll() is None
        ready = bool((admin.run_sync(admin.process_status(cluster.address("broker-a-0"))) or {}).get("ready"))
        log = cluster.log_text("broker-a-0")
    print(f"frames sent:        {result['frames']:,} over {result['connections']:,} connections "
          f"in {result['seconds']:.1f} s = {result['frames'] / result['seconds']:,.0f} frames/s")
    print(f"broker VmRSS:       {before / 1024:.1f} MiB before, {after / 1024:.1f} MiB after "
          f"({(after - before) / 1024:+.1f} MiB)")
    print(f"correct client:     {result['client_ok']} of {result['client_total']} sends ok during the fuzzing, "
          f"p99 {result['client_p99_ms']:.1f} ms")
    print(f"broker after:       alive={alive} ready={ready}, log: {log.count('malformed frame'):,} malformed, "
          f"{log.count('truncated frame'):,} truncated, {log.count('handler failed')} handler crashes")
    if not (alive and ready and result["client_ok"] == result["client_total"] > 0):
        sys.exit(1)


if __name__ == "__main__":
    main()
