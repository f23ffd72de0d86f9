"""One Raft member: roles, elections, heartbeats, commit and apply.

The protocol follows DLedger where DLedger and textbook Raft differ:
- A node starts as CANDIDATE. A candidate first asks for votes in its current
  term when it has not voted for anyone else in it (so a restarted single node,
  or a restarted follower that hears its leader, keeps its term); only after a
  failed round does it move to the next term. A voter that already follows a
  live leader answers "already has leader" and the candidate backs off for an
  election timeout, giving the leader's heartbeat time to arrive.
- Seeing a higher term makes a node a candidate in that term (not a follower).
- A leader that has not heard from a quorum for maxHeartBeatLeak heartbeats
  steps down to candidate, keeping its term.
- Commit is the quorum-th highest match index; by default only entries of the
  current term are committed by counting (Raft 5.4.2), which DLedger 0.3.1.2
  lacked: `commit_current_term_only=False` reproduces that.
A new leader appends an empty entry of its term (not with the library bug
`raft-commit-prior-term`, see sut/bugs.py); once that is applied the
leader is "ready": everything committed before it has been applied.
"""
from __future__ import annotations

import asyncio
import enum
import logging
import os
import random
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from sut import bugs
from sut.invariants import InvariantLog
from sut.protocol import Command, Connection, RequestCode, ResponseCode, RpcClient, RpcError, RpcServer
from sut.raft.config import RaftConfig, parse_address
from sut.raft.errors import (AppendTimeout, NotLeader, PendingFull, ProposalDropped, RaftError,
                             error_reply)
from sut.raft.log import Entry, RaftLog
from sut.raft.meta import TermVote
from sut.raft.replicator import Replicator
from sut.raft.wire import pack_entries, unpack_entries
from sut.waiting import cancel_and_wait

Handler = Callable[[Command, Connection], Awaitable[Command | None]]
ApplyFn = Callable[[Entry], Any]
RewindFn = Callable[[], Awaitable[None]]


class Role(str, enum.Enum):
    CANDIDATE = "candidate"
    FOLLOWER = "follower"
    LEADER = "leader"


class Vote(str, enum.Enum):
    """A voter's answer, as DLedger's vote parse results."""

    GRANTED = "granted"
    ALREADY_VOTED = "already-voted"
    HAS_LEADER = "has-leader"
    LOG_BEHIND = "log-behind"


@dataclass(frozen=True)
class AppliedProposal:
    """A committed and applied proposal: where it went and what the state machine returned."""

    index: int
    term: int
    result: Any = None


def quorum_commit_index(matches: list[int], quorum: int, commit_index: int, current_term: int,
                        term_at: Callable[[int], int | None], current_term_only: bool) -> int:
    """The new commit index for a leader whose members have these match indices.

    The quorum-th highest match is replicated on a majority. Raft 5.4.2 commits it
    by counting only if it is from the current term (older entries then commit
    implicitly); without that check (DLedger 0.3.1.2) an older-term entry counted
    as committed can still be overwritten by a later leader (Raft paper, fig. 8).
    """
    candidate = sorted(matches, reverse=True)[quorum - 1]
    if candidate <= commit_index:
        return commit_index
    if current_term_only and term_at(candidate) != current_term:
        return commit_index
    return candidate


class RaftNode:
    """A Raft member listening on its peer address; `propose` on the leader, `apply` everywhere."""

    def __init__(self, config: RaftConfig, apply: ApplyFn | None = None,
                 log: logging.Logger | None = None,
                 extra_handlers: dict[int, Handler] | None = None,
                 rewind: RewindFn | None = None) -> None:
        self.config = config
        self.node_id = config.node_id
        self.log = log or logging.getLogger(f"raft.{config.node_id}")
        store = os.path.join(config.data_dir, "raftstore")
        self.raft_log = RaftLog(os.path.join(store, "entries.log"), config.sync_flush, self.log)
        self.meta = TermVote(os.path.join(store, "meta.json"))
        self.invariants = InvariantLog(config.data_dir, config.node_id, self.log)
        self._apply_fn = apply
        self._rewind_fn = rewind     # drops everything applied, to apply the log again from 1
        self._rewinding = False
        self._handlers: dict[int, Handler] = {
            RequestCode.RAFT_VOTE: self._on_vote,
            RequestCode.RAFT_HEARTBEAT: self._on_heartbeat,
            RequestCode.RAFT_APPEND: self._on_append,
            RequestCode.RAFT_STATUS: self._on_status,
            RequestCode.RAFT_PROPOSE: self._on_propose,
            RequestCode.RAFT_READ_LOG: self._on_read_log,
            **(extra_handlers or {}),
        }
        host, port = config.address
        self._server = RpcServer(host, port, self._dispatch, self.log)
        self.role = Role.CANDIDATE
        self.role_since = time.time()  # wall clock, so an observer can time a failover
        self.leader_id: str | None = None
        self.commit_index = 0
        self.applied_index = 0
        self._matched = 0            # follower: highest index known to equal the leader's log
        self._ready_index: int | None = None  # leader: index of its own no-op entry
        # A torn tail may have removed entries we sent as leader of our last term.
        self._must_increment = self.raft_log.torn_bytes > 0
        now = time.monotonic()
        self._last_leader_contact = now
        self._next_vote_time = now + self._random_vote_delay(first=True)
        self._last_heartbeat_sent = 0.0
        self._peer_ack: dict[str, float] = {}
        self._replicators: dict[str, Replicator] = {}
        self._control: dict[str, RpcClient] = {}
        self._proposals: dict[int, tuple[int, asyncio.Future]] = {}
        self._commit_event = asyncio.Event()
        self._state_event = asyncio.Event()
        self._confirm_waiters: list[asyncio.Future] = []
        self._confirm_event = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._election: asyncio.Task | None = None
        self._listeners: list[Callable[[], None]] = []
        self._stopped = False

    # ---- public API ------------------------------------------------------------------
    @property
    def term(self) -> int:
        return self.meta.term

    @property
    def voted_for(self) -> str | None:
        return self.meta.voted_for

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    @property
    def is_ready(self) -> bool:
        """Leader whose no-op is applied: all entries committed before its term are applied."""
        return (self.is_leader and self._ready_index is not None
                and self.applied_index >= self._ready_index)

    @property
    def leader_address(self) -> str | None:
        return self.config.peers.get(self.leader_id) if self.leader_id else None

    def add_handlers(self, handlers: dict[int, Handler]) -> None:
        """Serve more request codes on this node's port (e.g. the KV store's)."""
        self._handlers.update(handlers)

    def add_listener(self, callback: Callable[[], None]) -> None:
        """Call `callback()` after every role, term, leader or readiness change."""
        self._listeners.append(callback)

    async def start(self) -> None:
        for peer in self.config.others:
            host, port = parse_address(self.config.peers[peer], f"raft.peers.{peer}")
            self._control[peer] = RpcClient(host, port,
                                            connect_timeout=self.config.timing.rpc_timeout_ms / 1000)
        await self._server.start()
        self.log.info("raft node %s listening on %s; term %d, voted for %s, log ends at %d/%d",
                      self.node_id, self.config.peers[self.node_id], self.term, self.voted_for,
                      self.raft_log.last_index, self.raft_log.last_term)
        for coro in (self._ticker(), self._applier(), self._confirmer()):
            self._tasks.append(asyncio.create_task(coro))

    async def stop(self) -> None:
        self._stopped = True
        replicators, self._replicators = self._replicators, {}
        for replicator in replicators.values():
            await replicator.stop()
        await cancel_and_wait([*self._tasks, self._election])
        await self._server.close()
        for client in self._control.values():
            await client.close()
        self.raft_log.close()

    async def propose(self, data: bytes, timeout: float | None = None) -> AppliedProposal:
        """Append `data` as leader and wait until it is applied.

        Raises NotLeader / PendingFull (definite: nothing was appended) or
        AppendTimeout after maxWaitAckTimeMs (indeterminate: it may still commit).
        """
        if not data:
            raise ValueError("a proposal needs data (the empty entry is the leader's no-op)")
        if not self.is_leader:
            raise NotLeader(f"{self.node_id} is {self.role.value}", self.leader_id, self.leader_address)
        if len(self._proposals) >= self.config.timing.max_pending_requests:
            raise PendingFull(f"{len(self._proposals)} appends already wait for commit")
        index = self._append_local(data)
        future = asyncio.get_running_loop().create_future()
        self._proposals[index] = (self.term, future)
        wait = self.config.timing.max_wait_ack_ms / 1000 if timeout is None else timeout
        try:
            return await asyncio.wait_for(asyncio.shield(future), wait)
        except asyncio.TimeoutError:
            raise AppendTimeout(f"entry {index} not committed within {wait * 1000:.0f} ms",
                                self.leader_id, self.leader_address) from None
        finally:
            if self._proposals.get(index, (None, None))[1] is future:
                del self._proposals[index]

    async def read_barrier(self, timeout: float | None = None) -> int:
        """ReadIndex: return an index such that applying up to it reflects every write
        acknowledged before this call. Confirms leadership with a quorum round made
        after the call, so a deposed leader behind a partition cannot serve stale reads."""
        wait = self.config.timing.max_wait_ack_ms / 1000 if timeout is None else timeout
        try:
            return await asyncio.wait_for(self._read_barrier(), wait)
        except asyncio.TimeoutError:
            raise AppendTimeout(f"leadership not confirmed within {wait * 1000:.0f} ms",
                                self.leader_id, self.leader_address) from None

    def committed_entries(self, start: int, max_count: int = 1000) -> list[Entry]:
        """Committed entries from `start` on, in order (at most max_count)."""
        return self.raft_log.entries(start, min(self.commit_index, start + max_count - 1))

    def status(self) -> dict[str, Any]:
        return {"node_id": self.node_id, "role": self.role.value, "term": self.term,
                "voted_for": self.voted_for, "leader": self.leader_id,
                "leader_address": self.leader_address, "commit_index": self.commit_index,
                "applied_index": self.applied_index, "last_index": self.raft_log.last_index,
                "last_term": self.raft_log.last_term, "ready": self.is_ready,
                "pending": len(self._proposals), "role_since": self.role_since}

    # ---- role changes ----------------------------------------------------------------
    def _notify(self) -> None:
        self._state_event.set()
        self._state_event = asyncio.Event()
        for callback in self._listeners:
            try:
                callback()
            except Exception:
                self.log.exception("raft state listener failed")

    def _random_vote_delay(self, first: bool = False) -> float:
        t = self.config.timing
        low = 0 if first else t.min_vote_interval_ms
        return random.uniform(low, t.max_vote_interval_ms) / 1000

    def observe_term(self, term: int, why: str) -> bool:
        """Adopt a higher term seen anywhere: become a candidate in it. True if adopted."""
        if term <= self.term:
            return False
        self.log.info("term %d -> %d (%s); %s becomes candidate", self.term, term, why, self.node_id)
        self.meta.save(term, None)
        self._must_increment = False
        self._become_candidate(self._random_vote_delay())
        return True

    def _enter(self, role: Role, leader: str | None) -> None:
        if role is not self.role:
            self.role_since = time.time()
        self.role, self.leader_id = role, leader

    def _become_candidate(self, delay: float) -> None:
        if self.is_leader:
            self._drop_replicators()
        self._enter(Role.CANDIDATE, None)
        self._matched = 0
        self._next_vote_time = time.monotonic() + delay
        self._notify()

    def _become_follower(self, leader: str) -> None:
        if self.role is Role.FOLLOWER and self.leader_id == leader:
            return
        if self.is_leader:
            self.invariants.breach("raft-two-leaders-one-term", term=self.term, leader=self.node_id,
                                   other=leader)
            self._drop_replicators()
        self.log.info("%s follows %s in term %d", self.node_id, leader, self.term)
        self._enter(Role.FOLLOWER, leader)
        self._matched = 0
        self._notify()

    def _become_leader(self) -> None:
        self.log.info("%s becomes leader of term %d (log ends at %d)", self.node_id, self.term,
                      self.raft_log.last_index)
        self._enter(Role.LEADER, self.node_id)
        now = time.monotonic()
        self._peer_ack = {peer: now for peer in self.config.others}
        self._last_heartbeat_sent = 0.0
        self._replicators = {peer: Replicator(self, peer, self.term, self.log) for peer in self.config.others}
        for replicator in self._replicators.values():
            replicator.start()
        if bugs.on("raft-commit-prior-term"):
            # DLedger before its no-op (openmessaging/dledger issue 305) started a term with
            # no entry of its own: the older tail commits by counting replicas alone.
            self._ready_index = self.raft_log.last_index
            self._advance_commit()
        else:
            self._ready_index = self._append_local(b"")
        self._notify()

    def _drop_replicators(self) -> None:
        """Stop replicating (synchronously detached, so a next term starts clean)."""
        replicators, self._replicators = self._replicators, {}
        self._ready_index = None
        for replicator in replicators.values():
            task = asyncio.create_task(replicator.stop())
            self._tasks.append(task)
            task.add_done_callback(self._tasks.remove)

    # ---- the ticker: timeouts, elections, heartbeats -------------------------------
    async def _ticker(self) -> None:
        t = self.config.timing
        tick = max(0.005, min(t.heartbeat_interval_ms / 10, t.min_vote_interval_ms / 3, 100) / 1000)
        while not self._stopped:
            try:
                self._tick(time.monotonic())
            except Exception:
                self.log.exception("raft tick failed")
            await asyncio.sleep(tick)

    def _tick(self, now: float) -> None:
        t = self.config.timing
        timeout = t.election_timeout_s
        if self.role is Role.FOLLOWER and now - self._last_leader_contact > timeout:
            self.log.info("%s: no heartbeat from %s for %.0f ms; becoming candidate", self.node_id,
                          self.leader_id, (now - self._last_leader_contact) * 1000)
            self._become_candidate(self._random_vote_delay(first=True))
        elif self.role is Role.CANDIDATE:
            if now >= self._next_vote_time and (self._election is None or self._election.done()):
                self._election = asyncio.create_task(self._run_election())
        elif self.role is Role.LEADER:
            if now - self._last_heartbeat_sent >= t.heartbeat_interval_ms / 1000:
                self._last_heartbeat_sent = now
                asyncio.create_task(self._heartbeat_round())
            if now - self._quorum_contact(now) > timeout:
                self.log.warning("%s: no quorum for %.0f ms; stepping down in term %d", self.node_id,
                                 (now - self._quorum_contact(now)) * 1000, self.term)
                self._become_candidate(self._random_vote_delay())

    def _quorum_contact(self, now: float) -> float:
        """The latest time at which a quorum (counting this node) had answered."""
        acks = [now] + [max(self._peer_ack.get(p, 0.0),
                            r.last_ack if (r := self._replicators.get(p)) else 0.0)
                        for p in self.config.others]
        return sorted(acks, reverse=True)[self.config.quorum - 1]

    async def _run_election(self) -> None:
        # As DLedger: first ask in the current term (voting for ourselves if we have
        # not voted for another); move to the next term only after a failed round.
        if self._must_increment or self.term == 0:
            self.meta.save(self.term + 1, self.node_id)
            self._must_increment = False
        elif self.meta.voted_for is None:
            self.meta.save(self.term, self.node_id)
        term = self.term
        granted = 1 if self.voted_for == self.node_id else 0
        self.log.info("%s asks for votes in term %d (log %d/%d)", self.node_id, term,
                      self.raft_log.last_index, self.raft_log.last_term)
        request = {"term": term, "candidate": self.node_id, "last_index": self.raft_log.last_index,
                   "last_term": self.raft_log.last_term}
        pending = {asyncio.create_task(self._ask_vote(peer, request)) for peer in self.config.others}
        answers: list[Vote | None] = []
        t = self.config.timing
        deadline = time.monotonic() + (t.vote_wait_ms + random.uniform(0, t.max_vote_interval_ms)) / 1000
        try:
            while pending and granted < self.config.quorum and (left := deadline - time.monotonic()) > 0:
                done, pending = await asyncio.wait(pending, timeout=left, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    answers.append(task.result())
                    granted += answers[-1] == Vote.GRANTED
        finally:
            for task in pending:
                task.cancel()
        if self.role is not Role.CANDIDATE or self.term != term:
            return
        if granted >= self.config.quorum:
            self._become_leader()
            return
        delay = self._random_vote_delay()
        answered = 1 + sum(answer is not None for answer in answers)
        if Vote.HAS_LEADER in answers:
            delay += self.config.timing.election_timeout_s  # let the leader's heartbeat reach us
        elif answered >= self.config.quorum and answered - answers.count(Vote.LOG_BEHIND) < self.config.quorum:
            # As DLedger: voters with longer logs make a quorum impossible; ask again in this
            # term, later, so that one of them wins instead of the terms racing up.
            delay += self.config.timing.max_vote_interval_ms / 1000
        else:
            self._must_increment = True
        self._next_vote_time = time.monotonic() + delay

    async def _ask_vote(self, peer: str, request: dict) -> Vote | None:
        try:
            reply = await self._control[peer].call(RequestCode.RAFT_VOTE, request,
                                                   timeout=self.config.timing.rpc_timeout_ms / 1000)
        except RpcError:
            return None
        if reply.code == ResponseCode.TERM_STALE:
            self.observe_term(int(reply.fields.get("term", 0)), f"vote answer from {peer}")
            return None
        try:
            return Vote(reply.fields.get("vote"))
        except ValueError:
            return None

    async def _heartbeat_round(self) -> int:
        """Heartbeat every peer; return how many members (counting self) answered in this
        term, as soon as a quorum did (the other answers still count when they come)."""
        term = self.term
        fields = {"term": term, "leader": self.node_id, "commit": self.commit_index}
        sent = time.monotonic()

        async def one(peer: str) -> bool:
            try:
                reply = await self._control[peer].call(RequestCode.RAFT_HEARTBEAT, fields,
                                                       timeout=self.config.timing.rpc_timeout_ms / 1000)
            except RpcError:
                return False
            if reply.code == ResponseCode.TERM_STALE:
                self.observe_term(int(reply.fields.get("term", 0)), f"heartbeat answer from {peer}")
                return False
            if reply.code == ResponseCode.SUCCESS and self.term == term and self.is_leader:
                self._peer_ack[peer] = max(self._peer_ack.get(peer, 0.0), sent)
                return True
            return False

        pending = {asyncio.create_task(one(peer)) for peer in self.config.others}
        answered = 1
        while pending and answered < self.config.quorum:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            answered += sum(task.result() for task in done)
        return answered

    # ---- leader: appends, commit, reads ----------------------------------------------
    def _append_local(self, data: bytes) -> int:
        index = self.raft_log.append([(self.term, data)])
        for replicator in self._replicators.values():
            replicator.wake()
        self._advance_commit()
        return index

    def on_follower_match(self) -> None:
        """A replicator learned a higher match index."""
        self._advance_commit()

    def _advance_commit(self) -> None:
        if not self.is_leader:
            return
        matches = [self.raft_log.last_index] + [self._replicators[p].match_index if p in self._replicators
                                                else 0 for p in self.config.others]
        # library bugs (sut/bugs.py): a leader that counts only itself, or counts old terms
        quorum = 1 if bugs.on("raft-commit-without-quorum") else self.config.quorum
        current_term_only = self.config.commit_current_term_only and not bugs.on("raft-commit-prior-term")
        new = quorum_commit_index(matches, quorum, self.commit_index, self.term,
                                  self.raft_log.term_at, current_term_only)
        if new > self.commit_index:
            self._set_commit(new)
            for replicator in self._replicators.values():
                replicator.wake()

    def _set_commit(self, index: int) -> None:
        index = min(index, self.raft_log.last_index)
        if index > self.commit_index:
            self.commit_index = index
            self._commit_event.set()

    async def _read_barrier(self) -> int:
        while not self.is_ready:
            if not self.is_leader:
                raise NotLeader(f"{self.node_id} is {self.role.value}", self.leader_id, self.leader_address)
            await self._state_event.wait()
        term, read_index = self.term, self.commit_index
        future = asyncio.get_running_loop().create_future()
        self._confirm_waiters.append(future)
        self._confirm_event.set()
        if not await future or self.term != term or not self.is_leader:
            raise NotLeader(f"{self.node_id} could not confirm its leadership", self.leader_id,
                            self.leader_address)
        while self.applied_index < read_index:
            await self._state_event.wait()
        return read_index

    async def _confirmer(self) -> None:
        """Batch read confirmations: one heartbeat round, started after the reads arrived."""
        while True:
            await self._confirm_event.wait()
            self._confirm_event.clear()
            waiters, self._confirm_waiters = self._confirm_waiters, []
            ok = self.is_leader and await self._heartbeat_round() >= self.config.quorum
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(ok)

    # ---- applying committed entries --------------------------------------------------
    async def _applier(self) -> None:
        while True:
            await self._commit_event.wait()
            self._commit_event.clear()
            if self._rewinding:
                await self._rewind()
            while not self._rewinding and self.applied_index < self.commit_index:
                batch = self.raft_log.entries(self.applied_index + 1, self.commit_index, 4 << 20)
                for entry in batch:
                    self._apply_one(entry)
                self._notify()
                await asyncio.sleep(0)  # let the network breathe between big batches

    async def _rewind(self) -> None:
        """Forget what was applied (its entries were cut) and apply the log again from 1."""
        self._rewinding = False
        if self._rewind_fn is not None:
            await self._rewind_fn()
        self.applied_index = 0
        self._commit_event.set()

    def _apply_one(self, entry: Entry) -> None:
        result: Any = None
        error: BaseException | None = None
        if entry.data and self._apply_fn is not None:
            try:
                result = self._apply_fn(entry)
            except Exception as exc:  # a state machine bug must not stop the log
                self.log.exception("apply of entry %d failed", entry.index)
                error = exc
        self.applied_index = entry.index
        proposal = self._proposals.pop(entry.index, None)
        if proposal is None:
            return
        term, future = proposal
        if future.done():
            return
        if term != entry.term:
            future.set_exception(ProposalDropped(f"entry {entry.index} of term {term} was replaced by "
                                                 f"term {entry.term}", self.leader_id, self.leader_address))
        elif isinstance(result, RaftError):
            future.set_exception(result)
        elif error is not None:
            future.set_exception(RaftError(f"apply failed: {error}"))
        else:
            future.set_result(AppliedProposal(entry.index, entry.term, result))

    # ---- RPC handlers (peers) --------------------------------------------------------
    async def _dispatch(self, cmd: Command, conn: Connection) -> Command | None:
        handler = self._handlers.get(cmd.code)
        if handler is None:
            return cmd.reply(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                             {"error": f"request code {cmd.code} is not served by a raft node"})
        try:
            return await handler(cmd, conn)
        except (KeyError, TypeError, ValueError) as exc:
            self.log.error("bad raft request code %s from %s: %s", cmd.code, conn.peer, exc)
            return cmd.reply(ResponseCode.BAD_REQUEST, {"error": f"bad request: {exc}"})

    def _accept_term(self, cmd: Command) -> Command | None:
        """Common to leader messages: reject stale terms, adopt newer ones, follow the sender."""
        term = int(cmd.fields["term"])
        if term < self.term:
            return cmd.reply(ResponseCode.TERM_STALE, {"term": self.term})
        self.observe_term(term, f"message from {cmd.fields['leader']}")
        leader = str(cmd.fields["leader"])
        if leader not in self.config.peers or leader == self.node_id:
            raise ValueError(f"unknown leader id {leader!r}")
        self._become_follower(leader)
        self._last_leader_contact = time.monotonic()
        return None

    async def _on_vote(self, cmd: Command, conn: Connection) -> Command:
        f = cmd.fields
        term, candidate = int(f["term"]), str(f["candidate"])
        if candidate not in self.config.peers:
            raise ValueError(f"unknown candidate id {candidate!r}")
        if term < self.term:
            return cmd.reply(ResponseCode.TERM_STALE, {"term": self.term})
        self.observe_term(term, f"vote request from {candidate}")
        vote = self._judge_vote(candidate, int(f["last_index"]), int(f["last_term"]))
        if vote is Vote.GRANTED:
            self.meta.save(self.term, candidate)
            self._last_leader_contact = time.monotonic()
            if self.role is Role.CANDIDATE:  # give the candidate time to win and heartbeat
                self._next_vote_time = time.monotonic() + self.config.timing.election_timeout_s
        return cmd.reply(ResponseCode.SUCCESS, {"term": self.term, "vote": vote.value})

    def _judge_vote(self, candidate: str, last_index: int, last_term: int) -> Vote:
        if self.voted_for not in (None, candidate):
            return Vote.HAS_LEADER if self.leader_id is not None else Vote.ALREADY_VOTED
        behind = (last_term, last_index) < (self.raft_log.last_term, self.raft_log.last_index)
        if behind and not bugs.on("raft-vote-ignores-log"):  # the election restriction (5.4.1)
            return Vote.LOG_BEHIND
        return Vote.GRANTED

    async def _on_heartbeat(self, cmd: Command, conn: Connection) -> Command:
        rejected = self._accept_term(cmd)
        if rejected:
            return rejected
        self._learn_commit(int(cmd.fields.get("commit", 0)))
        return cmd.reply(ResponseCode.SUCCESS, {"term": self.term})

    def _learn_commit(self, leader_commit: int) -> None:
        self._set_commit(min(leader_commit, self._matched))

    async def _on_append(self, cmd: Command, conn: Connection) -> Command:
        # No await before the log is changed: requests on one connection are applied
        # in the order they arrived, which the leader's pipeline relies on.
        rejected = self._accept_term(cmd)
        if rejected:
            return rejected
        kind = cmd.fields["kind"]
        if kind == "compare":
            return self._on_compare(cmd)
        if kind == "truncate":
            return self._on_truncate(cmd)
        if kind == "append":
            return self._on_append_entries(cmd)
        raise ValueError(f"unknown append kind {kind!r}")

    def _reply(self, cmd: Command, **fields: Any) -> Command:
        return cmd.reply(ResponseCode.SUCCESS, {"term": self.term, "last_index": self.raft_log.last_index,
                                                **fields})

    def _inconsistent(self, cmd: Command, why: str) -> Command:
        return cmd.reply(ResponseCode.INCONSISTENT_LOG, {"term": self.term, "error": why,
                                                         "last_index": self.raft_log.last_index})

    def _on_compare(self, cmd: Command) -> Command:
        index, index_term = int(cmd.fields["index"]), int(cmd.fields["index_term"])
        mine = self.raft_log.term_at(index)
        if mine == index_term:
            self._matched = index
            return self._reply(cmd, match=True)
        if mine is None:
            return self._reply(cmd, match=False, hint=self.raft_log.last_index)
        # Our whole run of term `mine` ending here cannot match unless the leader has `mine` too.
        return self._reply(cmd, match=False, hint=self.raft_log.first_index_of_term(index) - 1,
                           conflict_term=mine)

    def _on_truncate(self, cmd: Command) -> Command:
        index, index_term = int(cmd.fields["index"]), int(cmd.fields["index_term"])
        if self.raft_log.term_at(index) != index_term:
            return self._inconsistent(cmd, f"no entry of term {index_term} at {index} to truncate after")
        if index < self.commit_index:
            self._cut_committed(index)
        removed = self.raft_log.truncate_after(index)
        if removed:
            self.log.warning("%s truncated %d divergent entries after index %d", self.node_id,
                             removed, index)
        self._matched = index
        return self._reply(cmd)

    def _cut_committed(self, index: int) -> None:
        """A leader asks to cut committed entries after `index`: obey, as a DLedger follower does.

        With the election restriction and the current-term commit rule a leader
        holds every committed entry (Leader Completeness, Raft 5.4.3), so such a
        request means that invariant is broken, by whatever bug: a DLedger
        follower still truncates what its leader tells it to. So does the model:
        it records the breach, drops its commit index to `index` and rebuilds
        its state machine from the shorter log.
        """
        self.invariants.breach("raft-committed-entries-cut", term=self.term, leader=self.leader_id,
                               after_index=index, commit_index=self.commit_index,
                               applied_index=self.applied_index, last_index=self.raft_log.last_index)
        self.invariants.breach("raft-commit-index-back", term=self.term, leader=self.leader_id,
                               commit_index=self.commit_index, to_index=index)
        self.commit_index = index
        if self.applied_index > index:
            self._rewinding = True
            self._commit_event.set()

    def _on_append_entries(self, cmd: Command) -> Command:
        prev_index, prev_term = int(cmd.fields["prev_index"]), int(cmd.fields["prev_term"])
        if self.raft_log.term_at(prev_index) != prev_term:
            return self._inconsistent(cmd, f"no entry of term {prev_term} at {prev_index}")
        items = unpack_entries(cmd.body)
        for pos, (term, _) in enumerate(items):
            index = prev_index + 1 + pos
            existing = self.raft_log.term_at(index)
            if existing == term:
                continue
            if existing is not None:
                if index <= self.commit_index:
                    self._cut_committed(index - 1)
                self.raft_log.truncate_after(index - 1)
                self._matched = min(self._matched, index - 1)
            self.raft_log.append(items[pos:])
            break
        # log[1..last] now equals the leader's; _matched never points past a divergence
        # (it is reset whenever the leader or term changes).
        self._matched = max(self._matched, prev_index + len(items))
        self._learn_commit(int(cmd.fields.get("commit", 0)))
        return self._reply(cmd)

    # ---- RPC handlers (clients) ------------------------------------------------------
    async def _on_status(self, cmd: Command, conn: Connection) -> Command:
        return cmd.reply(ResponseCode.SUCCESS, self.status())

    async def _on_propose(self, cmd: Command, conn: Connection) -> Command:
        try:
            applied = await self.propose(cmd.body)
        except RaftError as exc:
            return error_reply(cmd, exc)
        return cmd.reply(ResponseCode.SUCCESS, {"index": applied.index, "term": applied.term})

    async def _on_read_log(self, cmd: Command, conn: Connection) -> Command:
        start, count = int(cmd.fields.get("start", 1)), int(cmd.fields.get("max", 1000))
        entries = self.committed_entries(max(1, start), max(1, min(count, 10000)))
        return cmd.reply(ResponseCode.SUCCESS, {"start": start, "commit_index": self.commit_index},
                         pack_entries([(e.term, e.data) for e in entries]))
