"""Stop signals: SIGTERM and SIGHUP stop a run or a campaign the way Ctrl-C does.

systemd, cron wrappers and CI stop a job with SIGTERM (and a closed terminal
sends SIGHUP); a harness that dies on those leaves namespaces, SUT processes
and iptables rules behind. Inside `stop_signals()` both raise `Stopped`, a
KeyboardInterrupt, so every `except KeyboardInterrupt` / `finally` that heals
on Ctrl-C heals on them too. During clean-up, `deferred_stop` turns every stop
signal into a "please wait" message: healing and stopping must finish.
"""
from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Callable, Iterator

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


@contextlib.contextmanager
def stop_signals(say: Callable[[], None] | None = None) -> Iterator[None]:
    """Within the block, SIGINT, SIGTERM and SIGHUP raise `Stopped` (a KeyboardInterrupt)
    in the main thread. Only the first stop signal raises: a second one while the first
    is unwinding (before the clean-up reaches its `deferred_stop`) would cut the heal
    short, so it only calls `say`. Outside the main thread this does nothing."""
    if not _in_main_thread():
        yield
        return
    stopping: list[int] = []

    def raise_stopped(signum: int, frame: Any) -> None:
        if stopping:
            if say is not None:
                say()
            return
        stopping.append(signum)
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


@contextlib.contextmanager
def _handling(handler: Callable[[int, Any], None]) -> Iterator[None]:
    """`handler` for every stop signal within the block; the previous handlers after it."""
    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
