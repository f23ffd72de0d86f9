"""The `raft` role: `python -m sut raft --config FILE` runs one standalone Raft member
serving the KV store, without a broker. The Raft tests and benches use it to
exercise elections, kill -9, restarts and partitions with real processes, and
the KV store can be used on its own. Config (JSON):

    {"data_dir": "/tmp/r0",
     "raft": {"node_id": "n0", "peers": {"n0": "127.0.0.1:9100", ...},
              "timing": "test" | "default" | {"heartbeat_interval_ms": 200, ...},
              "commit_current_term_only": true, "sync_flush": false},
     "kv": {"read_mode": "read-index" | "log"}}

The Raft store lives in <data_dir>/raftstore/ (data_dir is the default for
raft.data_dir); the process runner adds raft.pid and raft.log.
"""
from __future__ import annotations

from typing import Any

from sut.config import ConfigError
from sut.kv import READ_MODES, KvService, KvStore
from sut.process import Service, StartupError
from sut.raft.config import RaftConfig
from sut.raft.meta import MetaCorrupted
from sut.raft.node import RaftNode


def create(raw: dict[str, Any], source: str) -> "RaftService":
    where = f"config {source}"
    data_dir = raw.get("data_dir")
    if not isinstance(data_dir, str) or not data_dir:
        raise ConfigError(f"{where}: data_dir must be a non-empty string")
    unknown = set(raw) - {"data_dir", "raft", "kv"}
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    raft_raw = raw.get("raft")
    if not isinstance(raft_raw, dict):
        raise ConfigError(f"{where}: raft must be an object")
    config = RaftConfig.from_dict({"data_dir": data_dir, **raft_raw}, f"{where}: raft")
    kv = raw.get("kv", {})
    read_mode = kv.get("read_mode", "read-index") if isinstance(kv, dict) else None
    if read_mode not in READ_MODES:
        raise ConfigError(f"{where}: kv.read_mode must be one of {', '.join(READ_MODES)}")
    return RaftService(config, read_mode)


class RaftService(Service):
    role = "raft"

    def __init__(self, config: RaftConfig, read_mode: str) -> None:
        super().__init__(config.data_dir)
        self.config, self.read_mode = config, read_mode
        self.node: RaftNode | None = None

    async def start(self) -> None:
        store = KvStore()
        try:
            self.node = RaftNode(self.config, apply=lambda e: store.apply(e) if store.owns(e) else None,
                                 log=self.log)
        except MetaCorrupted as exc:
            raise StartupError(str(exc)) from None
        self.node.add_handlers(KvService(self.node, store, self.read_mode).handlers())
        try:
            await self.node.start()
        except OSError as exc:
            raise StartupError(f"cannot listen on {self.config.peers[self.config.node_id]}: "
                               f"{exc.strerror or exc}") from None

    async def stop(self) -> None:
        if self.node is not None:
            await self.node.stop()
