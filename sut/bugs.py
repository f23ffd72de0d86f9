"""The bug library: named, switchable reproductions of real classes of HA bugs.

Each bug is a small change behind a flag in the code path where such a bug
lives (no copy of the SUT). A run switches bugs on with `chaos run --bug NAME`
or a campaign's `bugs:` list; `sut.profiles.render` writes the names into the
config of every process whose role carries the bug, and `sut.process` switches
them on before the role starts. A campaign that misses a bug its faults should
expose has lost its teeth (`chaos teeth`, docs/teeth.md).

Stdlib only, like the rest of the SUT: the harness reads the same registry.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable


@dataclass(frozen=True)
class Bug:
    name: str
    description: str
    source: str                   # where the bug class is documented
    anomaly: str                  # what the checkers should find
    families: tuple[str, ...]     # fault families that expose it (sut.profiles.FAULT_FAMILIES)
    modes: tuple[str, ...]        # profile modes whose processes run the buggy path
    roles: tuple[str, ...]        # process roles the flag is switched on in
    needs_faults: tuple[str, ...] = ()   # specific faults (beyond a family) without which it stays hidden
    workloads: tuple[str, ...] = ()      # the workloads that can see it; empty: any


BUGS: dict[str, Bug] = {bug.name: bug for bug in (
    Bug("raft-commit-prior-term",
        "a new Raft leader appends no entry of its own term and commits its older tail by counting "
        "replicas",
        "Raft paper section 5.4.2 and figure 8; DLedger 0.3.1.2 lacked the current-term check, and "
        "DLedger leaders appended no no-op before openmessaging/dledger issue 305",
        "lost after consume and inconsistent offsets: an older-term entry counted committed (and "
        "read) is overwritten by a later leader holding an entry of a term in between",
        ("partition",), ("dledger",), ("broker",),
        needs_faults=("partition-majorities-ring", "figure-8-partition")),
    Bug("raft-commit-without-quorum",
        "the Raft leader counts an entry committed as soon as it has it itself",
        "Raft paper section 5.3 (an entry is committed once a majority stores it)",
        "lost after consume and inconsistent offsets: a partitioned leader's acknowledged tail is "
        "truncated by the new leader",
        ("partition",), ("dledger",), ("broker",)),
    Bug("raft-vote-ignores-log",
        "a Raft voter grants its vote to a candidate whose log is behind its own",
        "Raft paper section 5.4.1 (election restriction)",
        "lost and inconsistent offsets: a rejoining stale node whose term climbed while it was "
        "cut off wins the election and the followers cut their committed entries to its log",
        # An isolated node's term climbs (no one answers it); a ring or bridge never does
        # that, since a voter that follows a leader answers "has leader" and the candidate
        # keeps its term. The stale node wins only if it asks before the majority's leader
        # hears its term, so one heal catches it only sometimes.
        ("partition",), ("dledger",), ("broker",)),
    Bug("ack-without-sync-state-set",
        "a Controller-mode master acknowledges a send before the SyncStateSet members have it",
        "RocketMQ issue 7017 (an old master cut off from the controller keeps acknowledging); "
        "allAckInSyncStateSet in RIP-44",
        "lost: the isolated master's acknowledged tail is truncated when it rejoins as a slave",
        ("partition",), ("controller",), ("broker",)),
    Bug("sync-state-set-shrink-before-commit",
        "a Controller-mode master acks with a shrunk SyncStateSet before the controller committed it",
        "RIP-44 AutoSwitch HA: while an alter-SyncStateSet is pending the master acks with the union "
        "of the old and new sets",
        "lost and lost after consume: the isolated master drops its slaves from the set and acks alone",
        ("partition",), ("controller",), ("broker",)),
    Bug("truncate-keeps-consume-queue",
        "a replica that truncates its commitlog to the consistent point keeps the consume-queue "
        "entries of the cut tail",
        "RocketMQ truncates the logic queues with the commitlog (DefaultMessageStore."
        "truncateDirtyLogicFiles) when a rejoining AutoSwitch replica cuts to the consistent point",
        "inconsistent offsets and lost after consume: queue offsets shift once the truncated "
        "replica is master again",
        ("partition",), ("controller",), ("broker",)),
    Bug("read-beyond-confirm-offset",
        "a Controller-mode broker serves pulls up to its log's end, not the confirm offset",
        "RIP-44 AutoSwitch HA: consumers read only up to the confirm offset (confirmOffset)",
        "lost after consume and inconsistent offsets: polls read a partitioned master's unreplicated "
        "tail that the new master never had",
        ("partition",), ("controller",), ("broker",)),
    Bug("sync-flush-without-fsync",
        "a SYNC_FLUSH broker acknowledges a send without waiting for the fsync and flushes like "
        "ASYNC_FLUSH, every flush interval",
        "RocketMQ flushDiskType=SYNC_FLUSH (GroupCommitService): SEND_OK only after the flush, "
        "FLUSH_DISK_TIMEOUT otherwise",
        "lost: a machine crash takes back acknowledged messages that were only in the page cache",
        ("crash",), ("single",), ("broker",)),
    Bug("offset-commit-ahead",
        "the broker stores a consumer group's commit as the queue's end: messages the consumer has "
        "not processed yet count as consumed",
        "RocketMQ consumer offsets (ConsumerOffsetManager.commitOffset) store what the consumer "
        "committed, the lowest offset it has not finished (ProcessQueue); a commit ahead of "
        "processing is the classic cause of skipped consumption",
        "skip and lost (group checker): the next holder of a queue after a rebalance or failover "
        "starts at the stored offset, past messages nobody consumed",
        ("kill", "partition"), ("controller", "dledger", "master-slave", "single"), ("broker",),
        workloads=("group",)),   # only the group workload reads committed offsets back
)}


class UnknownBug(ValueError):
    """A bug name that is not in the library (one line listing the known names)."""


def known() -> list[str]:
    return sorted(BUGS)


def get(name: str) -> Bug:
    try:
        return BUGS[name]
    except KeyError:
        raise UnknownBug(f"unknown bug {name!r}; known: {', '.join(known())}") from None


def check(names: Iterable[str]) -> list[str]:
    """The names, each known, without repeats (UnknownBug otherwise)."""
    names = list(dict.fromkeys(names))
    for name in names:
        get(name)
    return names


def exposed_by(name: str, mode: str, families: Iterable[str]) -> bool:
    """Whether a run of a profile of `mode` under faults of `families` exercises the bug."""
    bug = get(name)
    return mode in bug.modes and bool(set(families) & set(bug.families))


def for_role(names: Iterable[str], role: str) -> list[str]:
    """The bugs among `names` that are switched on in processes of `role`."""
    return [n for n in names if role in get(n).roles]


# -- inside a SUT process -------------------------------------------------------------
# One process runs one role; its config's `bugs` list is switched on once at start.
CONFIG_KEY = "bugs"
_ON: set[str] = set()


def switch_on(names: Iterable[str]) -> None:
    """Switch the named bugs on for this process (UnknownBug for a name not in the library)."""
    _ON.clear()
    _ON.update(check(names))


def on(name: str) -> bool:
    """Whether the bug is switched on in this process (the code paths ask this)."""
    return name in _ON
