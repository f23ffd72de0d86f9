"""A linearizable key-value store on the Raft log: read, write, compare-and-set.

Writes and CAS are Raft entries (`K` + JSON); every member applies them in log
order to an in-memory dict, rebuilt from the log after a restart. Reads take
one of two paths (`read_mode`):

- "read-index" (default): the leader notes its commit index, confirms it is
  still leader with a heartbeat round to a quorum that starts after the read
  arrived, waits until it has applied that index, then reads locally. No clock
  assumption, so a deposed leader behind a partition answers NOT_LEADER or
  times out, never a stale value.
- "log": the read is appended to the log like a write and answered when
  applied; slower, but the simplest argument for linearizability.

Values are JSON values (the register workload uses small integers); keys are
strings. The store shares the log with other users (the DLedger broker's
messages): entries that do not start with `K` are not the store's.
"""
from __future__ import annotations

import json
from typing import Any

from sut.protocol import Command, Connection, RequestCode, ResponseCode
from sut.raft.client import LeaderClient
from sut.raft.errors import CasMismatch, RaftError, error_reply
from sut.raft.log import Entry
from sut.raft.node import RaftNode

TAG = b"K"
READ_MODES = ("read-index", "log")


def encode_op(op: dict[str, Any]) -> bytes:
    return TAG + json.dumps(op, separators=(",", ":")).encode()


class KvStore:
    """The replicated state: apply() is deterministic, so every member ends up equal."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}

    @staticmethod
    def owns(entry: Entry) -> bool:
        return entry.data[:1] == TAG

    def apply(self, entry: Entry) -> Any:
        """Apply one committed entry; returns the op's result (CasMismatch for a failed cas)."""
        op = json.loads(entry.data[1:])
        key = op["key"]
        if op["op"] == "write":
            self.data[key] = op["value"]
            return None
        if op["op"] == "cas":
            current = self.data.get(key)
            if current != op["expect"]:
                return CasMismatch(f"{key} is {current!r}, not {op['expect']!r}")
            self.data[key] = op["value"]
            return None
        if op["op"] == "read":
            return self.data.get(key)
        raise ValueError(f"unknown kv op {op['op']!r}")


class KvService:
    """KV_READ / KV_WRITE / KV_CAS handlers for a Raft node's server."""

    def __init__(self, node: RaftNode, store: KvStore, read_mode: str = "read-index") -> None:
        if read_mode not in READ_MODES:
            raise ValueError(f"kv read_mode must be one of {READ_MODES}, got {read_mode!r}")
        self.node, self.store, self.read_mode = node, store, read_mode

    def handlers(self) -> dict[int, Any]:
        return {RequestCode.KV_READ: self.on_read, RequestCode.KV_WRITE: self.on_write,
                RequestCode.KV_CAS: self.on_cas}

    async def on_read(self, cmd: Command, conn: Connection) -> Command:
        key = _key(cmd)
        try:
            if self.read_mode == "log":
                applied = await self.node.propose(encode_op({"op": "read", "key": key}))
                value = applied.result
            else:
                await self.node.read_barrier()
                value = self.store.data.get(key)
        except RaftError as exc:
            return error_reply(cmd, exc)
        return cmd.reply(ResponseCode.SUCCESS, {"value": value, "node": self.node.node_id})

    async def on_write(self, cmd: Command, conn: Connection) -> Command:
        return await self._propose(cmd, {"op": "write", "key": _key(cmd), "value": cmd.fields.get("value")})

    async def on_cas(self, cmd: Command, conn: Connection) -> Command:
        return await self._propose(cmd, {"op": "cas", "key": _key(cmd), "expect": cmd.fields.get("expect"),
                                         "value": cmd.fields.get("value")})

    async def _propose(self, cmd: Command, op: dict[str, Any]) -> Command:
        try:
            applied = await self.node.propose(encode_op(op))
        except RaftError as exc:
            return error_reply(cmd, exc)
        return cmd.reply(ResponseCode.SUCCESS, {"index": applied.index, "node": self.node.node_id})


def _key(cmd: Command) -> str:
    key = cmd.fields.get("key")
    if not isinstance(key, str) or not key:
        raise ValueError("kv request needs a non-empty string field 'key'")
    return key


class KvClient:
    """read / write / cas against a Raft KV group. Raises RaftError subclasses whose
    `definite` says fail (True) or info (False); CasMismatch is a definite fail."""

    def __init__(self, addresses: list[str], timeout: float = 5.0) -> None:
        self.leader = LeaderClient(addresses, timeout)

    @property
    def last_node(self) -> str | None:
        return self.leader.last_node

    async def read(self, key: str) -> Any:
        reply = await self.leader.call(RequestCode.KV_READ, {"key": key})
        return reply.fields.get("value")

    async def write(self, key: str, value: Any) -> None:
        await self.leader.call(RequestCode.KV_WRITE, {"key": key, "value": value})

    async def cas(self, key: str, expect: Any, value: Any) -> None:
        await self.leader.call(RequestCode.KV_CAS, {"key": key, "expect": expect, "value": value})

    async def close(self) -> None:
        await self.leader.close()
