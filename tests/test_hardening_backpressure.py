"""The SUT's RPC server under a peer that pipelines requests and never reads the answers,
one that holds connections open, and one that trickles a frame: a real server process on
loopback (sut.protocol.RpcServer, as every SUT process runs it), real sockets."""
from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sut.protocol import Command, RequestCode, encode

REPO = Path(__file__).resolve().parent.parent

SERVER = textwrap.dedent("""
    import asyncio, logging, sys
    from sut.protocol import ResponseCode, RpcServer, ServerLimits
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(levelname)s %(message)s")

    async def main():
        def answer(cmd, conn):  # a cheap request with a 1 KiB answer, as a pull of one message
            return cmd.reply(ResponseCode.SUCCESS, {}, b"x" * 1024)
        limits = ServerLimits(stall_timeout_s=1.0, idle_timeout_s=2.0, max_connections=8)
        server = RpcServer("127.0.0.1", 0, answer, logging.getLogger("rpc"), limits=limits)
        await server.start()
        print(server._server.sockets[0].getsockname()[1], flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())
""")


@pytest.fixture
def server():
    proc = subprocess.Popen([sys.executable, "-c", SERVER], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline())
        yield proc, port
    finally:
        proc.kill()
        proc.communicate()


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def log_of(proc: subprocess.Popen) -> str:
    proc.kill()
    return proc.communicate()[1]


def test_a_peer_that_pipelines_and_never_reads_is_cut_off_with_memory_bounded(server):
    proc, port = server
    before = rss_kb(proc.pid)
    request = encode(Command(int(RequestCode.GET_ROUTE), {"topic": "chaos"}))
    burst = request * 1000
    sent, cut_off, peak, unsent = 0, False, before, memoryview(b"")
    with socket.create_connection(("127.0.0.1", port)) as peer:
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
        peer.settimeout(0.2)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if not unsent:
                if sent >= 100_000:  # unread answers: 100 MB at most
                    break
                unsent, sent = memoryview(burst), sent + 1000
            try:
                unsent = unsent[peer.send(unsent):]
            except TimeoutError:
                pass  # the server stopped reading us: keep pushing until it cuts us off
            except (ConnectionResetError, BrokenPipeError):
                cut_off = True
                break
            peak = max(peak, rss_kb(proc.pid))
        if not cut_off:
            peer.settimeout(10)
            try:
                while peer.recv(1 << 20):  # what was sent before the cut, then the reset
                    pass
                cut_off = True
            except ConnectionResetError:
                cut_off = True
            except TimeoutError:
                pass
    peak = max(peak, rss_kb(proc.pid))
    log = log_of(proc)
    assert cut_off, f"still connected after {sent} requests; server log: {log[-500:]}"
    assert "cut off peer 127.0.0.1:" in log and "not reading its responses" in log, log[-500:]
    assert peak - before < 40_000, f"server grew by {peak - before} KB for {sent} unread requests"


def test_connections_beyond_the_limit_are_refused_and_idle_ones_closed(server):
    proc, port = server
    held = [socket.create_connection(("127.0.0.1", port)) for _ in range(8)]
    try:
        with socket.create_connection(("127.0.0.1", port)) as extra:
            assert closed_by_server(extra, within=5)
        started = time.monotonic()
        assert closed_by_server(held[0], within=10)  # idle: closed after idle_timeout_s
        assert time.monotonic() - started < 8
    finally:
        for conn in held:
            conn.close()
    log = log_of(proc)
    assert "refused a connection from 127.0.0.1:" in log and "closing idle connection" in log, log[-500:]


def closed_by_server(conn: socket.socket, within: float) -> bool:
    """Whether the server closes (EOF) or resets the connection within `within` seconds."""
    conn.settimeout(within)
    try:
        return conn.recv(10) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
