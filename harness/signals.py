"""Stop signals: SIGTERM and SIGHUP stop a run or a campaign the way Ctrl-C does.

systemd, cron wrappers and CI stop a job with SIGTERM (and a closed terminal
sends SIGHUP); a harness that dies on those leaves namespaces, SUT processes
and iptables rules behind. Inside `stop_signals()` both raise `Stopped`, a
KeyboardInterrupt, so every `except KeyboardInterrupt` / `finally` that heals
on Ctrl-C heals on them too. During clean-up, `deferred_stop` turns every stop
signal into a "please wait" message: healing and stopping must finish.

An event loop is stopped differently (`run_stoppable`): the signal cancels its
main task. An exception raised at an arbitrary bytecode inside asyncio or a
thread pool can leave a lock taken or a callback lost, and the heal that then
waits on it waits for ever; a cancellation arrives only at an `await`.
"""
from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from typing import Any, Callable, Coroutine, Iterator, TypeVar

T = TypeVar("T")

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(KeyboardInterrupt):
    """A stop signal arrived; `signame` says which (SIGTERM, SIGHUP)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.signame = signal.Signals(signum).name
        super().__init__(f"stopped by {self.signame}")


def stop_reason(exc: BaseException) -> str:
    """What stopped us, for run.json and the console: `interrupted by SIGTERM` or Ctrl-C."""
    if isinstance(exc, Stopped) and exc.signum != signal.SIGINT:
        return f"interrupted by {exc.signame}"
    return "interrupted by Ctrl-C"


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


class _Stopping:
    """The one "a stop signal arrived" state of the process, shared by every stop_signals
    and run_stoppable block however they nest: once set, later signals only say "wait"
    wherever they land (an outer block's handler is back once an inner one returns)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.depth = 0

    @contextlib.contextmanager
    def scope(self) -> Iterator["_Stopping"]:
        """Blocks nest; the state is forgotten when the outermost one ends."""
        self.depth += 1
        try:
            yield self
        finally:
            self.depth -= 1
            if self.depth == 0:
                self.signum = None

    def first(self, signum: int) -> bool:
        """Record a stop signal; whether it is the first one."""
        if self.signum is not None:
            return False
        self.signum = signum
        return True


_STOPPING = _Stopping()


@contextlib.contextmanager
def stop_signals(say: Callable[[], None] | None = None) -> Iterator[None]:
    """Within the block, SIGINT, SIGTERM and SIGHUP raise `Stopped` (a KeyboardInterrupt)
    in the main thread. Only the first stop signal raises: a second one while the first
    is unwinding (before the clean-up reaches its `deferred_stop`) would cut the heal
    short, so it only calls `say`. Outside the main thread this does nothing."""
    if not _in_main_thread():
        yield
        return
    with _STOPPING.scope() as stopping:
        def raise_stopped(signum: int, frame: Any) -> None:
            if not stopping.first(signum):
                if say is not None:
                    say()
                return
            raise Stopped(signum)

        with _handling(raise_stopped):
            yield


@contextlib.contextmanager
def deferred_stop(say: Callable[[], None]) -> Iterator[None]:
    """Within the block every stop signal only calls `say` (tell the user to wait)."""
    if not _in_main_thread():
        yield
        return

    def please_wait(signum: int, frame: Any) -> None:
        say()

    with _handling(please_wait):
        yield


def run_stoppable(coro: Coroutine[Any, Any, T], say: Callable[[], None] | None = None) -> T:
    """`asyncio.run(coro)` in which the first stop signal cancels `coro`'s task and, once
    its `finally` blocks have run and the loop has shut down (the default executor's
    threads joined), raises `Stopped`. Later signals only call `say`, and so does every
    signal when an enclosing block is already stopping (a clean-up that runs a loop).
    Outside the main thread this is `asyncio.run`."""
    if not _in_main_thread():
        return asyncio.run(coro)
    received: list[int] = []  # the stop signal that cancelled this task
    with _STOPPING.scope() as stopping, asyncio.Runner() as runner:
        loop = runner.get_loop()
        task = loop.create_task(coro)

        def cancel(signum: int, frame: Any) -> None:
            first = stopping.first(signum)
            if first:
                received.append(signum)
            if first and not task.done():
                loop.call_soon_threadsafe(task.cancel)
            elif say is not None:
                say()

        with _handling(cancel):
            try:
                result = loop.run_until_complete(task)
            except asyncio.CancelledError:
                if not received:
                    raise
            finally:
                runner.close()  # here, not at the `with`'s end: joining the threads is still under `cancel`
    if received:
        raise Stopped(received[0])
    return result


@contextlib.contextmanager
def _handling(handler: Callable[[int, Any], None]) -> Iterator[None]:
    """`handler` for every stop signal within the block; the previous handlers after it."""
    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
