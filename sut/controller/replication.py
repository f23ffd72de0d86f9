"""The AutoSwitch HA data link between a master and its slaves.

On the master's HA port:
  HA_HANDSHAKE (request/response)  slave -> master: its broker id, whether it
      is an async learner, the master epoch it expects. The master answers
      with its max offset, epoch, confirm offset and (body) its epoch list.
  HA_ACK (one-way)  slave -> master: the slave's max offset. The first one
      after the handshake is where the slave's log now ends (after truncating
      to the consistent point); the master streams from there.
  HA_TRANSFER (one-way push)  master -> slave: header fields offset, epoch,
      epoch_start, confirm_offset; body = whole commitlog records (at most
      the batch size). A batch never spans two epochs, so when the epoch in
      the header is newer than the slave's last epoch, the slave appends
      (epoch, epoch_start) to its epoch file before the data. An empty body
      is a heartbeat that carries the confirm offset.

The slave acks after every append and at least every heartbeat interval.
The master side keeps, per slave, the ack and the last time the slave had
caught up with the master's end, which broker_ha turns into SyncStateSet
changes and the confirm offset.
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Protocol

from sut.config import split_address
from sut.controller.epochs import EpochEntry, EpochFile, find_consistent_point
from sut.invariants import InvariantLog
from sut.message import CorruptRecord
from sut.protocol import (
    FLAG_ONEWAY, BadRequest, Command, Connection, ProtocolError, RequestCode, ResponseCode,
    RpcClient, RpcError, RpcServer, get_field,
)
from sut.store.message_store import MessageStore

RC = ResponseCode


@dataclass
class LinkTiming:
    """Seconds and sizes of the data link (RocketMQ names in brackets)."""

    heartbeat_s: float = 5.0          # [haSendHeartbeatInterval]: empty transfers, slave acks
    housekeeping_s: float = 20.0      # [haHousekeepingInterval]: silence that drops a link
    batch_bytes: int = 32 * 1024      # [haTransferBatchSize]
    reconnect_s: float = 1.0          # slave's pause before reconnecting


class HAError(Exception):
    """The link cannot continue (no consistent point, offsets out of line): reconnect."""


# --------------------------------------------------------------------------- master side

def caught_up_time(link: "SlaveLink", master_end: int) -> float:
    """The latest monotonic time at which the slave's ack shows it had all the master had."""
    if link.ack >= master_end:
        return time.monotonic()
    best = 0.0
    while link.marks and link.marks[0][0] <= link.ack:
        best = max(best, link.marks.popleft()[1])
    return best


@dataclass
class SlaveLink:
    """The master's view of one connected slave."""

    conn: Connection
    broker_id: int
    learner: bool
    ack: int = -1                     # -1 until the slave reported where its log ends
    caught_up_at: float = 0.0         # monotonic time at which the slave had all we had
    # (master log end, monotonic time) at each transfer: an ack reaching `end` means the
    # slave had, at that time, everything the master had (busy or idle pusher alike)
    marks: deque = field(default_factory=lambda: deque(maxlen=256))
    last_seen: float = field(default_factory=time.monotonic)
    pusher: asyncio.Task | None = None

    @property
    def reported(self) -> bool:
        return self.ack >= 0


class MasterHooks(Protocol):
    """What the master side needs from the broker's role manager."""

    broker_id: int

    def serving_as_master(self) -> bool: ...
    def current_master_epoch(self) -> int: ...
    def confirm_offset(self) -> int: ...
    def on_ack(self, link: SlaveLink) -> None: ...
    def on_link_closed(self, link: SlaveLink) -> None: ...


class MasterSide:
    """The HA server: handshakes, acks and one pusher task per slave."""

    def __init__(self, host: str, port: int, store: MessageStore, epochs: EpochFile,
                 timing: LinkTiming, hooks: MasterHooks, log: logging.Logger) -> None:
        self.store, self.epochs, self.timing, self.hooks, self.log = store, epochs, timing, hooks, log
        self.links: dict[int, SlaveLink] = {}          # by slave broker id
        self._by_conn: dict[int, SlaveLink] = {}
        self.server = RpcServer(host, port, self._on_request, log, on_close=self._on_closed)
        self._housekeeper: asyncio.Task | None = None

    async def start(self) -> None:
        await self.server.start()
        self._housekeeper = asyncio.create_task(self._housekeeping(), name="ha-housekeeping")

    async def stop(self) -> None:
        if self._housekeeper is not None:
            self._housekeeper.cancel()
        self.drop_all("shutting down")
        await self.server.close()

    def drop_all(self, why: str) -> None:
        for link in list(self.links.values()):
            self.drop(link, why)

    def drop(self, link: SlaveLink, why: str) -> None:
        if self._by_conn.pop(link.conn.id, None) is None:
            return
        if self.links.get(link.broker_id) is link:
            del self.links[link.broker_id]
        self.log.info("HA link to slave %d (%s) closed: %s (acked %d)", link.broker_id,
                      link.conn.peer, why, link.ack)
        if link.pusher is not None:
            link.pusher.cancel()
        link.conn.close()
        self.hooks.on_link_closed(link)

    def _on_closed(self, conn: Connection) -> None:
        link = self._by_conn.get(conn.id)
        if link is not None:
            self.drop(link, "connection closed")

    async def _on_request(self, cmd: Command, conn: Connection) -> Command | None:
        try:
            if cmd.code == RequestCode.HA_HANDSHAKE:
                return self._on_handshake(cmd, conn)
            if cmd.code == RequestCode.HA_ACK:
                self._on_ack(cmd, conn)
                return None
        except BadRequest as exc:
            self.log.error("bad HA request from %s: %s; closing", conn.peer, exc)
            conn.close()
            return None
        return cmd.reply(RC.REQUEST_CODE_NOT_SUPPORTED,
                         {"error": f"HA port expects HA_HANDSHAKE or HA_ACK, got {cmd.code}"})

    def _on_handshake(self, cmd: Command, conn: Connection) -> Command:
        broker_id = get_field(cmd, "broker_id", int)
        learner = get_field(cmd, "learner", bool, False)
        expected_epoch = get_field(cmd, "master_epoch", int, 0)
        epoch = self.hooks.current_master_epoch()
        if not self.hooks.serving_as_master() or expected_epoch > epoch:
            return cmd.reply(RC.NOT_MASTER, {"error": f"broker {self.hooks.broker_id} is not the "
                                                      f"master of epoch {expected_epoch}"})
        old = self.links.get(broker_id)
        if old is not None:
            self.drop(old, "the slave connected again")
        link = SlaveLink(conn, broker_id, learner)
        self.links[broker_id] = link
        self._by_conn[conn.id] = link
        body = json.dumps([e.to_json() for e in self.epochs.entries]).encode()
        return cmd.reply(RC.SUCCESS, {"max_offset": self.store.max_offset, "master_epoch": epoch,
                                      "confirm_offset": self.hooks.confirm_offset(),
                                      "broker_id": self.hooks.broker_id}, body)

    def _on_ack(self, cmd: Command, conn: Connection) -> None:
        link = self._by_conn.get(conn.id)
        if link is None:
            raise BadRequest("HA_ACK before a handshake")
        offset = get_field(cmd, "offset", int)
        if not 0 <= offset <= self.store.max_offset:
            raise BadRequest(f"slave {link.broker_id} acks offset {offset} outside our log "
                             f"0..{self.store.max_offset}")
        link.last_seen = time.monotonic()
        if not link.reported:
            link.ack = offset
            self.log.info("slave %d%s streams from offset %d", link.broker_id,
                          " (learner)" if link.learner else "", offset)
            link.pusher = asyncio.create_task(self._push(link, offset),
                                              name=f"ha-push-{link.broker_id}")
        else:
            link.ack = max(link.ack, offset)
        link.caught_up_at = max(link.caught_up_at, caught_up_time(link, self.store.max_offset))
        self.hooks.on_ack(link)

    async def _push(self, link: SlaveLink, offset: int) -> None:
        """Stream the log to one slave, one epoch at a time, heartbeats when idle."""
        last_send, last_confirm = 0.0, -1
        try:
            while link.conn.id in self._by_conn:
                end = self.store.max_offset
                data, epoch, epoch_start = b"", self.hooks.current_master_epoch(), 0
                if offset < end:
                    located = self.epochs.entry_for_offset(offset)
                    if located is None:
                        raise HAError(f"offset {offset} is not in any epoch of {self.epochs.entries}")
                    entry, epoch_end = located
                    limit = self.timing.batch_bytes
                    if epoch_end is not None:
                        limit = min(limit, epoch_end - offset)
                    data = self.store.read_raw(offset, limit)
                    epoch, epoch_start = entry.epoch, entry.start_offset
                else:
                    last = self.epochs.last()
                    epoch_start = last.start_offset if last else 0
                link.marks.append((end, time.monotonic()))
                confirm = self.hooks.confirm_offset()
                now = time.monotonic()
                if data or confirm != last_confirm or now - last_send >= self.timing.heartbeat_s:
                    await link.conn.send(Command(
                        RequestCode.HA_TRANSFER,
                        {"offset": offset, "epoch": epoch, "epoch_start": epoch_start,
                         "confirm_offset": confirm}, data, flags=FLAG_ONEWAY))
                    offset += len(data)
                    last_send, last_confirm = now, confirm
                if not data:
                    await self.store.wait_new_data(self.timing.heartbeat_s)
        except (ConnectionError, OSError, HAError) as exc:
            self.log.warning("HA transfer to slave %d failed: %s", link.broker_id, exc)
            self.drop(link, str(exc))

    async def _housekeeping(self) -> None:
        while True:
            await asyncio.sleep(min(self.timing.housekeeping_s, self.timing.heartbeat_s))
            now = time.monotonic()
            for link in list(self.links.values()):
                if now - link.last_seen > self.timing.housekeeping_s:
                    self.drop(link, f"silent for {now - link.last_seen:.1f}s")


# --------------------------------------------------------------------------- slave side

class SlaveHooks(Protocol):
    broker_id: int
    learner: bool

    invariants: InvariantLog

    def expected_master_epoch(self) -> int: ...
    def confirm_offset(self) -> int: ...
    def on_confirm(self, confirm_offset: int) -> None: ...


class SlaveSide:
    """Follows one master: handshake, truncate to the consistent point, append, ack."""

    def __init__(self, master_addr: str, store: MessageStore, epochs: EpochFile,
                 timing: LinkTiming, hooks: SlaveHooks, log: logging.Logger) -> None:
        self.master_addr = master_addr
        self.store, self.epochs, self.timing, self.hooks, self.log = store, epochs, timing, hooks, log
        self.connected = False
        self.truncations: list[tuple[int, int]] = []   # (from, to) for status/tests
        self._task: asyncio.Task | None = None
        self._stopped = False

    def start(self) -> None:
        self._stopped = False
        self._task = asyncio.create_task(self._run(), name=f"ha-follow-{self.master_addr}")

    async def stop(self) -> None:
        """Stop following. Cancels until the task is gone: a cancel that lands just as a
        connect attempt fails can be swallowed by asyncio.wait_for (Python 3.11)."""
        self._stopped = True
        task, self._task = self._task, None
        while task is not None and not task.done():
            task.cancel()
            await asyncio.wait([task], timeout=0.5)

    async def _run(self) -> None:
        while not self._stopped:
            try:
                await self._follow()
            except (RpcError, OSError, asyncio.TimeoutError, ProtocolError, CorruptRecord,
                    HAError, ValueError) as exc:
                self.log.warning("HA link to master %s: %s; reconnecting in %.1fs",
                                 self.master_addr, str(exc) or type(exc).__name__,
                                 self.timing.reconnect_s)
            finally:
                self.connected = False
            await asyncio.sleep(self.timing.reconnect_s)

    async def _follow(self) -> None:
        host, port = split_address(self.master_addr, "master HA address")
        # A lost connection goes into the inbox too: the master (or its machine) is gone,
        # and waiting for the housekeeping timeout would keep the SSS waiting on us.
        inbox: asyncio.Queue[Command | str] = asyncio.Queue()
        client = RpcClient(host, port, connect_timeout=self.timing.heartbeat_s,
                           on_push=inbox.put_nowait, on_lost=inbox.put_nowait)
        try:
            reply = await client.call(RequestCode.HA_HANDSHAKE, {
                "broker_id": self.hooks.broker_id, "learner": self.hooks.learner,
                "master_epoch": self.hooks.expected_master_epoch()},
                timeout=self.timing.heartbeat_s)
            if reply.code != RC.SUCCESS:
                raise HAError(f"handshake refused: {reply.fields.get('error', reply.code)}")
            await self._truncate_to_master(reply)
            self.connected = True
            await client.oneway(RequestCode.HA_ACK, {"offset": self.store.max_offset})
            last_ack = time.monotonic()
            while True:
                try:
                    cmd = await asyncio.wait_for(inbox.get(), self.timing.housekeeping_s)
                except asyncio.TimeoutError:
                    raise HAError(f"nothing from the master for {self.timing.housekeeping_s:.0f}s")
                if isinstance(cmd, str):
                    raise HAError(cmd)
                appended = self._on_transfer(cmd)
                if appended or time.monotonic() - last_ack >= self.timing.heartbeat_s / 2:
                    await client.oneway(RequestCode.HA_ACK, {"offset": self.store.max_offset})
                    last_ack = time.monotonic()
        finally:
            await client.close()

    async def _truncate_to_master(self, reply: Command) -> None:
        """Cut our log where it stops agreeing with the master's (the consistent point)."""
        try:
            master_epochs = [EpochEntry.from_json(e) for e in json.loads(reply.body or b"[]")]
        except (ValueError, TypeError) as exc:
            raise HAError(f"malformed epoch list in the handshake: {exc}") from None
        master_end = get_field(reply, "max_offset", int)
        local_end = self.store.max_offset
        if not self.epochs.entries:
            point = 0  # a new replica (or one whose epochs were lost): take everything
        else:
            point = find_consistent_point(self.epochs.entries, local_end, master_epochs, master_end)
            if point < 0:
                # No epoch in common (RocketMQ gives up and retries forever). Our masters
                # replace an epoch that wrote nothing, so a replica that did write in it
                # can end up here; nothing after the first epoch start is shared, and the
                # master holds every committed message, so resynchronising from there is safe.
                point = min(self.epochs.entries[0].start_offset,
                            master_epochs[0].start_offset if master_epochs else 0)
                self.log.warning("no common epoch: ours %s, the master's %s; resynchronising "
                                 "from offset %d", self.epochs.entries, master_epochs, point)
            confirmed = self.hooks.confirm_offset()
            if point < confirmed:
                # The logs disagree below what this broker knew as confirmed (acknowledged
                # to clients, or shown to consumers): RocketMQ truncates all the same.
                self.hooks.invariants.breach("ha-truncated-below-confirm", consistent_point=point,
                                             confirm_offset=confirmed, local_end=local_end,
                                             master_end=master_end, master=self.master_addr,
                                             master_epoch=get_field(reply, "master_epoch", int, 0))
        point = min(point, local_end)
        if point < local_end:
            self.log.warning("truncating our log from %d to the consistent point %d", local_end,
                             point)
            await self.store.truncate(point)   # log first: a crash leaves only stale epochs
            self.truncations.append((local_end, point))
        # Epochs starting at the point hold nothing we keep; the transfers add them back.
        self.epochs.truncate_from_offset(point)
        self.hooks.on_confirm(min(get_field(reply, "confirm_offset", int, 0), point))
        self.log.info("following master %s from offset %d (master end %d, epoch %d)",
                      self.master_addr, point, master_end, get_field(reply, "master_epoch", int, 0))

    def _on_transfer(self, cmd: Command) -> bool:
        """Apply one transfer; True if data was appended."""
        if cmd.code != RequestCode.HA_TRANSFER:
            raise HAError(f"unexpected frame code {cmd.code} on the HA link")
        offset = get_field(cmd, "offset", int)
        if offset != self.store.max_offset:
            raise HAError(f"master sent offset {offset} but our log ends at {self.store.max_offset}")
        if cmd.body:
            epoch, start = get_field(cmd, "epoch", int), get_field(cmd, "epoch_start", int)
            last = self.epochs.last()
            if last is None or epoch > last.epoch:
                if start > offset or not self.epochs.append(EpochEntry(epoch, start)):
                    raise HAError(f"cannot start epoch {epoch} at {start} after {last}")
            elif epoch < last.epoch:
                raise HAError(f"master sent epoch {epoch} data after our epoch {last.epoch}")
            self.store.append_replicated(offset, cmd.body)
        self.hooks.on_confirm(min(get_field(cmd, "confirm_offset", int, 0), self.store.max_offset))
        return bool(cmd.body)

    def status(self) -> dict[str, Any]:
        return {"master_ha_addr": self.master_addr, "connected": self.connected,
                "truncations": self.truncations[-5:]}

