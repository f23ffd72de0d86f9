"""The SyncStateSet races, each driven through its interleaving with real controllers
(and, for the master's side, real broker processes) on loopback.

The interleavings need a controller commit that times out and then succeeds: the
followers are stopped so the active controller cannot commit, its commit wait is
made short for the request that must time out and long for the one that must
wait, and the followers come back before any election timeout (long here), so
the uncertain entry commits in the same term.
"""
from __future__ import annotations

import asyncio
import dataclasses
import json
import signal
from typing import Any, Awaitable, Callable

from support.controller import (GROUP, Group, broker_ha, brokers, current_master, eventually, ha, heartbeat_fields,
                                raw_send, read_all_message_ids, register, wait_until)
from support.controller_chaos import whole
from support.sut import status_of
from sut import admin
from sut.controller.server import Controller
from sut.local import LocalCluster
from sut.protocol import RequestCode as Q
from sut.protocol import ResponseCode as RC

# Elections only after 6 s of silence: the followers can be away for a few seconds
# without a new term, so the active controller's uncertain entries commit later.
RACE_RAFT_TIMING = {"heartbeat_interval_ms": 300, "max_heartbeat_leak": 20,
                    "min_vote_interval_ms": 50, "max_vote_interval_ms": 150,
                    "max_wait_ack_ms": 300, "resend_ms": 100, "rpc_timeout_ms": 300}


def set_commit_wait(controller: Controller, ms: int) -> None:
    """How long the active controller waits for a commit before answering SYSTEM_ERROR."""
    raft = controller.raft
    raft.config = dataclasses.replace(
        raft.config, timing=dataclasses.replace(raft.config.timing, max_wait_ack_ms=ms))


async def group_of_three(group: Group, client) -> Controller:
    """Brokers 1-3 registered and alive (long heartbeat timeout), 1 elected."""
    leader = await eventually(group.leader, 30, "an active controller")
    for broker_id in (1, 2, 3):
        await register(client, broker_id)
    for broker_id in (1, 2, 3):
        await client.heartbeat_all(heartbeat_fields(broker_id, timeout_ms=120000))
    reply = await client.call(Q.CONTROLLER_ELECT_MASTER, {"broker_name": GROUP, "broker_id": 1})
    assert reply.code == RC.SUCCESS and reply.fields["master_id"] == 1, reply.fields
    return leader


def alter_fields(group_state, new_sss: str) -> dict:
    return {"broker_name": GROUP, "master_id": 1, "master_epoch": group_state.master_epoch,
            "sss_epoch": group_state.sss_epoch, "sync_state_set": new_sss}


async def uncertain_then_checked(group: Group, leader: Controller, client, first: tuple,
                                 second: tuple):
    """`first` times out (its entry stays in the leader's log), `second` is checked
    against the state without it and waits; then the followers return and both commit
    in log order. Returns (first reply, second reply)."""
    followers = [cid for cid, c in group.controllers.items() if c is not leader]
    for cid in followers:
        await group.stop(cid)
    set_commit_wait(leader, 200)
    first_reply = await client.call(*first)
    set_commit_wait(leader, 30000)
    proposed = leader.raft.raft_log.last_index
    second_call = asyncio.create_task(client.call(*second, timeout=40))
    await eventually(lambda: leader.raft.raft_log.last_index > proposed, 10,
                     "the second request's entry in the leader's log")
    for cid in followers:
        await group.start(cid)
    return first_reply, await second_call


async def settled(group: Group, leader: Controller) -> dict:
    """The group's metadata once every controller applied what the leader did (all equal)."""
    await eventually(lambda: all(c.raft.applied_index == leader.raft.applied_index
                                 for c in group.controllers.values()), 20,
                     "every controller to apply the same entries")
    states = [c.metadata.groups[GROUP].to_dict() for c in group.controllers.values()]
    assert all(s == states[0] for s in states), states
    return states[0]


def race(tmp_path, body: Callable[[Group, Controller, Any], Awaitable[None]]) -> None:
    """Three in-process controllers with the race timing, brokers 1-3 registered and 1
    elected; `body(group, leader, client)` drives the interleaving."""
    async def scenario():
        group = Group(tmp_path, raft_timing=RACE_RAFT_TIMING)
        await group.start_all()
        client = group.client()
        try:
            await body(group, await group_of_three(group, client), client)
        finally:
            await client.close()
            await group.stop_all()
    asyncio.run(asyncio.wait_for(scenario(), 120))


def test_an_election_that_timed_out_and_then_committed_fences_the_deposed_masters_later_alter(
        tmp_path):
    async def body(group, leader, client):
        state = leader.metadata.groups[GROUP]
        await client.call(Q.CONTROLLER_ALTER_SYNC_STATE_SET, alter_fields(state, "1,2,3"))
        elect = (Q.CONTROLLER_ELECT_MASTER,
                 {"broker_name": GROUP, "broker_id": 2, "designate": True})
        stale_alter = (Q.CONTROLLER_ALTER_SYNC_STATE_SET, alter_fields(state, "1,3"))
        elected, altered = await uncertain_then_checked(group, leader, client, elect, stale_alter)
        assert elected.code == RC.SYSTEM_ERROR, elected.fields  # may or may not happen
        assert altered.code == RC.CONTROLLER_FENCED_SSS_EPOCH, altered.fields
        final = await settled(group, leader)
        # the election took effect; the deposed master's alter did not
        assert final["master_id"] == 2 and final["sync_state_set"] == [2], final
    race(tmp_path, body)


def test_an_alter_checked_after_an_uncertain_alter_at_the_same_epochs_is_answered_fenced(
        tmp_path):
    async def body(group, leader, client):
        state = leader.metadata.groups[GROUP]
        before = state.sss_epoch
        grow = (Q.CONTROLLER_ALTER_SYNC_STATE_SET, alter_fields(state, "1,2,3"))
        other = (Q.CONTROLLER_ALTER_SYNC_STATE_SET, alter_fields(state, "1,2"))
        grown, second = await uncertain_then_checked(group, leader, client, grow, other)
        assert grown.code == RC.SYSTEM_ERROR, grown.fields
        assert second.code == RC.CONTROLLER_FENCED_SSS_EPOCH, second.fields
        final = await settled(group, leader)
        # only the first of the two changes checked at one SSS epoch took effect
        assert final["sync_state_set"] == [1, 2, 3] and final["sss_epoch"] == before + 1
    race(tmp_path, body)


def race_cluster(tmp_path) -> LocalCluster:
    """controller-3 whose controllers tolerate followers away for seconds."""
    names = [f"broker-a-{i}" for i in range(3)]
    overrides = {n: broker_ha(slave_timeout_ms=1000, ha_max_time_slave_not_catchup_ms=1500,
                              heartbeat_timeout_ms=60000, ha_housekeeping_ms=60000)
                 for n in names}
    # the followers stay stopped while X catches up and sends time out: an election
    # timeout of 18 s keeps the leader (and its uncertain entries) on a loaded machine
    timing = {**RACE_RAFT_TIMING, "max_heartbeat_leak": 60}
    overrides.update({f"controller-{i}": {"raft_timing": timing,
                                          "broker_heartbeat_timeout_ms": 60000}
                      for i in range(3)})
    return LocalCluster("controller-3", tmp_path / "cluster", timing="fast", overrides=overrides)


def controller_roles(c: LocalCluster) -> tuple[str, list[str]]:
    names = [n for n, p in c.processes.items() if p.role == "controller"]
    leader = wait_until(lambda: next((n for n in names if (s := status_of(c, n))
                                      and s.get("is_leader")), None), 30, "an active controller")
    return leader, [n for n in names if n != leader]


def test_a_master_whose_sss_expansion_timed_out_acks_only_what_every_member_of_the_union_holds(
        tmp_path):
    """Expansion {M,Y} -> {M,Y,X} times out at the controller and commits later. Had the
    master fallen back to {M,Y}, it would ack messages X lacks, and X (then in the
    controller's SSS) could be elected without them."""
    with race_cluster(tmp_path) as c:
        c.start_all(timeout=90)
        wait_until(lambda: whole(c), 60, "the group to be whole")
        master = current_master(c)
        x, y = [b for b in brokers(c) if b != master]
        x_id, y_id = (status_of(c, b)["ha"]["controller_broker_id"] for b in (x, y))
        c.send_signal(x, signal.SIGSTOP)
        wait_until(lambda: x_id not in ha(status_of(c, master))["sync_state_set"]
                   and ha(status_of(c, master))["pending_sss"] is None, 30, "the SSS to drop X")
        _, followers = controller_roles(c)
        for name in followers:
            c.send_signal(name, signal.SIGSTOP)
        acked = []
        try:
            c.send_signal(x, signal.SIGCONT)
            # X catches up; the master proposes it; the commit times out: X counts anyway
            wait_until(lambda: x_id in (ha(status_of(c, master))["pending_sss"] or []), 20,
                       "the master to count X while its expansion is uncertain")
            assert x_id not in ha(status_of(c, master))["sync_state_set"]
            c.send_signal(x, signal.SIGSTOP)
            for i in range(3):
                if raw_send(c.address(master), f"during-{i}") == RC.SUCCESS:
                    acked.append(f"during-{i}")
        finally:
            for name in followers:
                c.send_signal(name, signal.SIGCONT)
        leader, _ = controller_roles(c)
        wait_until(lambda: x_id in controller_sss(c, leader), 20,
                   "the uncertain expansion to commit at the controller")
        # Freeze the master and Y (no more changes), then let only X survive: the
        # controller must elect X, so whatever was acked meanwhile must be on X.
        for name in (master, y):
            c.send_signal(name, signal.SIGSTOP)
        c.kill(y)
        wait_until(lambda: y_id not in alive_ids(c, leader), 20, "the controller to see Y die")
        c.kill(master)
        c.send_signal(x, signal.SIGCONT)
        try:
            wait_until(lambda: current_master(c) == x, 60, "X to be elected")
        except AssertionError as exc:
            raise AssertionError(f"{exc}: X is {status_of(c, x)}") from None
        read = set(read_all_message_ids(c.namesrv_addrs))
        assert not set(acked) - read, f"acked while X was in the union but lost: {acked}"


def controller_sss(c: LocalCluster, name: str) -> list[int]:
    reply = asyncio.run(admin.call(c.address(name), Q.CONTROLLER_GET_SYNC_STATE_DATA,
                                   {"broker_names": GROUP}, timeout=3.0))
    return json.loads(reply.body)[GROUP]["sync_state_set"]


def alive_ids(c: LocalCluster, name: str) -> list[int]:
    """Broker ids the controller `name` holds alive."""
    reply = asyncio.run(admin.call(c.address(name), Q.CONTROLLER_GET_METADATA, {}, timeout=3.0))
    return [broker_id for _, broker_id in json.loads(reply.body)["alive"]]
