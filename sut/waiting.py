"""Waiting for a future with a deadline, cheaply.

asyncio.wait_for wraps the awaited future in a Task on Python 3.11, which
costs more than the rest of a send; a timer that settles the waiter's own
future does the same job for futures that belong to one waiter.
"""
from __future__ import annotations

import asyncio
from typing import Any, Iterable


async def wait_result(future: asyncio.Future, timeout: float, on_timeout: Any) -> Any:
    """The future's result, or `on_timeout` (set as its result) after `timeout` seconds."""
    if future.done():
        return future.result()
    timer = asyncio.get_running_loop().call_later(max(0.0, timeout), _settle, future, on_timeout)
    try:
        return await future
    finally:
        timer.cancel()


def _settle(future: asyncio.Future, value: Any) -> None:
    if not future.done():
        future.set_result(value)


async def cancel_and_wait(tasks: Iterable[asyncio.Future | None]) -> None:
    """Cancel tasks and wait until each has really ended, ignoring how it ended.

    Stopping a component must not leave a task running behind it (a cancelled
    reconnect loop that keeps dialling), nor fail because one task had crashed.
    """
    pending = [task for task in tasks if task is not None]
    for task in pending:
        task.cancel()
    for task in pending:
        try:
            await task
        except (asyncio.CancelledError, Exception):
            pass
