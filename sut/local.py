"""A profile's processes as real subprocesses on loopback (tests and benchmarks).

Every "node" is 127.0.0.1 with its own directory; every port is a free port
picked at render time. Processes are started with `python -m sut` exactly as
on a node and stopped or killed with real signals. Use as a context manager:
everything started is killed on exit, also when a test fails.
"""
from __future__ import annotations

import copy
import json
import os
import signal as signals
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from sut import admin
from sut.profiles import Profile, RenderedProcess, get, render

SUT_ROOT = Path(__file__).resolve().parent.parent  # the directory that contains sut/


def free_ports(count: int) -> list[int]:
    """Ports the kernel says are free right now (all held open until all are picked)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


class LocalCluster:
    def __init__(self, profile: str | Profile, base_dir: str | Path, timing: str = "fast",
                 overrides: dict[str, dict[str, Any]] | None = None,
                 python: str = sys.executable) -> None:
        self.profile = get(profile) if isinstance(profile, str) else profile
        self.base = Path(base_dir)
        self.python = python
        n = self.profile.nodes_needed
        pool = iter(free_ports(sum(1 + sum(k.endswith("_port") for k in p.config)
                                    for p in self.profile.processes) + 4))
        self.processes: dict[str, RenderedProcess] = {
            p.name: p for p in render(self.profile, ["127.0.0.1"] * n,
                                      [str(self.base / f"node{i}") for i in range(n)], timing,
                                      ports=lambda _name, _key, _default: next(pool))}
        for name, extra in (overrides or {}).items():
            self.processes[name].config = deep_merge(self.processes[name].config, extra)
        self.popen: dict[str, subprocess.Popen] = {}

    # -- addresses ------------------------------------------------------------------
    def address(self, name: str) -> str:
        return self.processes[name].address

    @property
    def namesrv_addrs(self) -> list[str]:
        return [p.address for p in self.processes.values() if p.role == "namesrv"]

    def config_path(self, name: str) -> Path:
        proc = self.processes[name]
        return self.base / f"node{proc.node}" / "conf" / f"{name}.json"

    def data_dir(self, name: str) -> Path:
        return Path(self.processes[name].data_dir)

    def log_text(self, name: str) -> str:
        proc = self.processes[name]
        path = self.data_dir(name) / f"{proc.role}.log"
        return path.read_text() if path.exists() else ""

    # -- lifecycle -------------------------------------------------------------------
    def start(self, name: str) -> subprocess.Popen:
        proc = self.processes[name]
        path = self.config_path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(proc.config, indent=2))
        self.data_dir(name).mkdir(parents=True, exist_ok=True)
        out = open(self.data_dir(name) / f"{proc.role}.out", "ab")
        env = {**os.environ, "PYTHONPATH": str(SUT_ROOT)}
        child = subprocess.Popen([self.python, "-m", "sut", proc.role, "--config", str(path)],
                                 stdout=out, stderr=subprocess.STDOUT, env=env, cwd=str(self.base))
        out.close()
        self.popen[name] = child
        return child

    def start_all(self, timeout: float = 30.0) -> None:
        for name in self.processes:
            self.start(name)
        self.wait_ready(timeout=timeout)

    def wait_ready(self, names: list[str] | None = None, timeout: float = 30.0) -> None:
        names = names or list(self.processes)
        addrs = {self.address(n): n for n in names}
        pending = admin.run_sync(admin.wait_ready(list(addrs), timeout))
        if pending:
            dead = {n: self.popen[n].poll() for n in names if n in self.popen and self.popen[n].poll() is not None}
            details = "; ".join(f"{addrs[a]}: {why}" for a, why in pending.items())
            raise TimeoutError(f"not ready after {timeout}s: {details}; exited: {dead}")

    def send_signal(self, name: str, sig: int) -> None:
        self.popen[name].send_signal(sig)

    def kill(self, name: str, sig: int = signals.SIGKILL, timeout: float = 10.0) -> int:
        """Signal a process and wait for it to exit; return its exit code."""
        child = self.popen[name]
        if child.poll() is None:
            child.send_signal(sig)
        return child.wait(timeout)

    def stop(self, name: str, timeout: float = 20.0) -> int:
        return self.kill(name, signals.SIGTERM, timeout)

    def restart(self, name: str, timeout: float = 30.0) -> None:
        self.start(name)
        self.wait_ready([name], timeout)

    def close(self) -> None:
        for child in self.popen.values():
            if child.poll() is None:
                child.kill()
        for child in self.popen.values():
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                pass

    def __enter__(self) -> "LocalCluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def wait_until(predicate, timeout: float, interval: float = 0.05, what: str = "condition") -> Any:
    """Poll until predicate() is truthy; return its value or raise TimeoutError."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what} not reached within {timeout}s")
        time.sleep(interval)
