"""The NFQUEUE link degrader that runs on a node: hold, copy or damage outgoing packets.

Uploaded by nuclei/degrade.py and run with the node's own `python3` (stdlib
only, like the SUT): it speaks nfnetlink_queue over a raw netlink socket, so
the node needs no binding and no libnetfilter-queue. An iptables rule of ours
queues the node's packets to its peers (queue --queue); for each packet this
program picks a verdict time and acts:

- delay:     hold ms +- jitter (uniform), then accept; jitter reorders as netem's does
- reorder:   accept a packet at once with --probability, hold the others ms
- duplicate: accept, and with --probability send a copy through a raw socket
             (marked, so our rule lets the copy pass)
- corrupt:   with --probability flip one random bit after the IP header, then accept

On SIGTERM it accepts every packet it still holds, unbinds and writes its
counters (and the hold times it really gave) to --stats as JSON; it writes
them every second while it runs too.
"""
from __future__ import annotations

import argparse
import heapq
import json
import os
import random
import select
import signal
import socket
import struct
import time

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
MSG_PACKET, MSG_VERDICT, MSG_CONFIG = 0, 1, 2
NLM_F_REQUEST, NLM_F_ACK = 1, 4
NLMSG_ERROR = 2
CMD_BIND, CMD_UNBIND = 1, 2
CFG_CMD, CFG_PARAMS, CFG_QUEUE_MAXLEN = 1, 2, 3
COPY_META, COPY_PACKET = 1, 2
ATTR_PACKET_HDR, ATTR_VERDICT_HDR, ATTR_PAYLOAD = 1, 2, 10
NF_ACCEPT = 1
SO_MARK = 36
NLA_TYPE_MASK = 0x3FFF
# Packets the kernel queues before it drops new ones (netem's `limit` is 1000).
QUEUE_MAXLEN = 10000


def attr(kind: int, data: bytes) -> bytes:
    """One netlink attribute, padded to 4 bytes."""
    raw = struct.pack("=HH", 4 + len(data), kind) + data
    return raw + b"\0" * (-len(raw) % 4)


def message(kind: int, queue: int, payload: bytes, flags: int = NLM_F_REQUEST, seq: int = 0) -> bytes:
    """A nfnetlink_queue message: netlink header, nfgenmsg (AF_UNSPEC, version 0, queue), attributes."""
    body = struct.pack("!BBH", socket.AF_UNSPEC, 0, queue) + payload
    return struct.pack("=IHHII", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | kind, flags, seq, 0) + body


def attributes(data: bytes) -> dict[int, bytes]:
    found = {}
    offset = 0
    while offset + 4 <= len(data):
        length, kind = struct.unpack_from("=HH", data, offset)
        if length < 4:
            break
        found[kind & NLA_TYPE_MASK] = data[offset + 4:offset + length]
        offset += (length + 3) & ~3
    return found


def messages(data: bytes):
    """(type, body after nfgenmsg or the error body) for each netlink message in a datagram."""
    offset = 0
    while offset + 16 <= len(data):
        length, kind, _flags, _seq, _pid = struct.unpack_from("=IHHII", data, offset)
        if length < 16:
            break
        yield kind, data[offset + 16:offset + length]
        offset += (length + 3) & ~3


class Queue:
    """One bound nfnetlink queue: configure, receive packets, give verdicts."""

    def __init__(self, number: int, copy_packet: bool) -> None:
        self.number = number
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        try:  # room for bursts: a full receive buffer costs packets
            self.sock.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)  # SO_RCVBUFFORCE (root)
        except OSError:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.sock.bind((0, 0))
        self._seq = 0
        self._config(attr(CFG_CMD, struct.pack("!BBH", CMD_BIND, 0, socket.AF_INET)))
        mode = COPY_PACKET if copy_packet else COPY_META
        self._config(attr(CFG_PARAMS, struct.pack("!IB", 0xFFFF if copy_packet else 0, mode)))
        self._config(attr(CFG_QUEUE_MAXLEN, struct.pack("!I", QUEUE_MAXLEN)))

    def _config(self, payload: bytes) -> None:
        self._seq += 1
        self.sock.send(message(MSG_CONFIG, self.number, payload, NLM_F_REQUEST | NLM_F_ACK, self._seq))
        for kind, body in messages(self.sock.recv(65536)):
            if kind == NLMSG_ERROR:
                code = struct.unpack_from("=i", body)[0]
                if code != 0:
                    raise OSError(-code, f"nfqueue {self.number}: config refused: {os.strerror(-code)}")

    def packets(self):
        """(packet id, payload or b'') of every packet in one datagram from the kernel."""
        for kind, body in messages(self.sock.recv(1 << 17)):
            if kind != (NFNL_SUBSYS_QUEUE << 8) | MSG_PACKET:
                continue
            found = attributes(body[4:])
            header = found.get(ATTR_PACKET_HDR)
            if header is not None:
                yield struct.unpack_from("!I", header)[0], found.get(ATTR_PAYLOAD, b"")

    def accept(self, packet_id: int, payload: bytes | None = None) -> None:
        data = attr(ATTR_VERDICT_HDR, struct.pack("!II", NF_ACCEPT, packet_id))
        if payload is not None:
            data += attr(ATTR_PAYLOAD, payload)
        self.sock.send(message(MSG_VERDICT, self.number, data))

    def close(self) -> None:
        try:
            self._config(attr(CFG_CMD, struct.pack("!BBH", CMD_UNBIND, 0, socket.AF_INET)))
        finally:
            self.sock.close()


def flip_bit(packet: bytes, rng: random.Random) -> bytes:
    """The packet with one random bit flipped after the IPv4 header (L4 header or data),
    so it still reaches the peer's stack, whose checksum then sees the damage."""
    header = (packet[0] & 0x0F) * 4 if packet else 0
    if len(packet) <= header:
        return packet
    index = rng.randrange(header, len(packet))
    return packet[:index] + bytes([packet[index] ^ (1 << rng.randrange(8))]) + packet[index + 1:]


class Degrader:
    """What happens to each packet (a pure decision from the options and the RNG)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.kind, self.ms, self.jitter, self.p = args.kind, args.ms, args.jitter, args.probability
        self.rng = random.Random(args.seed)

    def hold_s(self) -> float:
        if self.kind == "delay":
            return max(0.0, self.ms + self.rng.uniform(-self.jitter, self.jitter)) / 1000
        if self.kind == "reorder":
            return 0.0 if self.rng.random() < self.p else self.ms / 1000
        return 0.0

    def hit(self) -> bool:
        return self.kind in ("duplicate", "corrupt") and self.rng.random() < self.p


def serve(args: argparse.Namespace) -> None:
    degrader = Degrader(args)
    queue = Queue(args.queue, copy_packet=args.kind in ("duplicate", "corrupt"))
    raw = None
    if args.kind == "duplicate":
        raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        raw.setsockopt(socket.SOL_SOCKET, SO_MARK, args.mark)
    stats = {"kind": args.kind, "packets": 0, "held": 0, "held_ms_total": 0.0, "held_ms_max": 0.0,
             "duplicated": 0, "corrupted": 0, "overruns": 0, "started": time.time()}
    held: list[tuple[float, int, float]] = []  # (release at, packet id, queued at)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(True))
    next_stats = 0.0

    def release(packet_id: int, queued: float, now: float, payload: bytes | None = None) -> None:
        queue.accept(packet_id, payload)
        waited = (now - queued) * 1000
        stats["held_ms_total"] += waited
        stats["held_ms_max"] = max(stats["held_ms_max"], waited)

    while not stopping:
        now = time.monotonic()
        while held and held[0][0] <= now:
            _, packet_id, queued = heapq.heappop(held)
            release(packet_id, queued, now)
        if now >= next_stats:
            write_stats(args.stats, stats)
            next_stats = now + 1.0
        timeout = min(max(0.0, held[0][0] - now), 0.2) if held else 0.2
        try:
            ready, _, _ = select.select([queue.sock], [], [], timeout)
        except InterruptedError:
            continue
        if not ready:
            continue
        try:
            batch = list(queue.packets())
        except OSError as error:  # ENOBUFS: the kernel dropped messages it could not deliver
            if error.errno == 105:
                stats["overruns"] += 1
                continue
            raise
        now = time.monotonic()
        for packet_id, payload in batch:
            stats["packets"] += 1
            hold = degrader.hold_s()
            if hold > 0:
                stats["held"] += 1
                heapq.heappush(held, (now + hold, packet_id, now))
                continue
            if degrader.hit():
                if args.kind == "corrupt":
                    stats["corrupted"] += 1
                    release(packet_id, now, now, flip_bit(payload, degrader.rng))
                    continue
                release(packet_id, now, now)
                stats["duplicated"] += 1
                try:
                    raw.sendto(payload, (socket.inet_ntoa(payload[16:20]), 0))
                except OSError:
                    stats["duplicated"] -= 1
                continue
            release(packet_id, now, now)
    now = time.monotonic()
    for _, packet_id, queued in held:
        release(packet_id, queued, now)
    stats["stopped"] = time.time()
    queue.close()
    write_stats(args.stats, stats)


def write_stats(path: str, stats: dict) -> None:
    temporary = f"{path}.tmp"
    with open(temporary, "w") as out:
        json.dump(stats, out)
    os.replace(temporary, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=["delay", "reorder", "duplicate", "corrupt"], required=True)
    parser.add_argument("--queue", type=int, required=True)
    parser.add_argument("--ms", type=float, default=0.0)
    parser.add_argument("--jitter", type=float, default=0.0)
    parser.add_argument("--probability", type=float, default=0.0)
    parser.add_argument("--mark", type=lambda text: int(text, 0), default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stats", required=True)
    serve(parser.parse_args())


if __name__ == "__main__":
    main()
