"""Which broker becomes master: the controller's election policy (pure).

Candidates are the live members of the SyncStateSet: only they are known to
hold every acknowledged message. Among them the one with the newest data wins
(higher epoch, then higher max offset), then the lower election priority value,
then the lower broker id so that the choice is deterministic. With unclean
election enabled, any live replica may win when no SSS member is alive; that
can lose acknowledged messages, which is the point of the unclean profile.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable


@dataclass(frozen=True)
class CandidateInfo:
    """What a broker last reported in its heartbeat."""

    epoch: int = 0
    max_offset: int = 0
    priority: int = 0


def rank_key(broker_id: int, info: CandidateInfo) -> tuple[int, int, int, int]:
    """Sort key: the best candidate sorts first."""
    return (-info.epoch, -info.max_offset, info.priority, broker_id)


def _try_elect(brokers: Iterable[int], old_master: int | None, preferred: int | None,
               is_alive: Callable[[int], bool],
               info: Callable[[int], CandidateInfo]) -> int | None:
    live = sorted(b for b in brokers if is_alive(b))
    if not live:
        return None
    if old_master in live and preferred in (None, old_master):
        return old_master  # a live master is never replaced by the policy
    if preferred is not None:
        return preferred if preferred in live else None
    return min(live, key=lambda b: rank_key(b, info(b)))


def elect_master(sync_state_set: Iterable[int], all_replicas: Iterable[int],
                 old_master: int | None, preferred: int | None,
                 is_alive: Callable[[int], bool], info: Callable[[int], CandidateInfo],
                 unclean: bool) -> int | None:
    """The new master, the old one if it is still a live candidate, or None."""
    chosen = _try_elect(sync_state_set, old_master, preferred, is_alive, info)
    if chosen is None and unclean:
        chosen = _try_elect(all_replicas, old_master, preferred, is_alive, info)
    return chosen
