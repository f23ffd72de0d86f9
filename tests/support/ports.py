"""Free TCP ports on loopback for the servers a test starts."""
from __future__ import annotations

import socket


def free_ports(count: int) -> list[int]:
    """Distinct free TCP ports on 127.0.0.1 (bound then released)."""
    socks, ports = [], []
    for _ in range(count):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        socks.append(sock)
        ports.append(sock.getsockname()[1])
    for sock in socks:
        sock.close()
    return ports


def free_port() -> int:
    """One free TCP port on 127.0.0.1."""
    return free_ports(1)[0]
