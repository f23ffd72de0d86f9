"""The two things every nucleus needs from the pool: run a script, and fan out over nodes."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class NucleusError(Exception):
    """An action could not be applied, undone or verified; the message names node and action."""


def sh(pool: Any, node: str, script: str, timeout: float = 30) -> Any:
    """Run a POSIX shell script on a node; the caller reads `.exited` and `.stdout`."""
    return pool.run(node, script, timeout=timeout, check=False)


def in_parallel(action: Callable[[T], R], items: Sequence[T] | Iterable[T]) -> list[R]:
    """Apply `action` to every item at once (one thread per node, the pool keeps the
    connections); waits for all, then raises the first error if any failed."""
    items = list(items)
    if len(items) <= 1:
        return [action(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(len(items), 32)) as executor:
        futures = [executor.submit(action, item) for item in items]
    errors = [future.exception() for future in futures if future.exception() is not None]
    if errors:
        raise errors[0]
    return [future.result() for future in futures]
