"""Classic master-slave replication (RocketMQ's HAService), no failover.

Roles are fixed by configuration. The slave connects to the master's HA port
and reports its log end (HA_ACK, one-way, `offset` field); the master streams
commitlog bytes from there as HA_TRANSFER pushes (`offset` field, body = whole
records, never across a segment end; an empty body is a heartbeat). The slave
appends them at the same offsets and reports its new end after each append
and at least every heartbeat interval. There is no truncation: if the offsets
do not line up, the connection is dropped (logged) and retried.

SYNC_MASTER: after appending, wait until `in_sync_replicas` copies (the master
counts as one) have the message, up to slave_timeout_ms, else
FLUSH_SLAVE_TIMEOUT; if too few slaves are connected and close enough
(max_gap_bytes), answer SLAVE_NOT_AVAILABLE at once. Both are sent after the
append, so both are indeterminate. ASYNC_MASTER never waits for slaves.
Slaves reject sends with NOT_MASTER before appending (a definite failure) but
serve reads of everything they have.
"""
from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from dataclasses import dataclass
from typing import Any, Literal

from sut.config import ConfigError, split_address
from sut.ha.base import HAStrategy, PutResult, Role, status_after_append
from sut.message import CorruptRecord, Message
from sut.protocol import (
    FLAG_ONEWAY, Command, Connection, ProtocolError, RequestCode, ResponseCode, RpcServer,
    encode, read_command,
)
from sut.waiting import wait_result


@dataclass
class MasterSlaveSettings:
    """The broker config's `ha` object in master-slave mode (RocketMQ names in brackets)."""

    broker_role: Literal["ASYNC_MASTER", "SYNC_MASTER", "SLAVE"] = "ASYNC_MASTER"  # [brokerRole]
    in_sync_replicas: int = 1              # [inSyncReplicas], the master counts as one
    slave_timeout_ms: int = 3000           # [slaveTimeout]
    heartbeat_interval_ms: int = 5000      # [haSendHeartbeatInterval]
    housekeeping_ms: int = 20000           # [haHousekeepingInterval]
    max_gap_bytes: int = 256 * 1024 * 1024  # [haMaxGapNotInSync]
    transfer_batch_bytes: int = 32 * 1024  # [haTransferBatchSize]
    reconnect_interval_ms: int = 5000      # slave's wait before reconnecting
    master_ha_addr: str | None = None      # [haMasterAddress]; else learned from the nameserver

    def validate(self) -> str | None:
        if self.in_sync_replicas < 1:
            return "in_sync_replicas must be at least 1"
        if min(self.slave_timeout_ms, self.heartbeat_interval_ms, self.housekeeping_ms,
               self.reconnect_interval_ms, self.transfer_batch_bytes) <= 0:
            return "timeouts, intervals and sizes must be positive"
        if self.master_ha_addr is not None:
            try:
                split_address(self.master_ha_addr, "master_ha_addr")
            except ConfigError as exc:
                return str(exc)
        return None


class _SlaveSession:
    """The master's view of one connected slave."""

    def __init__(self, conn: Connection, offset: int) -> None:
        self.conn = conn
        self.acked = offset
        self.last_seen = time.monotonic()
        self.pusher: asyncio.Task | None = None


class MasterSlaveHA(HAStrategy):
    mode = "master-slave"
    settings_class = MasterSlaveSettings

    def __init__(self, broker: Any, settings: MasterSlaveSettings) -> None:
        super().__init__(broker, settings)
        self.is_master = settings.broker_role != "SLAVE"
        self.sync = settings.broker_role == "SYNC_MASTER"
        self.sessions: dict[int, _SlaveSession] = {}
        self._waiters: list[tuple[int, int, asyncio.Future]] = []
        self._seq = itertools.count()
        self._server: RpcServer | None = None
        self.learned_master_ha: str | None = None
        self.master_connected = False
        self._master_known = asyncio.Event()

    @classmethod
    def check_config(cls, broker_config: Any, settings: MasterSlaveSettings) -> str | None:
        if settings.broker_role == "SLAVE" and broker_config.broker_id <= 0:
            return "a SLAVE needs broker_id > 0"
        if settings.broker_role != "SLAVE" and broker_config.broker_id != 0:
            return f"a {settings.broker_role} needs broker_id 0"
        return None

    # -- lifecycle ----------------------------------------------------------------
    async def start(self) -> None:
        if self.is_master:
            self._server = RpcServer(self.broker.config.host, self.broker.config.ha_port,
                                     self._on_ha_request, self.log, on_close=self._on_closed)
            await self._server.start()
            self.broker.spawn(self._housekeeping(), "ha-housekeeping")
        else:
            self.broker.spawn(self._slave_loop(), "ha-client")

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.close()
        for session in list(self.sessions.values()):
            self._drop(session)
        for _, _, future in self._waiters:
            if not future.done():
                future.set_result(False)

    @property
    def role(self) -> Role:
        return Role.MASTER if self.is_master else Role.SLAVE

    @property
    def replicating(self) -> bool:
        if not self.is_master:
            return self.master_connected
        return not self.sync or self._healthy_slaves() >= self.settings.in_sync_replicas - 1

    def registration(self) -> dict[str, Any]:
        fields = super().registration()
        if self.is_master:
            fields["ha_addr"] = self.broker.ha_address
        return fields

    def on_registered(self, fields: dict[str, Any]) -> None:
        ha_addr = fields.get("master_ha_addr")
        if not self.is_master and isinstance(ha_addr, str) and ha_addr != self.learned_master_ha:
            self.log.info("nameserver says the master's HA address is %s", ha_addr)
            self.learned_master_ha = ha_addr
            self._master_known.set()

    # -- sending ------------------------------------------------------------------
    async def put(self, messages: list[Message]) -> PutResult:
        if not self.is_master:
            return PutResult.rejected(ResponseCode.NOT_MASTER, "this broker is a slave")
        need = self.settings.in_sync_replicas - 1
        if not self.sync or need <= 0:
            appended, flushed = await self.append_local(messages)
            return PutResult(status_after_append(flushed, None), appended)
        healthy = self._healthy_slaves()  # judged before the append, as RocketMQ's isSlaveOK
        appended, flushed = await self.append_local(messages)
        if healthy < need:
            code = ResponseCode.SLAVE_NOT_AVAILABLE if flushed else ResponseCode.FLUSH_DISK_TIMEOUT
            return PutResult(code, appended, f"{healthy} slave(s) in sync, {need} needed")
        # the slave copies while the disk flushes, so waiting for one after the other costs nothing
        replicated = await self._wait_replicated(appended.end, need)
        return PutResult(status_after_append(flushed, replicated), appended)

    def _healthy_slaves(self) -> int:
        end = self.store.max_offset
        return sum(1 for s in self.sessions.values() if end - s.acked < self.settings.max_gap_bytes)

    def _acked_at_least(self, offset: int) -> int:
        return sum(1 for s in self.sessions.values() if s.acked >= offset)

    async def _wait_replicated(self, offset: int, need: int) -> bool:
        if self._acked_at_least(offset) >= need:
            return True
        future = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (offset, next(self._seq), future))
        return await wait_result(future, self.settings.slave_timeout_ms / 1000, False)

    def _wake_waiters(self) -> None:
        need = self.settings.in_sync_replicas - 1
        while self._waiters:
            offset, _, future = self._waiters[0]
            if not future.done() and self._acked_at_least(offset) < need:
                break
            heapq.heappop(self._waiters)
            if not future.done():
                future.set_result(True)

    # -- master side --------------------------------------------------------------
    def _on_ha_request(self, cmd: Command, conn: Connection) -> Command | None:
        """Slave reports, handled inline (a plain function: no task per ack)."""
        if cmd.code != RequestCode.HA_ACK:
            return cmd.reply(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                             {"error": f"HA port expects HA_ACK, got code {cmd.code}"})
        offset = cmd.fields.get("offset")
        if not isinstance(offset, int) or isinstance(offset, bool):
            self.log.error("HA report from %s without an integer offset; closing", conn.peer)
            conn.close()
            return None
        session = self.sessions.get(conn.id)
        if session is None:
            if not self.store.min_offset <= offset <= self.store.max_offset:
                self.log.error("slave %s reports offset %d outside our log %d..%d; dropping it "
                               "(master-slave mode never truncates)", conn.peer, offset,
                               self.store.min_offset, self.store.max_offset)
                conn.close()
                return None
            session = self.sessions[conn.id] = _SlaveSession(conn, offset)
            session.pusher = self.broker.spawn(self._push(session), f"ha-push-{conn.peer}")
            self.log.info("slave %s connected at offset %d", conn.peer, offset)
        elif offset > self.store.max_offset:
            self.log.error("slave %s acks offset %d beyond our end %d; closing", conn.peer,
                           offset, self.store.max_offset)
            conn.close()
            return None
        session.acked = max(session.acked, offset)
        session.last_seen = time.monotonic()
        self._wake_waiters()
        return None

    async def _push(self, session: _SlaveSession) -> None:
        """Stream the commitlog to one slave from the offset it reported."""
        batch = self.settings.transfer_batch_bytes
        heartbeat = self.settings.heartbeat_interval_ms / 1000
        offset = session.acked
        last_sent = 0.0
        try:
            while not session.conn.closed.is_set():
                data = self.store.read_raw(offset, batch)
                if data or time.monotonic() - last_sent >= heartbeat:
                    await session.conn.send(Command(int(RequestCode.HA_TRANSFER), {"offset": offset},
                                                    data, 0, FLAG_ONEWAY))
                    offset += len(data)
                    last_sent = time.monotonic()
                if not data:
                    await self.store.wait_new_data(heartbeat)
                    await asyncio.sleep(0)  # let appends that arrived together go out in one frame
        except (ConnectionError, OSError) as exc:
            self.log.warning("HA transfer to %s failed: %s", session.conn.peer, exc)
            session.conn.close()

    def _on_closed(self, conn: Connection) -> None:
        session = self.sessions.get(conn.id)
        if session is not None:
            self._drop(session)

    def _drop(self, session: _SlaveSession) -> None:
        if self.sessions.pop(session.conn.id, None) is None:
            return
        self.log.info("slave %s disconnected (acked %d)", session.conn.peer, session.acked)
        session.conn.abort()  # it may be cut off: do not wait to flush what it never read
        if session.pusher is not None:
            session.pusher.cancel()

    async def _housekeeping(self) -> None:
        limit = self.settings.housekeeping_ms / 1000
        while True:
            await asyncio.sleep(min(limit, self.settings.heartbeat_interval_ms / 1000))
            now = time.monotonic()
            for session in list(self.sessions.values()):
                if now - session.last_seen > limit:
                    self.log.warning("slave %s silent for %.1fs; dropping it", session.conn.peer,
                                     now - session.last_seen)
                    self._drop(session)

    # -- slave side ---------------------------------------------------------------
    def _master_ha_addr(self) -> str | None:
        return self.settings.master_ha_addr or self.learned_master_ha

    async def _slave_loop(self) -> None:
        pause = self.settings.reconnect_interval_ms / 1000
        while True:
            addr = self._master_ha_addr()
            if addr is not None:
                try:
                    await self._follow(addr)
                except (OSError, asyncio.TimeoutError, ProtocolError, CorruptRecord) as exc:
                    self.log.warning("HA connection to master %s: %s; retrying in %.1fs", addr,
                                     str(exc) or type(exc).__name__, pause)
                finally:
                    self.master_connected = False
                await asyncio.sleep(pause)
            else:
                self._master_known.clear()
                await self._master_known.wait()

    async def _follow(self, addr: str) -> None:
        host, port = split_address(addr, "master HA address")
        heartbeat = self.settings.heartbeat_interval_ms / 1000
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), heartbeat)
        try:
            self.master_connected = True
            self.log.info("connected to master %s, reporting offset %d", addr, self.store.max_offset)
            await self._report(writer)
            last_report = time.monotonic()
            while True:
                cmd = await asyncio.wait_for(read_command(reader),
                                             self.settings.housekeeping_ms / 1000)
                if cmd is None:
                    raise ConnectionError("master closed the HA connection")
                offset = cmd.fields.get("offset")
                if cmd.code != RequestCode.HA_TRANSFER or not isinstance(offset, int):
                    raise ProtocolError(f"unexpected frame code {cmd.code} on the HA connection")
                if offset != self.store.max_offset:
                    raise ProtocolError(f"master sent data for offset {offset} but our log ends at "
                                        f"{self.store.max_offset}")
                if cmd.body:
                    self.store.append_replicated(offset, cmd.body)
                if cmd.body or time.monotonic() - last_report >= heartbeat / 2:
                    await self._report(writer)
                    last_report = time.monotonic()
        finally:
            writer.close()

    async def _report(self, writer: asyncio.StreamWriter) -> None:
        writer.write(encode(Command(int(RequestCode.HA_ACK), {"offset": self.store.max_offset},
                                    b"", 0, FLAG_ONEWAY)))
        await writer.drain()

    # -- observability ------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        if self.is_master:
            now = time.monotonic()
            return {"broker_role": self.settings.broker_role,
                    "slaves": [{"peer": s.conn.peer, "acked": s.acked,
                                "silent_ms": int((now - s.last_seen) * 1000)}
                               for s in self.sessions.values()]}
        return {"broker_role": "SLAVE", "master_ha_addr": self._master_ha_addr(),
                "connected": self.master_connected}
