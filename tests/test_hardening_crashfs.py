"""The crash file system's control socket: real abstract UNIX sockets, a real other uid.

One client that stalls, one that leaves before its answer and one of another
uid must not take the socket from the harness for the rest of the mount.
"""
from __future__ import annotations

import os
import secrets
import socket

import pytest

from nuclei import Journal, heal, lazyfs_node
from nuclei.lazyfs_node import CrashState, ask, control_address, serve_control


class _Handles:
    """The FUSE operations' one method the control loop calls."""

    def drop_handles(self) -> None:
        pass


@pytest.fixture
def mountpoint(tmp_path, monkeypatch):
    monkeypatch.setattr(lazyfs_node, "CONTROL_TIMEOUT_S", 0.5, raising=False)
    name = str(tmp_path / f"mnt-{secrets.token_hex(4)}")
    serve_control(CrashState(str(tmp_path / "state")), _Handles(), name)
    return name


def _connect(mountpoint: str) -> socket.socket:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(control_address(mountpoint))
    return conn


def test_a_silent_client_does_not_hold_the_control_socket(mountpoint):
    silent = _connect(mountpoint)
    try:
        assert ask(mountpoint, "status", timeout=5.0)["ok"]
    finally:
        silent.close()


def test_a_client_gone_before_its_answer_does_not_end_the_loop(mountpoint):
    for _ in range(3):
        with _connect(mountpoint) as gone:
            gone.sendall(b"lose\n")
            gone.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")  # RST on close
    assert ask(mountpoint, "status", timeout=5.0)["ok"]


@pytest.mark.root
def test_a_client_of_another_uid_gets_no_answer(mountpoint):
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child becomes "nobody" and asks
        try:
            os.close(read)
            os.setgid(65534)
            os.setuid(65534)
            with _connect(mountpoint) as conn:
                conn.settimeout(5.0)
                try:
                    conn.sendall(b"lose\n")
                    os.write(write, conn.recv(100) or b"-")
                except (ConnectionResetError, BrokenPipeError):  # closed on us: refused too
                    os.write(write, b"-")
        except BaseException as error:  # noqa: BLE001 - report to the parent, never return into pytest
            os.write(write, f"error {error}".encode())
        finally:
            os._exit(0)
    os.close(write)
    answer = os.read(read, 200)
    os.waitpid(child, 0)
    os.close(read)
    assert answer == b"-", answer
    assert ask(mountpoint, "status", timeout=5.0)["losses"] == []


def test_a_heal_that_unmounts_restarts_no_process_on_that_node(tmp_path):
    """`chaos heal --store` after a killed harness: a SUT process restarted on the crash file
    system would lose its data directory when the heal unmounts it a moment later."""
    journal = Journal(tmp_path / "journal.jsonl")
    journal.record("mount", "n1", mountpoint="/w/data", workdir="/w", pidfile="/w/lazyfs/lazyfs.pid",
                   logfile="/w/lazyfs/lazyfs.log")
    kill = journal.record("kill", "n1", signal="KILL", name="broker-a-0", pidfile="/w/data/broker.pid",
                          argv=["python3", "-m", "sut", "broker"], pid=1, starttime=1)
    started: list[str] = []
    report = heal(_NoNode(), journal, start=lambda ref: started.append(ref.name), unmount=True)
    assert started == []
    assert any(line.startswith("n1: broker-a-0 not restarted: ") for line in report.done), report
    assert kill.id not in {entry.id for entry in journal.pending()}


class _NoNode:
    """A pool whose node cannot be reached: every command fails (the unmount is reported)."""

    def run(self, *args, **kwargs):
        raise OSError("unreachable")
