"""Raft configuration: the group's members, where the log lives, and the timing.

Defaults are DLedger's (heartbeat 2000 ms, more than 3 missed heartbeats make a
follower a candidate, vote retry after a random 300-1000 ms, a vote round judged
after at most 2000 ms plus a random part of the vote interval, a client append
waits 2500 ms for commit, at most 10000 pending appends, at most 1000 entries in
flight per follower, resend after 1000 ms). `scaled()` shrinks every interval by
one factor so tests and benches run the same protocol faster.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from sut.config import ConfigError


class RaftConfigError(ConfigError):
    """A Raft config value is missing or malformed; the message names the field."""


@dataclass(frozen=True)
class RaftTiming:
    """Every time-related knob, in milliseconds, and the pipeline limits."""

    heartbeat_interval_ms: int = 2000
    # A follower becomes candidate after more than this many missed heartbeats;
    # a leader steps down when a quorum has not answered for as long.
    max_heartbeat_leak: int = 3
    min_vote_interval_ms: int = 300
    max_vote_interval_ms: int = 1000
    max_wait_ack_ms: int = 2500
    max_pending_requests: int = 10000
    max_inflight_entries: int = 1000
    resend_ms: int = 1000
    rpc_timeout_ms: int = 1500
    max_batch_entries: int = 256
    max_batch_bytes: int = 1 << 20
    # A candidate judges its vote round after a quorum answered or after this plus a random
    # part of max_vote_interval_ms, whichever comes first (DLedger's vote latch waits 2000 ms
    # + random(maxVoteIntervalMs)); unanswered peers count as no vote, so a node cut off from
    # its peers asks again at the pace of the vote interval, not of the RPC timeout.
    vote_wait_ms: int = 2000

    @property
    def election_timeout_s(self) -> float:
        return self.max_heartbeat_leak * self.heartbeat_interval_ms / 1000

    def scaled(self, factor: float) -> "RaftTiming":
        """The same timing with every interval multiplied by `factor` (limits unchanged)."""
        ms = ("heartbeat_interval_ms", "min_vote_interval_ms", "max_vote_interval_ms",
              "max_wait_ack_ms", "resend_ms", "rpc_timeout_ms", "vote_wait_ms")
        return replace(self, **{name: max(1, int(getattr(self, name) * factor)) for name in ms})


# Fast tests: every interval x0.1 (heartbeat 200 ms, election after ~600 ms), but
# ack waits and RPC timeouts keep more room so a loaded 2-core machine does not flap.
TEST_TIMING = replace(RaftTiming().scaled(0.1), max_wait_ack_ms=1000, rpc_timeout_ms=500)


@dataclass(frozen=True)
class RaftConfig:
    """One member's view of its group."""

    node_id: str
    peers: dict[str, str]          # node id -> "host:port" of its Raft endpoint (incl. self)
    data_dir: str
    timing: RaftTiming = field(default_factory=RaftTiming)
    # Raft 5.4.2: count replicas only for entries of the current term. False
    # reproduces DLedger 0.3.1.2, which commits older-term entries by counting.
    commit_current_term_only: bool = True
    # fsync the log after every batch (survives power loss); kill -9 only needs write().
    sync_flush: bool = False

    def __post_init__(self) -> None:
        if self.node_id not in self.peers:
            raise RaftConfigError(f"node_id {self.node_id!r} is not one of peers {sorted(self.peers)}")
        for peer, address in self.peers.items():
            parse_address(address, f"peers.{peer}")
        t = self.timing
        if not 0 < t.min_vote_interval_ms <= t.max_vote_interval_ms:
            raise RaftConfigError("timing: need 0 < min_vote_interval_ms <= max_vote_interval_ms")
        if t.heartbeat_interval_ms <= 0 or t.max_heartbeat_leak <= 0:
            raise RaftConfigError("timing: heartbeat_interval_ms and max_heartbeat_leak must be > 0")

    @property
    def quorum(self) -> int:
        return len(self.peers) // 2 + 1

    @property
    def address(self) -> tuple[str, int]:
        return parse_address(self.peers[self.node_id], f"raft.peers.{self.node_id}")

    @property
    def others(self) -> list[str]:
        return sorted(p for p in self.peers if p != self.node_id)

    @classmethod
    def from_dict(cls, raw: dict[str, Any], where: str = "raft") -> "RaftConfig":
        """Build from JSON-like data; errors name the offending field."""
        if not isinstance(raw, dict):
            raise RaftConfigError(f"{where}: expected an object")
        try:
            node_id, peers, data_dir = raw["node_id"], raw["peers"], raw["data_dir"]
        except KeyError as exc:
            raise RaftConfigError(f"{where}.{exc.args[0]} is missing") from None
        if not isinstance(peers, dict) or not peers:
            raise RaftConfigError(f"{where}.peers must be a non-empty object id -> host:port")
        timing = _timing_from(raw.get("timing", {}), f"{where}.timing")
        unknown = set(raw) - {"node_id", "peers", "data_dir", "timing",
                              "commit_current_term_only", "sync_flush"}
        if unknown:
            raise RaftConfigError(f"{where}: unknown field(s) {sorted(unknown)}")
        try:
            return cls(str(node_id), {str(k): str(v) for k, v in peers.items()}, str(data_dir), timing,
                       bool(raw.get("commit_current_term_only", True)), bool(raw.get("sync_flush", False)))
        except RaftConfigError as exc:
            raise RaftConfigError(f"{where}: {exc}") from None


def _timing_from(raw: Any, where: str) -> RaftTiming:
    if isinstance(raw, str):
        presets = {"default": RaftTiming(), "test": TEST_TIMING}
        if raw not in presets:
            raise RaftConfigError(f"{where}: unknown preset {raw!r} (choose from {sorted(presets)})")
        return presets[raw]
    if not isinstance(raw, dict):
        raise RaftConfigError(f"{where}: expected an object or a preset name")
    known = {f.name for f in fields(RaftTiming)}
    values: dict[str, int] = {}
    for key, value in raw.items():
        if key not in known:
            raise RaftConfigError(f"{where}.{key}: unknown timing field")
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise RaftConfigError(f"{where}.{key}: expected a positive integer, got {value!r}")
        values[key] = value
    return RaftTiming(**values)


def parse_address(address: str, where: str) -> tuple[str, int]:
    """'host:port' -> (host, port) with a clear error."""
    host, sep, port = str(address).rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise RaftConfigError(f"{where}: {address!r} is not host:port")
    return host, int(port)
