"""The `group` workload: a consumer group (clustering mode) with rebalancing and
offsets committed to the broker, under the client faults users hit.

Roles: producers send unique messages as in the queue workload; the other
workers are the group's consumers (`--concurrency` minus producers, at least
two). Each consumer is a sut.client.GroupMember: it heartbeats to every broker,
reads the member list and takes its share of the queues (averaging
allocation), pulls its queues from its own positions and commits them to the
broker. A queue it gains starts at the broker's committed offset (0 if none:
CONSUME_FROM_FIRST_OFFSET); a queue it loses is committed first (RocketMQ's
removeUnnecessaryMessageQueue).

Every consumer step is an operation of the history, so the checker sees who
held which queue when: `rebalance` (ok value: members, held queues, the offset
each gained queue starts at, the offsets committed for lost ones), `poll`
(key = queue; ok value: the messages), `commit` (value: queue -> offset) and
the client faults, planned from the run's seed: `kill` (the client's
connections close, nothing committed; the broker drops it at once), `pause`
(the consumer stops for PAUSE_S, no heartbeats: it keeps its queues), `leave`
(commit, unregister, close) and `join` (a new client id after a kill or a
leave). The final phase brings every consumer back and drains the topic.
"""
from __future__ import annotations

import asyncio
import random
import string
import time
from dataclasses import dataclass, field
from typing import Any

from sut import systems
from sut.client import GroupMember
from sut.outcome import Outcome
from workloads.base import Completion, OpRunner, Workload, WorkloadOptions, run_together
from workloads.clients import OnTopic, broker_client, node_of
from workloads.queue import PULL_BATCH, decode_message, encode_message
from workloads.registry import Route, register

CONSUMER_FAULTS = {"kill": 0.02, "pause": 0.02, "leave": 0.02}   # per consumer step
PAUSE_S = 2.0
REBALANCE_S = 1.0        # RocketMQ: rebalanceInterval 20 s, and at once when the member list changes
DRAIN_QUIET_ROUNDS = 2
DRAIN_PAUSE_S = 0.3


@dataclass
class ConsumerState:
    """What one consumer holds in memory (RocketMQ's RemoteBrokerOffsetStore and ProcessQueues)."""

    member: GroupMember | None = None
    positions: dict[int, int] = field(default_factory=dict)   # held queue -> next offset
    turn: int = 0
    rebalanced_at: float = float("-inf")

    @property
    def up(self) -> bool:
        return self.member is not None


class GroupClient:
    """A worker's client: a producer/puller on the topic, plus the group member when it is a consumer."""

    def __init__(self, endpoints: Any, options: WorkloadOptions, node_names: dict[str, str] | None) -> None:
        self.endpoints, self.options = endpoints, options
        self.queue = broker_client(endpoints, options.topic, options.group, options.op_timeout, node_names,
                                   options.route_refresh_s)
        self.node_names = node_names or {}

    def new_member(self) -> GroupMember:
        """A new consumer of the group: the system's own (sut/systems.py `group_member`)."""
        make = systems.system(self.endpoints.system).part("group_member")
        return make(self.endpoints.namesrv, self.options.group, self.options.topic,
                    max(0.5, self.options.op_timeout * 0.4), self.options.route_refresh_s)

    async def close(self) -> None:
        await self.queue.close()


@register
class GroupWorkload(OnTopic, Workload):
    name = "group"
    # Its own operations; a history without run.json that also has sends and polls is taken
    # for a queue history (infer_workload tries the built-ins in order).
    route = Route(frozenset({"rebalance", "commit", "join", "leave", "kill", "pause"}))
    description = ("a consumer group: producers send unique messages; consumers rebalance, poll and commit "
                   "offsets to the broker while being killed, paused, leaving and joining")
    default_mix = {"send": 1.0, "poll": 1.0}
    min_concurrency = 3

    def __init__(self, options: WorkloadOptions) -> None:
        super().__init__(options)
        share = self.mix.get("poll", 0) / sum(self.mix.values())
        self.consumers = max(2, min(round(options.concurrency * share), options.concurrency - 1))
        self.producers = options.concurrency - self.consumers
        self.state = {w: ConsumerState() for w in range(self.producers, options.concurrency)}

    def client(self, endpoints: Any, node_names: dict[str, str] | None = None) -> GroupClient:
        return GroupClient(endpoints, self.options, node_names)

    async def setup(self, client: GroupClient) -> None:
        await client.queue.create_topic(self.options.queues)

    # -- planning (pure) ---------------------------------------------------------------
    def plan_op(self, rng: random.Random, index: int, worker: int, concurrency: int) -> tuple[str, Any, Any]:
        if worker >= self.producers:
            if (index // concurrency) % 2:
                return "commit", None, None
            draw = rng.random()
            for fault, chance in sorted(CONSUMER_FAULTS.items()):
                if draw < chance:
                    return fault, None, None
                draw -= chance
            return "poll", None, None
        payload = "".join(rng.choices(string.ascii_lowercase, k=self.options.payload_bytes))
        return "send", rng.randrange(self.options.queues), {"id": index, "payload": payload}

    def prepare(self, op: Any) -> tuple[str, Any, Any]:
        """A down consumer joins first; a consumer whose rebalance is due rebalances; a poll
        names the held queue it pulls and from where."""
        if op.f == "send":
            return op.f, op.key, op.value
        state = self.state[op.worker]
        if not state.up:
            return "join", None, None
        client = state.member.client_id
        if op.f != "poll":
            return op.f, None, self._commit_value(state) if op.f in ("commit", "leave") else {"client": client}
        if time.monotonic() - state.rebalanced_at >= REBALANCE_S or not state.positions:
            return "rebalance", None, None
        queues = sorted(state.positions)
        queue = queues[state.turn % len(queues)]
        state.turn += 1
        return "poll", queue, {"offset": state.positions[queue], "client": client}

    @staticmethod
    def _commit_value(state: ConsumerState) -> dict[str, Any]:
        """What a commit (or leave) writes: the consumer's positions of the queues it holds."""
        assert state.member is not None
        return {"client": state.member.client_id, "offsets": {str(q): o for q, o in state.positions.items()}}

    # -- effects -------------------------------------------------------------------------
    async def execute(self, client: GroupClient, worker: int, f: str, key: Any, value: Any) -> Completion:
        if f == "send":
            done = await client.queue.send(key, encode_message(value), f"m{value['id']}")
            result = dict(value, queue=key, offset=done.value) if done.type == "ok" else value
            return Completion(done.type, result, done.node, done.error)
        state = self.state[worker]
        if f == "join":
            return await self._join(client, state)
        if state.member is None:
            return Completion("fail", value, error="consumer is down")
        if f == "rebalance":
            return await self._rebalance(state)
        if f == "poll":
            return await self._poll(client, state, key, value["offset"])
        if f == "commit":
            return await self._commit(state.member, value["offsets"])
        if f == "kill":
            member, state.member, state.positions = state.member, None, {}
            await member.close()   # its connections close: the brokers drop it (channel close)
            return Completion("ok", value)
        if f == "pause":
            pause = min(PAUSE_S, self.options.op_timeout / 2)   # inside the op: the pause is an ok op
            await asyncio.sleep(pause)
            return Completion("ok", dict(value, paused_s=pause))
        if f == "leave":
            done = await self._commit(state.member, value["offsets"])
            member, state.member, state.positions = state.member, None, {}
            await member.unregister(self.options.topic)
            await member.close()
            return Completion(done.type, value, error=done.error)
        raise ValueError(f"group workload: unknown operation {f!r}")

    async def _join(self, client: GroupClient, state: ConsumerState) -> Completion:
        member = client.new_member()
        try:
            answered = await member.heartbeat(self.options.topic)
        except BaseException:
            await member.close()   # timed out or cancelled: no member left behind on the brokers
            raise
        if not answered:
            await member.close()
            return Completion("fail", None, error="no broker took the heartbeat")
        state.member, state.positions, state.rebalanced_at = member, {}, float("-inf")
        return Completion("ok", {"client": member.client_id})

    async def _rebalance(self, state: ConsumerState) -> Completion:
        member = state.member
        assert member is not None
        await member.heartbeat(self.options.topic)
        found = await member.allocation(self.options.topic)
        if found is None:
            return Completion("fail", None, error="no broker answered the member list")
        members, queues = found
        held = {mq.queue_id for mq in queues}
        lost = {q: off for q, off in state.positions.items() if q not in held}
        if lost:
            await self._commit(member, lost)
        gained: dict[int, int] = {}
        for mq in queues:
            if mq.queue_id in state.positions:
                continue
            got = await member.fetch_offset(mq)
            if got.outcome != Outcome.OK:
                return Completion("fail", None, error=f"query offset of queue {mq.queue_id}: {got.error}")
            gained[mq.queue_id] = got.offset or 0
        state.positions = {q: state.positions.get(q, gained.get(q, 0)) for q in sorted(held)}
        state.rebalanced_at = time.monotonic()
        return Completion("ok", {"client": member.client_id, "members": members, "held": sorted(held),
                                 "gained": {str(q): o for q, o in gained.items()},
                                 "released": {str(q): o for q, o in lost.items()}})

    async def _poll(self, client: GroupClient, state: ConsumerState, queue: int, offset: int) -> Completion:
        member = state.member
        assert member is not None
        mq = next((m for m in await member.queues(self.options.topic) if m.queue_id == queue), None)
        if mq is None:
            return Completion("fail", None, error=f"no route to queue {queue}")
        result = await member.pull(mq, offset, PULL_BATCH)
        node = node_of(result.broker_addr, client.node_names)
        if result.outcome != Outcome.OK:
            return Completion(result.outcome.history_type, None, node, f"{result.status}: {result.error}")
        items = [dict(decode_message(m.body), queue=queue, key=queue, offset=m.queue_offset)
                 for m in result.messages]
        next_offset = result.next_offset if result.next_offset is not None else offset + len(items)
        if result.from_master is False or (result.from_master is None and not items):
            # A lagging replica (or an empty answer from a broker we cannot name) does not move us back.
            next_offset = max(next_offset, offset)
        if queue in state.positions:
            state.positions[queue] = next_offset
        return Completion("ok", items, node)

    async def _commit(self, member: GroupMember, positions: dict[Any, int]) -> Completion:
        queues = {mq.queue_id: mq for mq in await member.queues(self.options.topic)}
        outcomes, errors = [], []
        for q, offset in sorted((int(q), o) for q, o in positions.items()):
            if q not in queues:
                continue
            done = await member.commit_offset(queues[q], offset)
            outcomes.append(done.outcome)
            if done.outcome != Outcome.OK:
                errors.append(f"queue {q}: {done.error}")
        value = {"client": member.client_id, "offsets": {str(q): o for q, o in positions.items()}}
        if all(o == Outcome.OK for o in outcomes):
            return Completion("ok", value)
        return Completion("info" if Outcome.INDETERMINATE in outcomes else "fail", value, error="; ".join(errors))

    # -- final phase: everyone back, drain ---------------------------------------------------
    async def final_phase(self, run: OpRunner) -> None:
        try:
            await run_together(self._drain(run, worker) for worker in self.state)
        finally:
            for state in self.state.values():
                if state.member is not None:
                    await state.member.close()

    async def _drain(self, run: OpRunner, worker: int) -> None:
        state, quiet = self.state[worker], 0
        while quiet < DRAIN_QUIET_ROUNDS:
            if not state.up:
                await run(worker, "join", None, None)
                await asyncio.sleep(DRAIN_PAUSE_S)
                continue
            done = await run(worker, "rebalance", None, None)
            got = False
            for queue in sorted(state.positions) if done.type == "ok" else []:
                if not state.up or queue not in state.positions:
                    break
                polled = await run(worker, "poll", queue, {"offset": state.positions[queue],
                                                           "client": state.member.client_id})
                got = got or bool(polled.type == "ok" and polled.value)
            if state.up:
                await run(worker, "commit", None, self._commit_value(state))
            whole = done.type == "ok" and len(done.value["members"]) == self.consumers
            quiet = quiet + 1 if whole and not got else 0
            await asyncio.sleep(DRAIN_PAUSE_S)
