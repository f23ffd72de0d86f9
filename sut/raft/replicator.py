"""Leader-side replication to one follower: COMPARE -> TRUNCATE -> pipelined APPEND.

As DLedger's per-peer push: first find the last entry both logs share
(COMPARE, skipping a whole conflicting term per round trip), make the follower
cut everything after it (TRUNCATE, only if it has more), then stream batches
without waiting for each answer, at most `max_inflight_entries` unacknowledged.
An answer that does not come within `resend_ms`, a rejected batch or a broken
connection sends the replicator back to COMPARE, which resends from the
follower's real position. Every request carries the leader's term; a follower
with a newer term makes the leader step down.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import time
from typing import TYPE_CHECKING

from sut.protocol import RequestCode, ResponseCode, RpcClient, RpcError
from sut.raft.config import parse_address
from sut.raft.wire import pack_entries
from sut.waiting import cancel_and_wait

if TYPE_CHECKING:
    from sut.raft.node import RaftNode


class _Restart(Exception):
    """Go back to COMPARE (answer lost, batch rejected, connection broke)."""


class _StaleTerm(Exception):
    def __init__(self, term: int) -> None:
        super().__init__(term)
        self.term = term


class Replicator:
    """Keeps one follower's log equal to the leader's for the duration of one term."""

    def __init__(self, node: "RaftNode", peer: str, term: int, log: logging.Logger) -> None:
        self.node, self.peer, self.term, self.log = node, peer, term, log
        host, port = parse_address(node.config.peers[peer], f"raft.peers.{peer}")
        timing = node.config.timing
        self.client = RpcClient(host, port, connect_timeout=timing.rpc_timeout_ms / 1000)
        self.match_index = 0
        self.last_ack = time.monotonic()
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"replicate-{self.peer}")

    async def stop(self) -> None:
        await cancel_and_wait([self._task])
        await self.client.close()

    def wake(self) -> None:
        """New entries were appended locally."""
        self._wake.set()

    # ------------------------------------------------------------------------------
    def _active(self) -> bool:
        return self.node.is_leader and self.node.term == self.term

    async def _run(self) -> None:
        pause = self.node.config.timing.heartbeat_interval_ms / 1000 / 4
        while self._active():
            try:
                match, follower_last = await self._compare()
                if follower_last > match:
                    await self._truncate(match)
                self._matched(match)
                await self._append_pipeline(match + 1)
            except _StaleTerm as exc:
                self.node.observe_term(exc.term, f"append answer from {self.peer}")
                return
            except (_Restart, RpcError) as exc:
                self.log.debug("replication to %s restarts: %s", self.peer, exc)
                await asyncio.sleep(pause)

    async def _call(self, fields: dict, body: bytes = b"") -> dict:
        timeout = self.node.config.timing.rpc_timeout_ms / 1000
        reply = await self.client.call(RequestCode.RAFT_APPEND, {"term": self.term, "leader": self.node.node_id,
                                                                 **fields}, body, timeout=timeout)
        return self._check(reply)

    def _check(self, reply) -> dict:
        if reply.code == ResponseCode.TERM_STALE:
            raise _StaleTerm(int(reply.fields.get("term", 0)))
        if not self._active():
            raise _Restart("no longer leader of this term")
        if reply.code == ResponseCode.INCONSISTENT_LOG:
            raise _Restart(f"follower rejected: {reply.fields.get('error', 'inconsistent')}")
        if reply.code != ResponseCode.SUCCESS:
            raise _Restart(f"follower answered code {reply.code}")
        self.last_ack = time.monotonic()
        return reply.fields

    async def _compare(self) -> tuple[int, int]:
        """Find the highest index where both logs hold the same term."""
        index = max(self.match_index, self.node.raft_log.last_index)
        while True:
            index = min(index, self.node.raft_log.last_index)
            fields = await self._call({"kind": "compare", "index": index,
                                       "index_term": self.node.raft_log.term_at(index)})
            if fields.get("match"):
                return index, int(fields["last_index"])
            index = self._next_compare(index, int(fields["hint"]), fields.get("conflict_term"))
            if index < 0:
                raise _Restart("compare walked below index 0")

    def _next_compare(self, index: int, hint: int, conflict_term: int | None) -> int:
        """Where to compare next without skipping a possible match.

        The follower's entries from hint+1 up to `index` all have `conflict_term`; one of
        them can only match where our own entry has that term, and our terms never
        decrease, so the last of our entries with a term <= conflict_term bounds it."""
        if conflict_term is None:
            return min(index - 1, hint)
        ours = self.node.raft_log.last_index_with_term_at_most(int(conflict_term), index - 1)
        return max(hint, ours)

    async def _truncate(self, match: int) -> None:
        await self._call({"kind": "truncate", "index": match,
                          "index_term": self.node.raft_log.term_at(match)})

    def _matched(self, index: int) -> None:
        if index != self.match_index:
            self.match_index = index
            self.node.on_follower_match()

    async def _append_pipeline(self, next_index: int) -> None:
        timing = self.node.config.timing
        inflight: collections.deque = collections.deque()  # (last index, sent at, task)
        sent_commit = -1
        try:
            while self._active():
                raft_log = self.node.raft_log
                # Send while there is room; an idle follower also gets an empty batch
                # when the commit index moved, so it applies without waiting for a heartbeat.
                while ((next_index <= raft_log.last_index
                        and next_index - (self.match_index + 1) < timing.max_inflight_entries)
                       or (not inflight and self.node.commit_index > sent_commit)):
                    room = timing.max_inflight_entries - (next_index - self.match_index - 1)
                    batch = raft_log.entries(next_index, next_index + min(room, timing.max_batch_entries) - 1,
                                             timing.max_batch_bytes)
                    sent_commit = self.node.commit_index
                    fields = {"kind": "append", "prev_index": next_index - 1,
                              "prev_term": raft_log.term_at(next_index - 1), "commit": sent_commit}
                    body = pack_entries([(e.term, e.data) for e in batch])
                    task = asyncio.create_task(self._call(fields, body))
                    inflight.append((next_index - 1 + len(batch), time.monotonic(), task))
                    next_index += len(batch)
                if not inflight:
                    self._wake.clear()
                    if next_index <= raft_log.last_index or self.node.commit_index > sent_commit:
                        continue
                    try:
                        await asyncio.wait_for(self._wake.wait(), timing.heartbeat_interval_ms / 1000)
                    except asyncio.TimeoutError:
                        pass
                    continue
                last, sent_at, task = inflight[0]
                wait = max(0.0, sent_at + timing.resend_ms / 1000 - time.monotonic())
                self._wake.clear()
                waker = asyncio.create_task(self._wake.wait())
                done, _ = await asyncio.wait({task, waker}, timeout=wait,
                                             return_when=asyncio.FIRST_COMPLETED)
                waker.cancel()
                if task in done:
                    inflight.popleft()
                    task.result()  # raises _Restart / _StaleTerm / RpcError
                    self._matched(max(self.match_index, last))
                elif not done:
                    raise _Restart(f"no answer for entries up to {last} within {timing.resend_ms} ms")
        finally:
            await cancel_and_wait([task for _, _, task in inflight])
