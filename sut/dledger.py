"""DLedger mode: the broker group's commitlog is a Raft log (ha_mode "dledger").

Every send is one Raft entry (`M` + the messages' payloads). The Raft log
(sut/raft: durable, CRC per entry, truncation of divergent suffixes) is the
replicated commitlog; each broker applies committed entries, in order, to its
local MessageStore, which is only the index consumers read through (consume
queues + record bytes). So consumers see committed entries only, on every
broker, and the confirm offset is simply the store's end. The store is
rebuilt from the Raft log when the broker starts (it is derived data).

Broker role follows Raft role: the leader is master (brokerId 0 in its
registration) once it is "ready" (its own no-op entry applied, hence
everything committed before its term applied); followers and candidates are
slaves with their own id. A role change re-registers with the nameservers at
once, so clients find the new master.

A send waits for commit up to maxWaitAckTimeMs: SUCCESS, or APPEND_TIMEOUT
(indeterminate). A non-master rejects with NOT_MASTER, too many pending
appends with PENDING_FULL; both before appending (definite). The same Raft
log also carries the linearizable KV store (sut/kv.py), served on the broker
port with KV_READ / KV_WRITE / KV_CAS.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, Literal

from sut.config import ConfigError
from sut.ha.base import HAStrategy, PutResult, Role
from sut.kv import KvService, KvStore
from sut.message import CorruptRecord, Message, decode_payload, encode_payload
from sut.protocol import Command, RequestCode, ResponseCode
from sut.raft.config import RaftConfig, RaftTiming
from sut.raft.errors import RaftError
from sut.raft.log import Entry
from sut.raft.node import RaftNode

MESSAGES_TAG = b"M"
_LEN = struct.Struct(">I")


def encode_messages(messages: list[Message]) -> bytes:
    """One Raft entry for a send: the tag, then each payload with its length."""
    parts = [MESSAGES_TAG]
    for msg in messages:
        payload = encode_payload(msg)
        parts += [_LEN.pack(len(payload)), payload]
    return b"".join(parts)


def decode_messages(data: bytes) -> list[Message]:
    """The messages of one entry; CorruptRecord if any is malformed (the entry is then skipped whole)."""
    out, pos = [], 1
    while pos < len(data):
        try:
            (size,) = _LEN.unpack_from(data, pos)
        except struct.error:
            raise CorruptRecord(f"truncated message length at byte {pos}") from None
        if pos + _LEN.size + size > len(data):
            raise CorruptRecord(f"message at byte {pos} claims {size} bytes past the entry's end")
        out.append(decode_payload(data[pos + _LEN.size:pos + _LEN.size + size]))
        pos += _LEN.size + size
    return out


@dataclass
class DLedgerSettings:
    """The broker config's `ha` object in DLedger mode (DLedger names in brackets)."""

    peers: list[str] = field(default_factory=list)   # [dLegerPeers]: every member's Raft host:port
    heartbeat_interval_ms: int = 2000                # [heartBeatTimeIntervalMs]
    max_heartbeat_leak: int = 3                      # [maxHeartBeatLeak]
    min_vote_interval_ms: int = 300                  # [minVoteIntervalMs]
    max_vote_interval_ms: int = 1000                 # [maxVoteIntervalMs]
    max_wait_ack_ms: int = 2500                      # [maxWaitAckTimeMs]
    max_pending_requests: int = 10000                # [maxPendingRequestsNum]
    max_inflight_entries: int = 1000                 # entries pushed to a follower, not yet acked
    resend_ms: int = 1000                            # push resend interval
    rpc_timeout_ms: int = 1500
    commit_current_term_only: bool = True            # False = DLedger 0.3.1.2
    sync_flush: bool = False
    kv_read_mode: Literal["read-index", "log"] = "read-index"

    def timing(self) -> RaftTiming:
        return RaftTiming(self.heartbeat_interval_ms, self.max_heartbeat_leak, self.min_vote_interval_ms,
                          self.max_vote_interval_ms, self.max_wait_ack_ms, self.max_pending_requests,
                          self.max_inflight_entries, self.resend_ms, self.rpc_timeout_ms)

    def validate(self) -> str | None:
        if not self.peers:
            return "peers must list every member's Raft address (host:port)"
        if len(set(self.peers)) != len(self.peers):
            return "peers must not repeat an address"
        if min(self.heartbeat_interval_ms, self.max_heartbeat_leak, self.min_vote_interval_ms,
               self.max_wait_ack_ms, self.max_pending_requests, self.max_inflight_entries,
               self.resend_ms, self.rpc_timeout_ms) <= 0:
            return "raft intervals and limits must be positive"
        if self.min_vote_interval_ms > self.max_vote_interval_ms:
            return "min_vote_interval_ms must not exceed max_vote_interval_ms"
        return None


def member_id(index: int) -> str:
    return f"n{index}"


class DLedgerHA(HAStrategy):
    mode = "dledger"
    settings_class = DLedgerSettings

    @classmethod
    def check_config(cls, broker_config: Any, settings: DLedgerSettings) -> str | None:
        own = _own_address(broker_config)
        if own not in settings.peers:
            return f"ha.peers {settings.peers} must contain this broker's Raft address {own} (host:ha_port)"
        return None

    def __init__(self, broker: Any, settings: DLedgerSettings) -> None:
        super().__init__(broker, settings)
        self.index = settings.peers.index(_own_address(broker.config))
        peers = {member_id(i): address for i, address in enumerate(settings.peers)}
        try:
            config = RaftConfig(member_id(self.index), peers, str(broker.config.data_dir), settings.timing(),
                                settings.commit_current_term_only, settings.sync_flush)
        except ConfigError as exc:
            raise ConfigError(f"ha: {exc}") from None
        self.kv = KvStore()
        self.node = RaftNode(config, apply=self._apply, log=self.log, rewind=self._rebuild)
        self._kv_service = KvService(self.node, self.kv, settings.kv_read_mode)
        self.node.add_handlers(self._kv_service.handlers())
        self.node.add_listener(self._on_raft_change)
        self._last_role = Role.SLAVE

    # -- lifecycle -------------------------------------------------------------------
    async def start(self) -> None:
        await self._rebuild()
        await self.node.start()

    async def _rebuild(self) -> None:
        """Empty the state derived from the Raft log; the node applies committed entries again."""
        if self.store.max_offset > self.store.min_offset:
            await self.store.truncate(self.store.min_offset)
        self.kv.data.clear()

    async def stop(self) -> None:
        await self.node.stop()

    # -- role --------------------------------------------------------------------------
    @property
    def role(self) -> Role:
        return Role.MASTER if self.node.is_ready else Role.SLAVE

    @property
    def broker_id(self) -> int:
        return 0 if self.role is Role.MASTER else self.index + 1

    def _on_raft_change(self) -> None:
        role = self.role
        if role is not self._last_role:
            self.log.info("dledger: %s -> %s (raft %s, term %d)", self._last_role.value, role.value,
                          self.node.role.value, self.node.term)
            self._last_role = role
            self.broker.registration_changed()

    # -- writes ------------------------------------------------------------------------
    async def put(self, messages: list[Message]) -> PutResult:
        if not self.node.is_ready:
            leader = self.node.leader_id
            why = (f"raft {self.node.role.value}, not master" if not self.node.is_leader
                   else "raft leader still applying earlier entries")
            result = PutResult.rejected(ResponseCode.NOT_MASTER if not self.node.is_leader
                                        else ResponseCode.SERVICE_NOT_AVAILABLE, why)
            if leader:
                result.extra["leader"] = leader
            return result
        try:
            applied = await self.node.propose(encode_messages(messages))
        except RaftError as exc:
            code = ResponseCode.NOT_MASTER if exc.code == ResponseCode.NOT_LEADER else exc.code
            return PutResult(ResponseCode(code), None, str(exc))
        return PutResult(ResponseCode.SUCCESS, applied.result,
                         extra={"raft_index": applied.index, "raft_term": applied.term})

    def _apply(self, entry: Entry) -> Any:
        """Apply one committed entry on this broker (leader and followers alike)."""
        if self.kv.owns(entry):
            return self.kv.apply(entry)
        if entry.data[:1] == MESSAGES_TAG:
            try:
                messages = decode_messages(entry.data)
            except CorruptRecord as exc:  # any peer may propose: it is refused, never written
                self.log.error("raft entry %d is a corrupt record, skipped: %s", entry.index, exc)
                return RaftError(f"corrupt record: {exc}")
            return self.store.append(messages)
        self.log.error("raft entry %d has unknown tag %r; skipped", entry.index, entry.data[:1])
        return None

    # -- reads and registration -----------------------------------------------------
    def confirm_offset(self) -> int:
        return self.store.max_offset  # only committed entries are ever applied

    def registration(self) -> dict[str, Any]:
        return {"broker_id": self.broker_id, "role": self.role.value}

    def handlers(self) -> dict[int, Any]:
        async def raft_status(cmd: Command, conn: Any) -> Command:
            return cmd.reply(ResponseCode.SUCCESS, self.node.status())
        return {**self._kv_service.handlers(), RequestCode.RAFT_STATUS: raft_status}

    def status(self) -> dict[str, Any]:
        return {"raft": self.node.status(), "member": member_id(self.index)}


def _own_address(broker_config: Any) -> str:
    return f"{broker_config.advertise_host or broker_config.host}:{broker_config.ha_port}"
