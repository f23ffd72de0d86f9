"""The controller's metadata state machine, scenario by scenario (docs/ha-protocol.md,
"Scenarios our tests replay"), plus the fences and error codes of each request."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sut.controller.election import CandidateInfo, elect_master
from sut.controller.metadata import (
    NO_MASTER, AlterSyncStateSet, ApplyBrokerId, CleanBrokerData, ControllerMetadata,
    Decision, ElectMaster, UpdateBrokerAddress, event_from_dict, event_to_dict,
)
from sut.protocol import ResponseCode as RC

GROUP = "broker-a"


class Cluster:
    """The metadata plus a fake liveness view; commits events through their log encoding."""

    def __init__(self, unclean: bool = False) -> None:
        self.meta = ControllerMetadata()
        self.alive: set[int] = set()
        self.infos: dict[int, CandidateInfo] = {}
        self.unclean = unclean
        self.log: list[str] = []

    def is_alive(self, name: str, broker_id: int) -> bool:
        return name == GROUP and broker_id in self.alive

    def info(self, name: str, broker_id: int) -> CandidateInfo:
        return self.infos.get(broker_id, CandidateInfo())

    def commit(self, decision: Decision) -> Decision:
        for event in decision.events:
            line = json.dumps(event_to_dict(event))  # what the Raft log carries
            self.log.append(line)
            self.meta.apply(event_from_dict(json.loads(line)))
        return decision

    def register(self, broker_id: int) -> Decision:
        address = f"127.0.0.1:{10910 + broker_id}"
        next_id = self.meta.get_next_broker_id("c", GROUP).fields["next_broker_id"]
        assert next_id == broker_id
        self.commit(self.meta.apply_broker_id("c", GROUP, broker_id, address, f"{address};1"))
        self.alive.add(broker_id)
        return self.commit(self.meta.register_broker(GROUP, broker_id, address, self.is_alive))

    def elect(self, broker_id: int | None, designate: bool = False) -> Decision:
        return self.commit(self.meta.elect_master(GROUP, broker_id, designate, self.is_alive,
                                                  self.info, self.unclean))

    def alter(self, new_sss: set[int], master: int | None = None, master_epoch: int | None = None,
              sss_epoch: int | None = None) -> Decision:
        group = self.meta.groups[GROUP]
        return self.commit(self.meta.alter_sync_state_set(
            GROUP, group.master_id if master is None else master,
            group.master_epoch if master_epoch is None else master_epoch,
            group.sss_epoch if sss_epoch is None else sss_epoch, new_sss, self.is_alive))

    @property
    def group(self):
        return self.meta.groups[GROUP]


@pytest.fixture
def three() -> Cluster:
    """Three registered brokers, broker 1 elected first, SSS altered to all three."""
    cluster = Cluster()
    for broker_id in (1, 2, 3):
        assert cluster.register(broker_id).ok
    assert cluster.elect(1).ok
    assert cluster.alter({1, 2, 3}).ok
    return cluster


def test_three_brokers_register_with_ids_one_two_three():
    cluster = Cluster()
    for broker_id in (1, 2, 3):
        reply = cluster.register(broker_id)
        assert reply.ok and reply.fields["master_id"] == NO_MASTER
    assert sorted(cluster.group.addresses) == [1, 2, 3]
    assert cluster.meta.get_next_broker_id("c", GROUP).fields["next_broker_id"] == 4


def test_first_elect_wins_with_master_epoch_one():
    cluster = Cluster()
    for broker_id in (1, 2, 3):
        cluster.register(broker_id)
    reply = cluster.elect(2)
    assert reply.ok
    assert (reply.fields["master_id"], reply.fields["master_epoch"]) == (2, 1)
    assert cluster.group.master_id == 2 and cluster.group.master_epoch == 1
    assert cluster.group.sync_state_set == {2} and cluster.group.sss_epoch == 1


def test_later_elects_answer_master_still_exists_without_changing_anything():
    cluster = Cluster()
    for broker_id in (1, 2, 3):
        cluster.register(broker_id)
    cluster.elect(1)
    before = len(cluster.log)
    for asker in (2, 3, 1):
        reply = cluster.elect(asker)
        assert reply.code == RC.CONTROLLER_MASTER_STILL_EXISTS
        assert reply.fields["master_id"] == 1 and reply.fields["master_epoch"] == 1
    assert len(cluster.log) == before


def test_alter_sync_state_set_to_all_three_bumps_sss_epoch_to_two(three):
    assert three.group.sync_state_set == {1, 2, 3}
    assert three.group.sss_epoch == 2


def test_dead_master_is_replaced_by_a_live_sss_member_at_epoch_two(three):
    three.alive.discard(1)
    reply = three.elect(None)
    assert reply.ok and reply.fields["master_id"] in (2, 3)
    assert three.group.master_epoch == 2
    assert three.group.sync_state_set == {reply.fields["master_id"]}


@pytest.mark.parametrize("infos, winner", [
    ({2: CandidateInfo(1, 100, 0), 3: CandidateInfo(2, 50, 0)}, 3),   # higher epoch first
    ({2: CandidateInfo(1, 100, 0), 3: CandidateInfo(1, 50, 0)}, 2),   # then higher offset
    ({2: CandidateInfo(1, 100, 5), 3: CandidateInfo(1, 100, 1)}, 3),  # then lower priority
    ({2: CandidateInfo(1, 100, 1), 3: CandidateInfo(1, 100, 1)}, 2),  # then lower id
])
def test_election_prefers_epoch_then_offset_then_priority(three, infos, winner):
    three.infos = infos
    three.alive.discard(1)
    assert three.elect(None).fields["master_id"] == winner


def test_election_only_picks_sss_members():
    cluster = Cluster()
    for broker_id in (1, 2, 3):
        cluster.register(broker_id)
    cluster.elect(1)
    cluster.alter({1, 2})
    cluster.infos = {3: CandidateInfo(9, 10**9, 0)}  # 3 looks best but is not in sync
    cluster.alive.discard(1)
    assert cluster.elect(None).fields["master_id"] == 2


def test_admin_may_designate_a_live_broker_even_while_the_master_lives(three):
    reply = three.elect(3, designate=True)
    assert reply.ok and three.group.master_id == 3 and three.group.master_epoch == 2


def test_admin_designation_of_a_dead_broker_fails(three):
    three.alive.discard(3)
    reply = three.elect(3, designate=True)
    assert reply.code == RC.CONTROLLER_ELECT_MASTER_FAILED
    assert three.group.master_id == 1


def test_all_replicas_down_with_sss_of_one_leaves_no_master_until_it_returns():
    cluster = Cluster()
    for broker_id in (1, 2, 3):
        cluster.register(broker_id)
    cluster.elect(1)
    cluster.alive.clear()
    reply = cluster.elect(None)  # the controller notices the master died
    assert reply.code == RC.CONTROLLER_MASTER_NOT_AVAILABLE
    assert cluster.group.master_id is None and cluster.group.master_epoch == 2
    cluster.alive |= {2, 3}
    assert cluster.elect(2).code == RC.CONTROLLER_ELECT_MASTER_FAILED
    assert cluster.elect(None).code == RC.CONTROLLER_MASTER_NOT_AVAILABLE
    assert cluster.group.master_id is None and cluster.group.master_epoch == 2
    cluster.alive.add(1)
    reply = cluster.elect(3)
    assert reply.ok and cluster.group.master_id == 1 and cluster.group.master_epoch == 3


def test_all_replicas_down_with_unclean_election_elects_any_live_replica():
    cluster = Cluster(unclean=True)
    for broker_id in (1, 2, 3):
        cluster.register(broker_id)
    cluster.elect(1)
    cluster.alive.clear()
    cluster.elect(None)
    cluster.alive |= {2, 3}
    cluster.infos = {3: CandidateInfo(1, 500, 0), 2: CandidateInfo(1, 200, 0)}
    reply = cluster.elect(2)
    assert reply.ok and cluster.group.master_id == 3 and cluster.group.master_epoch == 3


def test_clean_broker_data_refuses_live_brokers(three):
    reply = three.commit(three.meta.clean_broker_data(GROUP, [2], False, three.is_alive))
    assert reply.code == RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    assert 2 in three.group.addresses
    three.alive.discard(2)
    assert three.commit(three.meta.clean_broker_data(GROUP, [2], False, three.is_alive)).ok
    assert 2 not in three.group.addresses and 2 not in three.group.sync_state_set


def test_clean_broker_data_of_a_whole_dead_group_forgets_it(three):
    assert three.meta.clean_broker_data(GROUP, None, False, three.is_alive).code == \
        RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    three.alive.clear()
    assert three.commit(three.meta.clean_broker_data(GROUP, None, False, three.is_alive)).ok
    assert GROUP not in three.meta.groups
    assert three.meta.clean_broker_data(GROUP, None, False, three.is_alive).code == \
        RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA


def test_clean_living_broker_when_forced(three):
    assert three.commit(three.meta.clean_broker_data(GROUP, [3], True, three.is_alive)).ok
    assert 3 not in three.group.addresses


# ----- alter SSS: each fence and check has its own error code -----

@pytest.mark.parametrize("kwargs, code", [
    ({"master": 2}, RC.CONTROLLER_FENCED_MASTER_ID),
    ({"master_epoch": 0}, RC.CONTROLLER_FENCED_MASTER_EPOCH),
    ({"sss_epoch": 1}, RC.CONTROLLER_FENCED_SSS_EPOCH),
])
def test_alter_sss_is_fenced_by_master_id_master_epoch_and_sss_epoch(three, kwargs, code):
    reply = three.alter({1, 2}, **kwargs)
    assert reply.code == code and not reply.events
    assert three.group.sync_state_set == {1, 2, 3} and three.group.sss_epoch == 2


def test_alter_sss_rejects_unregistered_dead_and_masterless_sets(three):
    assert three.alter({1, 4}).code == RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    three.alive.discard(3)
    assert three.alter({1, 3}).code == RC.CONTROLLER_BROKER_NOT_ALIVE
    assert three.alter({2}).code == RC.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
    assert three.alter({1, 2}).ok and three.group.sss_epoch == 3


def test_alter_sss_of_an_unknown_group_is_rejected():
    meta = ControllerMetadata()
    reply = meta.alter_sync_state_set("nope", 1, 1, 1, {1}, lambda *_: True)
    assert reply.code == RC.CONTROLLER_BROKER_METADATA_NOT_EXIST


def test_old_master_is_fenced_after_a_new_election(three):
    three.alive.discard(1)
    three.elect(None)
    three.alive.add(1)
    # the returning old master still believes epoch 1
    assert three.alter({1, 2}, master=1, master_epoch=1, sss_epoch=2).code == \
        RC.CONTROLLER_FENCED_MASTER_ID


# ----- broker ids -----

def test_apply_broker_id_retry_with_the_same_check_code_is_idempotent():
    cluster = Cluster()
    meta = cluster.meta
    first = cluster.commit(meta.apply_broker_id("c", GROUP, 1, "a:1", "a:1;100"))
    retry = cluster.commit(meta.apply_broker_id("c", GROUP, 1, "a:1", "a:1;100"))
    assert first.ok and retry.ok and not retry.events
    assert len(cluster.log) == 1


def test_apply_broker_id_refuses_a_taken_id_or_a_skipped_id():
    cluster = Cluster()
    meta = cluster.meta
    assert meta.apply_broker_id("c", GROUP, 2, "a:1", "x").code == RC.CONTROLLER_BROKER_ID_INVALID
    cluster.commit(meta.apply_broker_id("c", GROUP, 1, "a:1", "a:1;100"))
    assert meta.apply_broker_id("c", GROUP, 1, "b:1", "b:1;200").code == \
        RC.CONTROLLER_BROKER_ID_INVALID
    assert meta.apply_broker_id("c", GROUP, 3, "b:1", "b:1;200").code == \
        RC.CONTROLLER_BROKER_ID_INVALID
    assert meta.apply_broker_id("c", GROUP, 2, "b:1", "b:1;200").ok


def test_register_without_an_applied_id_is_refused():
    cluster = Cluster()
    assert cluster.meta.register_broker(GROUP, 1, "a:1", cluster.is_alive).code == \
        RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED


def test_register_with_a_new_address_updates_it(three):
    reply = three.commit(three.meta.register_broker(GROUP, 2, "127.0.0.9:1", three.is_alive))
    assert reply.ok and any(isinstance(e, UpdateBrokerAddress) for e in reply.events)
    assert three.group.addresses[2] == "127.0.0.9:1"
    assert reply.fields["master_id"] == 1 and reply.fields["sync_state_set"] == [1, 2, 3]


def test_register_hides_the_address_of_a_dead_master(three):
    three.alive.discard(1)
    reply = three.meta.register_broker(GROUP, 2, three.group.addresses[2], three.is_alive)
    assert reply.fields["master_id"] == 1 and reply.fields["master_address"] == ""


def test_elect_of_unregistered_group_or_broker_is_refused(three):
    assert three.meta.elect_master("zzz", 1, False, three.is_alive, three.info, False).code == \
        RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    assert three.elect(9).code == RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED


def test_get_replica_info_of_unknown_group_is_a_distinct_error():
    assert ControllerMetadata().get_replica_info("x").code == RC.CONTROLLER_BROKER_METADATA_NOT_EXIST


# ----- replication of the state machine -----

def test_replaying_the_event_log_rebuilds_the_same_state(three):
    three.alive.discard(1)
    three.elect(None)
    replica = ControllerMetadata()
    for line in three.log:
        replica.apply(event_from_dict(json.loads(line)))
    assert replica.to_dict() == three.meta.to_dict()
    assert ControllerMetadata.from_dict(json.loads(json.dumps(replica.to_dict()))).to_dict() == \
        replica.to_dict()


@pytest.mark.parametrize("raw", [{"type": "Nope"}, {"type": "ElectMaster"}, [1], "x",
                                 {"type": "ElectMaster", "broker_name": "a", "x": 1}])
def test_malformed_events_are_rejected_with_value_error(raw):
    with pytest.raises(ValueError):
        event_from_dict(raw)


def test_every_event_type_round_trips():
    events = [ApplyBrokerId("c", "b", 1, "a:1", "code"), UpdateBrokerAddress("b", 1, "a:2"),
              AlterSyncStateSet("b", (1, 2)), ElectMaster("b", None), ElectMaster("b", 2),
              CleanBrokerData("b", (1,)), CleanBrokerData("b", None)]
    for event in events:
        assert event_from_dict(json.loads(json.dumps(event_to_dict(event)))) == event


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["kill", "revive", "elect", "alter"]),
                          st.integers(1, 3)), max_size=40))
def test_invariants_hold_under_any_sequence_of_deaths_and_elections(steps):
    """The master is always in the SSS, epochs never go back, SSS members are registered."""
    cluster = Cluster()
    for broker_id in (1, 2, 3):
        cluster.register(broker_id)
    cluster.elect(1)
    last = (cluster.group.master_epoch, cluster.group.sss_epoch)
    for action, broker_id in steps:
        if action == "kill":
            cluster.alive.discard(broker_id)
            if cluster.group.master_id == broker_id:
                cluster.elect(None)
        elif action == "revive":
            cluster.alive.add(broker_id)
        elif action == "elect":
            cluster.elect(broker_id)
        elif cluster.group.master_id is not None:
            cluster.alter(cluster.group.sync_state_set | {broker_id})
        group = cluster.group
        if group.master_id is not None:
            assert group.master_id in group.sync_state_set
        assert group.sync_state_set <= set(group.addresses)
        now = (group.master_epoch, group.sss_epoch)
        assert now >= last and now[0] >= last[0]
        last = now


def test_elect_master_policy_keeps_a_live_old_master():
    assert elect_master({1, 2}, {1, 2, 3}, 1, None, lambda b: True,
                        lambda b: CandidateInfo(0, 10**6 if b == 2 else 0), False) == 1
