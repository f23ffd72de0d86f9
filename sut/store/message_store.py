"""The message store: commitlog + consume queues + flushing + crash recovery.

Layout under the broker's data directory:

    commitlog/<20-digit base offset>   fixed-size segments (commitlog.py)
    consumequeue/<topic>/<queue id>    12-byte index entries (consumequeue.py)
    checkpoint                         offset u64 + CRC-32, replaced atomically

The checkpoint is an offset C such that the commitlog and every consume
queue entry below C are on disk (fsynced). Recovery scans the commitlog from
the start of C's segment, checking every CRC, truncates at the first invalid
record (a torn tail), drops consume-queue entries from the scan start on and
re-dispatches the scanned messages. So recovery costs at most one segment plus
what was written since the last checkpoint, and kill -9 at any moment leaves a
consistent store.

Flushing: with SYNC_FLUSH an append waits (wait_flushed) for an fdatasync
that covers it; appends that arrive while one fdatasync runs share the next
one (group commit). With ASYNC_FLUSH a timer flushes every flush_interval_ms
and appends are acknowledged from the page cache.
"""
from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import struct
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Coroutine, Literal

from sut import bugs
from sut.message import HEADER, CorruptRecord, Message, decode_route, encode_payload, payload_size
from sut.store.commitlog import CommitLog, Recovery, StoreError
from sut.store.consumequeue import ConsumeQueues, write_entries
from sut.store.metadata import write_atomic
from sut.waiting import wait_result

_CHECKPOINT = struct.Struct(">QI")

__all__ = ["StoreConfig", "MessageStore", "AppendResult", "GetResult", "StoreError"]


@dataclass
class StoreConfig:
    """Storage settings (RocketMQ names in brackets)."""

    segment_bytes: int = 64 * 1024 * 1024       # [mappedFileSizeCommitLog], RocketMQ: 1 GiB
    max_message_bytes: int = 4 * 1024 * 1024    # [maxMessageSize]
    flush_disk_type: Literal["ASYNC_FLUSH", "SYNC_FLUSH"] = "ASYNC_FLUSH"  # [flushDiskType]
    flush_interval_ms: int = 500                # [flushIntervalCommitLog]
    sync_flush_timeout_ms: int = 5000           # [syncFlushTimeout]
    checkpoint_interval_ms: int = 1000          # [flushIntervalConsumeQueue]


@dataclass
class AppendResult:
    entries: list[tuple[int, int, int]]  # (physical offset, size, queue offset) per message
    end: int                             # log end after this append


@dataclass
class GetResult:
    # FOUND, NO_NEW_MESSAGE, NO_MATCHED_QUEUE, OFFSET_TOO_SMALL, OFFSET_OVERFLOW
    status: str
    records: bytes
    count: int
    next_offset: int
    min_offset: int
    max_offset: int


class MessageStore:
    def __init__(self, data_dir: Path, config: StoreConfig, log: logging.Logger) -> None:
        self.dir = data_dir
        self.config = config
        self.log = log
        self.commitlog = CommitLog(data_dir / "commitlog", config.segment_bytes, log)
        self.cqs = ConsumeQueues(data_dir / "consumequeue")
        self._checkpoint_path = data_dir / "checkpoint"
        self.flushed_offset = 0
        self.sync_count = 0  # fdatasync rounds so far (group commit makes this << messages)
        self._checkpointed = 0
        self._io_lock = asyncio.Lock()
        self._flush_waiters: list[tuple[int, int, asyncio.Future]] = []
        self._waiter_seq = itertools.count()
        self._dirty = asyncio.Event()
        self._new_data: asyncio.Future | None = None
        self._tasks: list[asyncio.Task] = []
        self.sync_flush = config.flush_disk_type == "SYNC_FLUSH"

    # -- lifecycle -------------------------------------------------------------
    def recover(self) -> Recovery:
        """Bring the store to a consistent state after any kind of exit (see module doc)."""
        checkpoint = self._read_checkpoint()
        self.cqs.load()
        seg = self.config.segment_bytes
        start = checkpoint - checkpoint % seg
        if start and not self.commitlog.has_segment(start // seg):
            self.log.warning("checkpoint %d points past the commitlog; scanning it all", checkpoint)
            start = 0
        self.cqs.truncate_from_phys(start)
        result = self.commitlog.recover(start, self._dispatch_recovered)
        if result.problem:
            self.log.warning("commitlog recovery: %s; truncated the tail at offset %d",
                             result.problem, result.end)
        self.log.info("commitlog recovered: scanned %d records from offset %d, end %d, "
                      "%d segment(s) removed", result.records, start, result.end,
                      result.removed_segments)
        self.commitlog.sync_all()  # what the crashed process left in the page cache is durable now
        self.flushed_offset = result.end
        self._write_checkpoint(min(checkpoint, result.end))
        return result

    def _dispatch_recovered(self, phys: int, payload: bytes) -> None:
        try:
            topic, queue_id = decode_route(payload)
        except CorruptRecord as exc:  # CRC-valid but not a message: keep the log, skip the index
            self.log.error("record at offset %d is not a message: %s", phys, exc)
            return
        self.cqs.dispatch(topic, queue_id, phys, HEADER.size + len(payload))

    async def start(self, spawn: Callable[[Coroutine[Any, Any, Any], str], asyncio.Task] | None = None) -> None:
        """Start flushing; `spawn` (e.g. Service.spawn) makes a failed flush stop the process."""
        spawn = spawn or (lambda coro, name: asyncio.create_task(coro, name=name))
        self._tasks = [spawn(self._commit_flush_loop(), "commitlog-flush"),
                       spawn(self._checkpoint_loop(), "checkpoint")]

    async def close(self) -> None:
        """Stop background flushing, then flush and checkpoint everything (clean shutdown)."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
        self._tasks = []
        await self.flush(checkpoint=True)
        self._fail_waiters_above(-1)
        self.commitlog.close()

    # -- writes ------------------------------------------------------------------
    @property
    def max_offset(self) -> int:
        return self.commitlog.max_offset

    @property
    def min_offset(self) -> int:
        return self.commitlog.min_offset

    def fits(self, msg: Message) -> bool:
        """Whether a message is small enough to be stored."""
        return (len(msg.body) <= self.config.max_message_bytes
                and self.commitlog.fits(payload_size(msg)))

    def append(self, messages: list[Message]) -> AppendResult:
        """Append messages (stamping store_ts) and index them; durability is wait_flushed's job."""
        now = int(time.time() * 1000)
        for msg in messages:
            msg.store_ts = now
        placed = self.commitlog.append([encode_payload(m) for m in messages])
        entries = [(phys, size, self.cqs.dispatch(m.topic, m.queue_id, phys, size))
                   for m, (phys, size) in zip(messages, placed)]
        self._after_write()
        return AppendResult(entries, self.commitlog.max_offset)

    def append_replicated(self, offset: int, data: bytes) -> int:
        """Append whole records received from a master at the same offset; return the new end."""
        for phys, payload in self.commitlog.append_raw(offset, data):
            self._dispatch_recovered(phys, payload)
        self._after_write()
        return self.commitlog.max_offset

    def read_raw(self, offset: int, max_bytes: int) -> bytes:
        return self.commitlog.read_raw(offset, max_bytes)

    def _after_write(self) -> None:
        self._dirty.set()
        self.notify_new_data()

    @property
    def durable_end(self) -> int:
        """The end of what this store promises to keep through a machine crash.

        With SYNC_FLUSH, what is on disk (replicas confirm no further, so no
        consumer reads a message a crash of this machine can take back); with
        ASYNC_FLUSH, everything written (the page cache is the promise).
        """
        return self.flushed_offset if self.sync_flush else self.max_offset

    async def wait_flushed(self, offset: int) -> bool:
        """True once everything below offset is on disk; False after sync_flush_timeout_ms.

        With ASYNC_FLUSH this returns True at once: the broker acknowledges
        from the page cache.
        """
        if not self.sync_flush or offset <= self.flushed_offset:
            return True
        if bugs.on("sync-flush-without-fsync"):
            return True   # acked from the page cache; the periodic flusher syncs it later
        future = asyncio.get_running_loop().create_future()
        heapq.heappush(self._flush_waiters, (offset, next(self._waiter_seq), future))
        self._dirty.set()
        return await wait_result(future, self.config.sync_flush_timeout_ms / 1000, False)

    async def truncate(self, offset: int) -> None:
        """Cut the log and the consume queues at `offset` (a record boundary), crash-safely."""
        async with self._io_lock:
            if self._checkpointed > offset:
                self._write_checkpoint(offset)
            removed = self.commitlog.truncate(offset)
            # library bug: the consume queues keep entries of the cut tail
            dropped = 0 if bugs.on("truncate-keeps-consume-queue") else self.cqs.truncate_from_phys(offset)
            self.flushed_offset = min(self.flushed_offset, offset)
            self._fail_waiters_above(offset)
            self.log.warning("truncated the commitlog to %d (%d segment(s) removed, "
                             "%d queue entries dropped)", offset, removed, dropped)

    # -- flushing ------------------------------------------------------------------
    async def flush(self, checkpoint: bool = False) -> None:
        """fdatasync what was written so far; with checkpoint, also the consume queues."""
        async with self._io_lock:
            target = self.commitlog.max_offset
            fds = self.commitlog.take_dirty()
            if fds:
                self.sync_count += 1
                await asyncio.to_thread(CommitLog.sync, fds)
            if checkpoint:
                jobs = self.cqs.take_pending()
                if jobs:
                    await asyncio.to_thread(write_entries, jobs)
                if target != self._checkpointed:
                    await asyncio.to_thread(self._write_checkpoint, target)
        if target > self.flushed_offset:
            self.flushed_offset = target
        waiters = self._flush_waiters
        while waiters and waiters[0][0] <= self.flushed_offset:
            future = heapq.heappop(waiters)[2]
            if not future.done():
                future.set_result(True)

    def _fail_waiters_above(self, offset: int) -> None:
        keep = []
        for item in self._flush_waiters:
            if item[0] > offset:
                if not item[2].done():
                    item[2].set_result(False)
            else:
                keep.append(item)
        heapq.heapify(keep)
        self._flush_waiters = keep

    async def _commit_flush_loop(self) -> None:
        interval = self.config.flush_interval_ms / 1000
        group_commit = self.sync_flush and not bugs.on("sync-flush-without-fsync")
        while True:
            if group_commit:
                await self._dirty.wait()  # group commit: one fdatasync for all that piled up
                await asyncio.sleep(0)    # and for requests already read in this loop turn
            else:
                await asyncio.sleep(interval)
            self._dirty.clear()
            await self._flush_logged()

    async def _checkpoint_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.checkpoint_interval_ms / 1000)
            await self._flush_logged(checkpoint=True)

    async def _flush_logged(self, checkpoint: bool = False) -> None:
        """A flush whose disk error is logged and tried again later, as RocketMQ's flush
        services do (a failed disk must not stop the broker); its waiters keep waiting:
        what was not synced is not called flushed."""
        try:
            await self.flush(checkpoint)
        except OSError as exc:
            self.log.error("flush failed (tried again later): %s", exc)
            await asyncio.sleep(self.config.flush_interval_ms / 1000)

    def _read_checkpoint(self) -> int:
        try:
            data = self._checkpoint_path.read_bytes()
            offset, crc = _CHECKPOINT.unpack(data)
        except (FileNotFoundError, struct.error):
            return 0
        if zlib.crc32(data[:8]) != crc:
            self.log.warning("checkpoint file is corrupt; scanning the whole commitlog")
            return 0
        return offset

    def _write_checkpoint(self, offset: int) -> None:
        raw = struct.pack(">Q", offset)
        write_atomic(self._checkpoint_path, raw + struct.pack(">I", zlib.crc32(raw)))
        self._checkpointed = offset

    # -- reads ----------------------------------------------------------------------
    def get_messages(self, topic: str, queue_id: int, offset: int, max_count: int,
                     max_bytes: int, limit: int) -> GetResult:
        """Up to max_count records of a queue from `offset`, never past log position `limit`."""
        cq = self.cqs.get(topic, queue_id)
        if cq is None:
            return GetResult("NO_MATCHED_QUEUE", b"", 0, 0, 0, 0)
        high = cq.count_below(limit)
        if offset < 0:
            return GetResult("OFFSET_TOO_SMALL", b"", 0, 0, 0, high)
        if offset > high:
            return GetResult("OFFSET_OVERFLOW", b"", 0, high, 0, high)
        if offset == high:
            return GetResult("NO_NEW_MESSAGE", b"", 0, offset, 0, high)
        records, total = [], 0
        for i in range(offset, min(high, offset + max_count)):
            size = cq.sizes[i]
            if records and total + size > max_bytes:
                break
            records.append(self.commitlog.read(cq.phys[i], size))
            total += size
        return GetResult("FOUND", b"".join(records), len(records), offset + len(records), 0, high)

    def queue_max_offset(self, topic: str, queue_id: int, limit: int) -> int:
        cq = self.cqs.get(topic, queue_id)
        return cq.count_below(limit) if cq is not None else 0

    # -- long polling -----------------------------------------------------------------
    def notify_new_data(self) -> None:
        """Wake pulls waiting for data (HA strategies call this when the confirm offset moves)."""
        future, self._new_data = self._new_data, None
        if future is not None and not future.done():
            future.set_result(None)

    async def wait_new_data(self, timeout: float) -> None:
        if self._new_data is None:
            self._new_data = asyncio.get_running_loop().create_future()
        await asyncio.wait([self._new_data], timeout=timeout)
