"""Errors of the inventory package, each printable as one clear line.

The CLI shows `str(error)` to the user without a traceback, so every message
says what went wrong and where (file and field, node and reason, command and
exit status).
"""
from __future__ import annotations


def one_line(text: str, limit: int = 300) -> str:
    """Collapse whitespace so a multi-line message fits on one terminal line."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


class InventoryError(Exception):
    """Base class: a bad inventory file, an unreachable node, a failed command."""


class NodeUnreachable(InventoryError):
    """The control node could not connect to (or lost) a node."""

    def __init__(self, node: str, reason: str) -> None:
        self.node = node
        self.reason = one_line(reason)
        super().__init__(f"node {node} is unreachable: {self.reason}")


class CommandFailed(InventoryError):
    """A command on a node exited non-zero (or did not finish in time)."""

    def __init__(self, node: str, cmd: str, exited: int | None, stderr: str) -> None:
        self.node = node
        self.cmd = cmd
        self.exited = exited
        self.stderr = stderr
        detail = one_line(stderr, 200) or "no error output"
        super().__init__(
            f"node {node}: command {one_line(cmd, 120)!r} exited {exited}: {detail}"
        )


class CommandTimeout(CommandFailed):
    """A command did not finish within its timeout and was killed on the node."""

    def __init__(self, node: str, cmd: str, timeout: float) -> None:
        super().__init__(node, cmd, None, f"timed out after {timeout:g} s")
        self.timeout = timeout


class ProvisionError(InventoryError):
    """Creating or removing a local cluster failed (message says which step)."""
