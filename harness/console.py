"""What a run shows on the console: a live status line, and what a stop signal during
clean-up prints (docs/architecture.md, "One run")."""
from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Callable, Iterator

from harness.signals import deferred_stop
from harness.spec import RunSpec
from workloads.runner import Progress


class LiveStatus:
    """Elapsed time, phase, ops ok/fail/info and the current fault, for rich.Live."""

    def __init__(self, spec: RunSpec) -> None:
        self.spec = spec
        self.began = time.monotonic()
        self.phase = "starting"
        self.ops = Progress()
        self.fault = "quiet"

    def line(self) -> str:
        done = self.ops.completions
        return (f"[{time.monotonic() - self.began:6.1f}s] {self.phase:<9} "
                f"ok {done['ok']:>5}  fail {done['fail']:>4}  info {done['info']:>4}  "
                f"in flight {self.ops.in_flight:>3}  fault: {self.fault}")

    def __rich__(self) -> str:
        return self.line()


@contextlib.contextmanager
def live_display(status: LiveStatus, console: Any, enabled: bool) -> Iterator[None]:
    """A live status line on a terminal; a line every 10 s otherwise (logs, CI)."""
    if not enabled:
        yield
        return
    if console.is_terminal:
        from rich.live import Live
        with Live(status, console=console, refresh_per_second=4, transient=False):
            yield
        return
    stop = threading.Event()

    def ticker() -> None:
        while not stop.wait(10):
            console.print(status.line(), highlight=False, soft_wrap=True)
    thread = threading.Thread(target=ticker, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        console.print(status.line(), highlight=False, soft_wrap=True)


def please_wait(console: Any) -> Callable[[], None]:
    """What a stop signal during clean-up prints."""
    return lambda: console.print("[yellow]cleaning up (healing faults, stopping the SUT): please wait[/]")


def deferred_sigint(console: Any) -> contextlib.AbstractContextManager[None]:
    """During clean-up a stop signal (Ctrl-C, SIGTERM, SIGHUP) only says to wait:
    healing and stopping must finish."""
    return deferred_stop(please_wait(console))
