"""The built-in checkers, registered in the order they run."""
from __future__ import annotations

from typing import Callable

from . import perf, rto, stats
from .context import CheckContext, RunFacts
from .group import GroupChecker
from .invariants import InvariantsChecker
from .linearizable import LinearizableChecker
from .message_types import DelayedChecker, OrderedChecker, TransactionalChecker
from .queue import QueueChecker
from .registry import BUILTIN, Sections, register


class EveryRun:
    """A checker of every run whose module checks them all in one call (`check(ctx)`)."""

    def __init__(self, name: str, sections: tuple[str, ...],
                 check: Callable[[CheckContext], list[Sections]]) -> None:
        self.name, self.sections, self._check = name, sections, check

    def applies_to(self, run: RunFacts) -> bool:
        return True

    def check(self, ctx: CheckContext, runs: list[RunFacts]) -> list[Sections]:
        return self._check(ctx)  # `runs` are all of ctx.runs: this checker applies to every run


for checker in (EveryRun("stats", ("stats",), stats.check), QueueChecker(),
                EveryRun("rto", ("rto",), rto.check), EveryRun("perf", ("perf",), perf.check),
                LinearizableChecker(), GroupChecker(), OrderedChecker(), TransactionalChecker(), DelayedChecker(),
                InvariantsChecker()):
    register(checker, origin=BUILTIN)
