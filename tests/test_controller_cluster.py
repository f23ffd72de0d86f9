"""The controller group in one event loop: active controller, failover, minority,
liveness-triggered elections and role-change pushes (real sockets on loopback)."""
from __future__ import annotations

import asyncio
import json

from support.controller import GROUP, Group, eventually, heartbeat_fields, register
from sut.controller.client import ControllerClient, ControllerUnavailable
from sut.controller.server import decode_ids
from sut.protocol import RequestCode as Q
from sut.protocol import ResponseCode as RC
from sut.protocol import RpcClient

def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 90))


def test_followers_answer_not_leader_with_the_active_controllers_address(tmp_path):
    async def scenario():
        group = Group(tmp_path)
        await group.start_all()
        try:
            leader = await eventually(group.leader, 20, "an active controller")
            follower = next(c for c in group.controllers.values() if c is not leader)
            host, port = follower.address.split(":")
            raw = RpcClient(host, int(port))
            reply = await raw.call(Q.CONTROLLER_GET_REPLICA_INFO, {"broker_name": GROUP})
            assert reply.code == RC.CONTROLLER_NOT_LEADER
            assert reply.fields["leader_address"] == leader.address
            bad = await raw.call(Q.CONTROLLER_APPLY_BROKER_ID, {"broker_name": 5})
            assert bad.code == RC.CONTROLLER_NOT_LEADER  # leadership is checked first
            lhost, lport = leader.address.split(":")
            raw_leader = RpcClient(lhost, int(lport))
            bad = await raw_leader.call(Q.CONTROLLER_APPLY_BROKER_ID, {
                "cluster": "c", "broker_name": 5, "broker_id": 1, "address": "a:1",
                "check_code": "x"})
            assert bad.code == RC.BAD_REQUEST and "broker_name" in bad.fields["error"]
            ok = await raw_leader.call(Q.CONTROLLER_GET_NEXT_BROKER_ID,
                                       {"cluster": "c", "broker_name": GROUP})
            assert ok.code == RC.SUCCESS  # the bad request did not hurt the server
            await raw.close()
            await raw_leader.close()
        finally:
            await group.stop_all()
    run(scenario())


def test_killing_the_active_controller_keeps_the_metadata_and_a_minority_cannot_change_it(tmp_path):
    async def scenario():
        group = Group(tmp_path)
        await group.start_all()
        client = group.client()
        try:
            await eventually(group.leader, 20, "an active controller")
            for broker_id in (1, 2, 3):
                await register(client, broker_id)
            for broker_id in (1, 2, 3):
                await client.heartbeat_all(heartbeat_fields(broker_id))
            reply = await client.call(Q.CONTROLLER_ELECT_MASTER, {"broker_name": GROUP, "broker_id": 2})
            assert reply.code == RC.SUCCESS and reply.fields["master_id"] == 2
            reply = await client.call(Q.CONTROLLER_ALTER_SYNC_STATE_SET, {
                "broker_name": GROUP, "master_id": 2, "master_epoch": 1, "sss_epoch": 1,
                "sync_state_set": "1,2,3"})
            assert reply.code == RC.SUCCESS and reply.fields["sss_epoch"] == 2
            old = group.leader()
            await group.stop(old.node_id)
            new = await eventually(group.leader, 30, "a new active controller")
            assert new is not old
            reply = await client.call(Q.CONTROLLER_GET_REPLICA_INFO, {"broker_name": GROUP},
                                      timeout=10)
            assert reply.code == RC.SUCCESS
            assert (reply.fields["master_id"], reply.fields["master_epoch"],
                    reply.fields["sss_epoch"]) == (2, 1, 2)
            assert decode_ids(reply.fields["sync_state_set"]) == {1, 2, 3}
            # the new leader takes writes too (with a fenced-out stale epoch first)
            stale = await client.call(Q.CONTROLLER_ALTER_SYNC_STATE_SET, {
                "broker_name": GROUP, "master_id": 2, "master_epoch": 1, "sss_epoch": 1,
                "sync_state_set": "1,2"})
            assert stale.code == RC.CONTROLLER_FENCED_SSS_EPOCH
            # leave a minority: nothing can change any more
            other = next(c for c in group.controllers.values() if c is not new)
            await group.stop(other.node_id)
            try:
                reply = await client.call(Q.CONTROLLER_ALTER_SYNC_STATE_SET, {
                    "broker_name": GROUP, "master_id": 2, "master_epoch": 1, "sss_epoch": 2,
                    "sync_state_set": "1,2"}, timeout=8)
                assert reply.code != RC.SUCCESS, "a minority committed a change"
            except ControllerUnavailable:
                pass
            survivor = next(iter(group.controllers.values()))
            await eventually(lambda: not survivor.raft.is_ready, 20, "the lone leader to step down")
            assert survivor.metadata.groups[GROUP].sync_state_set == {1, 2, 3}
        finally:
            await client.close()
            await group.stop_all()
    run(scenario())


def test_master_connection_close_elects_a_live_sss_member_and_pushes_the_role_change(tmp_path):
    async def scenario():
        group = Group(tmp_path)
        await group.start_all()
        admin = group.client()
        pushes: list = []
        master_link = group.client()
        slave_link = group.client(on_push=pushes.append)
        try:
            await eventually(group.leader, 20, "an active controller")
            for broker_id in (1, 2):
                await register(admin, broker_id)
            await master_link.heartbeat_all(heartbeat_fields(1, epoch=1))
            await slave_link.heartbeat_all(heartbeat_fields(2, epoch=1, max_offset=100))
            assert (await admin.call(Q.CONTROLLER_ELECT_MASTER,
                                     {"broker_name": GROUP, "broker_id": 1})).code == RC.SUCCESS
            reply = await admin.call(Q.CONTROLLER_ALTER_SYNC_STATE_SET, {
                "broker_name": GROUP, "master_id": 1, "master_epoch": 1, "sss_epoch": 1,
                "sync_state_set": "1,2"})
            assert reply.code == RC.SUCCESS
            await eventually(lambda: pushes, 20, "the push about the first election")
            assert pushes[0].fields["master_id"] == 1
            await master_link.close()  # what a kill -9 of the master does to its sockets
            await eventually(lambda: len(pushes) > 1, 20, "a role-change push to broker 2")
            note = pushes[-1]
            assert note.code == Q.CONTROLLER_NOTIFY_ROLE_CHANGE
            assert note.fields["master_id"] == 2 and note.fields["master_epoch"] == 2
            for c in group.controllers.values():
                await eventually(lambda c=c: c.metadata.groups[GROUP].master_id == 2, 10,
                                 f"{c.node_id} to apply the election")
            reply = await admin.call(Q.CONTROLLER_GET_METADATA, {})
            body = json.loads(reply.body)
            assert body["groups"][GROUP]["master_id"] == 2
        finally:
            for c in (admin, master_link, slave_link):
                await c.close()
            await group.stop_all()
    run(scenario())


def test_heartbeat_timeout_and_the_masterless_scan_elect_a_master(tmp_path):
    async def scenario():
        group = Group(tmp_path, broker_heartbeat_timeout_ms=1500, scan_interval_ms=500)
        await group.start_all()
        admin = group.client()
        try:
            await eventually(group.leader, 20, "an active controller")
            for broker_id in (1, 2):
                await register(admin, broker_id)
            await admin.heartbeat_all(heartbeat_fields(1))
            await admin.heartbeat_all(heartbeat_fields(2))
            await admin.call(Q.CONTROLLER_ELECT_MASTER, {"broker_name": GROUP, "broker_id": 1})
            await admin.call(Q.CONTROLLER_ALTER_SYNC_STATE_SET, {
                "broker_name": GROUP, "master_id": 1, "master_epoch": 1, "sss_epoch": 1,
                "sync_state_set": "1,2"})

            async def keep_two_alive():
                while True:
                    await admin.heartbeat_all(heartbeat_fields(2))
                    await asyncio.sleep(0.3)
            beat = asyncio.create_task(keep_two_alive())
            try:
                leader = group.leader()
                await eventually(lambda: leader.metadata.groups[GROUP].master_id == 2, 20,
                                 "broker 2 to take over after broker 1's heartbeats stop")
                assert leader.metadata.groups[GROUP].master_epoch == 2
            finally:
                beat.cancel()
        finally:
            await admin.close()
            await group.stop_all()
    run(scenario())


def test_a_silent_controller_first_in_the_list_does_not_block_calls(tmp_path):
    """A partitioned controller accepts nothing in time; the client must move on."""
    async def scenario():
        group = Group(tmp_path)
        await group.start_all()
        silent_conns = []

        async def swallow(reader, writer):
            silent_conns.append(writer)
            await reader.read()  # never answers
        silent = await asyncio.start_server(swallow, "127.0.0.1", 0)
        address = f"127.0.0.1:{silent.sockets[0].getsockname()[1]}"
        client = ControllerClient([address, *group.settings.controller_addrs], timeout=4.0)
        try:
            await eventually(group.leader, 20, "an active controller")
            for _ in range(3):
                reply = await client.call(Q.CONTROLLER_GET_NEXT_BROKER_ID,
                                          {"cluster": "c", "broker_name": GROUP})
                assert reply.code == RC.SUCCESS
            assert client.addresses[-1] == address  # tried last from now on
        finally:
            await client.close()
            for writer in silent_conns:
                writer.close()
            silent.close()
            await group.stop_all()
    run(scenario())
