"""A Raft group of real `python -m sut raft` processes, for tests and benches.

Start members, kill them with real signals, restart them on the same data
directory, and poll their status until a condition holds. Processes are
started by a launcher: `SubprocessLauncher` (this machine, loopback; ports
picked free) by default, or any object with the same three methods, e.g. one
that starts them on the nodes of a network-namespace cluster over SSH.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Protocol, TypeVar

from sut.local import SUT_ROOT, free_ports
from sut.protocol import RpcError
from sut.raft.client import LeaderClient

T = TypeVar("T")


class Launcher(Protocol):
    """Starts and signals member processes."""

    def start(self, member: str, argv: list[str], data_dir: str) -> None: ...

    def kill(self, member: str, sig: int) -> None: ...  # waits until gone for KILL/TERM

    def alive(self, member: str) -> bool: ...


class SubprocessLauncher:
    """Members as child processes of this one."""

    def __init__(self) -> None:
        self._procs: dict[str, subprocess.Popen] = {}

    def start(self, member: str, argv: list[str], data_dir: str) -> None:
        with open(os.path.join(data_dir, "stdio.txt"), "ab") as out:
            self._procs[member] = subprocess.Popen(argv, cwd=str(SUT_ROOT), stdout=out,
                                                   stderr=subprocess.STDOUT, start_new_session=True)

    def alive(self, member: str) -> bool:
        proc = self._procs.get(member)
        return proc is not None and proc.poll() is None

    def kill(self, member: str, sig: int) -> None:
        proc = self._procs.get(member)
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class LocalGroup:
    """`size` Raft members n0..n{size-1} under `root`, each in its own process.

    `hosts` gives each member's address (default: all on 127.0.0.1, free ports);
    with explicit hosts every member listens on `port`."""

    def __init__(self, root: str, size: int = 3, timing: str | dict = "test",
                 raft_options: dict[str, Any] | None = None, read_mode: str = "read-index",
                 hosts: list[str] | None = None, port: int = 19300,
                 launcher: Launcher | None = None) -> None:
        self.root = root
        self.members = [f"n{i}" for i in range(size)]
        if hosts:
            self.addresses = {m: f"{h}:{port}" for m, h in zip(self.members, hosts)}
        else:
            self.addresses = {m: f"127.0.0.1:{p}" for m, p in zip(self.members, free_ports(size))}
        self.launcher: Launcher = launcher or SubprocessLauncher()
        for member in self.members:
            os.makedirs(self.data_dir(member), exist_ok=True)
            config = {"data_dir": self.data_dir(member),
                      "raft": {"node_id": member, "peers": self.addresses, "timing": timing,
                               **(raft_options or {})},
                      "kv": {"read_mode": read_mode}}
            with open(self.config_path(member), "w") as f:
                json.dump(config, f, indent=1)
        self.client = LeaderClient(list(self.addresses.values()), timeout=5.0)

    def data_dir(self, member: str) -> str:
        return os.path.join(self.root, member)

    def config_path(self, member: str) -> str:
        return os.path.join(self.root, f"{member}.json")

    # ---- processes -------------------------------------------------------------------
    def start(self, *members: str) -> None:
        for member in members or self.members:
            if not self.alive(member):
                self.launcher.start(member, [sys.executable, "-m", "sut", "raft", "--config",
                                             self.config_path(member)], self.data_dir(member))

    def alive(self, member: str) -> bool:
        return self.launcher.alive(member)

    def kill(self, member: str, sig: int = signal.SIGKILL) -> None:
        """Send `sig` to the member's process; for SIGKILL/SIGTERM wait until it is gone."""
        self.launcher.kill(member, sig)

    def stop(self) -> None:
        """Stop every member: SIGTERM (the launcher escalates to SIGKILL if needed)."""
        with ThreadPoolExecutor(len(self.members)) as executor:  # remote launchers are slow
            list(executor.map(lambda m: self.launcher.kill(m, signal.SIGTERM), self.members))

    def __enter__(self) -> "LocalGroup":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- observing -------------------------------------------------------------------
    async def status(self, member: str) -> dict[str, Any] | None:
        """The member's status, or None if it does not answer."""
        try:
            return await self.client.status(self.addresses[member], timeout=1.0)
        except RpcError:
            return None

    async def statuses(self, members: list[str] | None = None) -> dict[str, dict[str, Any] | None]:
        members = members or self.members
        results = await asyncio.gather(*(self.status(m) for m in members))
        return dict(zip(members, results))

    async def wait_for(self, condition: Callable[[dict[str, dict | None]], T], timeout: float,
                       what: str, members: list[str] | None = None, interval: float = 0.05) -> T:
        """Poll statuses until `condition(statuses)` is truthy; return it or fail naming `what`."""
        deadline = time.monotonic() + timeout
        last: dict = {}
        while time.monotonic() < deadline:
            last = await self.statuses(members)
            result = condition(last)
            if result:
                return result
            await asyncio.sleep(interval)
        raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last statuses: "
                             f"{json.dumps(last, default=str)}")

    async def wait_leader(self, timeout: float = 20.0, members: list[str] | None = None,
                          ready: bool = True) -> str:
        """The single leader among `members`, all of which answer and follow it."""
        leader = await self.wait_for(lambda s: all(s.values()) and sole_leader(s, ready), timeout,
                                     "a single leader followed by every member", members)
        self.client.prefer(self.addresses[leader])
        return leader

    async def close(self) -> None:
        await self.client.close()


def sole_leader(statuses: dict[str, dict | None], ready: bool = True) -> str | None:
    """The member that leads and is followed by every other answering member, if any."""
    up = {m: s for m, s in statuses.items() if s}
    leaders = [m for m, s in up.items() if s["role"] == "leader" and (s["ready"] or not ready)]
    if len(leaders) != 1:
        return None
    leader = leaders[0]
    term = up[leader]["term"]
    if all(s["leader"] == leader and s["term"] == term for m, s in up.items() if m != leader):
        return leader
    return None
