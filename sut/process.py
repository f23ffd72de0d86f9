"""Running one SUT process: `python -m sut <role> --config FILE`.

The runner owns what every role needs: the data directory and its lock, the
pidfile `<data_dir>/<role>.pid`, the log `<data_dir>/<role>.log`, signal
handling (SIGTERM/SIGINT: clean shutdown) and exit codes (0 clean stop, 1
runtime failure, 2 bad configuration). A role is a Service created from its
config by a factory registered in ROLES; a background task that dies stops
the process with exit code 1 instead of leaving a half-working server.
"""
from __future__ import annotations

import asyncio
import contextlib
import fcntl
import importlib
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any, Callable, Coroutine

from sut import bugs
from sut.config import ConfigError, load_json

# role -> "module:factory"; factory(config: dict, source: str) -> Service.
# Add a role by adding a line here.
ROLES: dict[str, str] = {
    "namesrv": "sut.namesrv:create",
    "broker": "sut.broker:create",
    "controller": "sut.controller.server:create",
    "raft": "sut.raft.service:create",
}

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class StartupError(Exception):
    """The process cannot start (port in use, data directory locked, bad store)."""


class Service:
    """Base of every role: a data directory, a logger and supervised tasks."""

    role = "service"

    def __init__(self, data_dir: str | Path, log: logging.Logger | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.log = log or logging.getLogger(f"sut.{self.role}")
        self._tasks: set[asyncio.Task] = set()
        self._failed: asyncio.Future | None = None

    async def start(self) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task:
        """Run a background task; if it fails, the whole process stops with an error."""
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self.log.error("background task %s failed", task.get_name(), exc_info=exc)
            failed = self.failed
            if not failed.done():
                failed.set_result(f"background task {task.get_name()} failed: {exc!r}")

    @property
    def failed(self) -> asyncio.Future:
        """Resolves with a reason when a background task dies."""
        if self._failed is None:
            self._failed = asyncio.get_running_loop().create_future()
        return self._failed

    async def cancel_tasks(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def load_factory(role: str) -> Callable[[dict[str, Any], str], Service]:
    if role not in ROLES:
        raise ConfigError(f"unknown role '{role}' (known: {', '.join(sorted(ROLES))})")
    module, _, attr = ROLES[role].partition(":")
    return getattr(importlib.import_module(module), attr)


def pidfile_path(data_dir: Path, role: str) -> Path:
    return data_dir / f"{role}.pid"


def run(role: str, config_path: str) -> int:
    """Run a role until SIGTERM/SIGINT; return the exit code."""
    try:
        raw = load_json(config_path)
        switched_on = _switch_on_bugs(raw, config_path)
        service = load_factory(role)(raw, config_path)
    except ConfigError as exc:
        return _fail(role, str(exc), 2)
    try:
        with _claimed_data_dir(service.data_dir, role):
            _setup_logging(service.data_dir / f"{role}.log")
            service.log.info("starting %s (pid %d, config %s)", role, os.getpid(), config_path)
            if switched_on:
                service.log.warning("library bugs switched on: %s", ", ".join(switched_on))
            return asyncio.run(_serve(service, role))
    except StartupError as exc:
        return _fail(role, str(exc), 1)


def _switch_on_bugs(raw: dict[str, Any], config_path: str) -> list[str]:
    """Take the config's library bugs (sut/bugs.py) out of it and switch them on."""
    names = raw.pop(bugs.CONFIG_KEY, [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ConfigError(f"config {config_path}: {bugs.CONFIG_KEY} must be a list of bug names")
    try:
        bugs.switch_on(names)
    except bugs.UnknownBug as exc:
        raise ConfigError(f"config {config_path}: {exc}") from None
    return names


async def _serve(service: Service, role: str) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await service.start()
    except (StartupError, ConfigError, OSError) as exc:
        service.log.error("cannot start: %s", exc)
        await _stop_quietly(service)
        print(f"sut {role}: error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # a bug: keep the traceback in the log, one line for the user
        service.log.exception("cannot start")
        await _stop_quietly(service)
        print(f"sut {role}: error: internal error while starting ({exc!r}); "
              f"see {service.data_dir / (role + '.log')}", file=sys.stderr)
        return 1
    service.log.info("%s ready", role)
    stopper = asyncio.create_task(stop.wait())
    await asyncio.wait([stopper, service.failed], return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    reason = service.failed.result() if service.failed.done() else None
    service.log.info("shutting down%s", f" after an error: {reason}" if reason else " (signal)")
    await _stop_quietly(service)
    service.log.info("stopped")
    if reason:
        print(f"sut {role}: error: {reason}", file=sys.stderr)
        return 1
    return 0


async def _stop_quietly(service: Service) -> None:
    try:
        await service.stop()
    except Exception:
        service.log.exception("error during shutdown")


@contextlib.contextmanager
def _claimed_data_dir(data_dir: Path, role: str):
    """Create the data dir, lock it for this role and keep the pidfile while running."""
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        lock_fd = os.open(data_dir / f"{role}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise StartupError(f"cannot use data directory {data_dir}: {exc.strerror or exc}") from None
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(lock_fd)
        other = _read_pid(pidfile_path(data_dir, role))
        raise StartupError(f"data directory {data_dir} is in use by another {role} process"
                           + (f" (pid {other})" if other else "")) from None
    pidfile = pidfile_path(data_dir, role)
    pidfile.write_text(f"{os.getpid()}\n")
    try:
        yield
    finally:
        if _read_pid(pidfile) == os.getpid():
            pidfile.unlink(missing_ok=True)
        os.close(lock_fd)


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _setup_logging(path: Path) -> None:
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)


def _fail(role: str, message: str, code: int) -> int:
    print(f"sut {role}: error: {message}", file=sys.stderr)
    return code


def stop_process(role: str, config_path: str, timeout: float) -> int:
    """`python -m sut stop <role> --config FILE`: SIGTERM, then SIGKILL after timeout.

    Only signals the pid in the pidfile if that process was started with this
    config file, so a recycled pid is never hit. Exit 0 when nothing runs.
    """
    try:
        data = load_json(config_path)
    except ConfigError as exc:
        return _fail("stop", str(exc), 2)
    data_dir = data.get("data_dir")
    if not isinstance(data_dir, str):
        return _fail("stop", f"config {config_path}: missing data_dir", 2)
    pid = _read_pid(pidfile_path(Path(data_dir), role))
    if pid is None or not _runs_with(pid, config_path):
        return 0
    os.kill(pid, signal.SIGTERM)
    os.kill(pid, signal.SIGCONT)  # a paused process (SIGSTOP nemesis) handles SIGTERM only once resumed
    if _wait_gone(pid, timeout):
        return 0
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    _wait_gone(pid, 5)
    return 0


def _runs_with(pid: int, config_path: str) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return config_path.encode() in argv and b"sut" in argv


def _wait_gone(pid: int, timeout: float) -> bool:
    import time
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        # a zombie (our own child in tests) counts as gone
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z"):
                return True
        time.sleep(0.05)
    return False
