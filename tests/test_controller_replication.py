"""The slave side of the AutoSwitch HA link against a real message store (no sockets):
truncation to the consistent point, epochs taken from transfer headers, and the
broker identity file."""
from __future__ import annotations

import asyncio
import json
import logging

import pytest

from sut.controller.epochs import EpochEntry, EpochFile
from sut.controller.identity import BrokerIdentity, IdentityError, IdentityStore
from sut.controller.replication import HAError, LinkTiming, SlaveSide
from sut.invariants import FILE_NAME, InvariantLog
from sut.message import Message
from sut.protocol import Command, RequestCode
from sut.store.message_store import MessageStore, StoreConfig

LOG = logging.getLogger("test")


class Hooks:
    broker_id = 2
    learner = False

    def __init__(self, data_dir, confirmed: int = 0) -> None:
        self.confirm = None
        self.confirmed = confirmed  # what this broker knew as confirmed before the handshake
        self.invariants = InvariantLog(data_dir, "n2", LOG)

    def expected_master_epoch(self) -> int:
        return 0

    def confirm_offset(self) -> int:
        return self.confirmed

    def on_confirm(self, offset: int) -> None:
        self.confirm = offset


def read_events(path) -> list[dict]:
    """The invariant events a node wrote (one JSON object a line)."""
    return [json.loads(line) for line in path.read_text().splitlines()]


def store_with(tmp_path, name: str, count: int) -> tuple[MessageStore, list[int]]:
    """A recovered store holding `count` messages; also the end offset after each one."""
    store = MessageStore(tmp_path / name, StoreConfig(segment_bytes=1 << 16), LOG)
    store.recover()
    ends = [0]
    for i in range(count):
        ends.append(store.append([Message("t", 0, f"{name}-{i}", b"x" * 20)]).end)
    return store, ends


def handshake(epochs: list[EpochEntry], end: int, confirm: int = 0) -> Command:
    return Command(RequestCode.HA_HANDSHAKE, {"max_offset": end, "master_epoch": epochs[-1].epoch,
                                              "confirm_offset": confirm},
                   json.dumps([e.to_json() for e in epochs]).encode(), flags=1)


def slave(tmp_path, store, entries, confirmed: int = 0) -> SlaveSide:
    epochs = EpochFile(tmp_path / "epochs.json")
    for entry in entries:
        assert epochs.append(entry)
    return SlaveSide("127.0.0.1:1", store, epochs, LinkTiming(), Hooks(tmp_path, confirmed), LOG)


def test_a_returning_old_master_is_cut_back_to_where_the_new_epoch_began(tmp_path):
    store, ends = store_with(tmp_path, "old", 10)         # epoch 1 wrote 10 messages
    side = slave(tmp_path, store, [EpochEntry(1, 0)])
    master = [EpochEntry(1, 0), EpochEntry(2, ends[6])]   # the new master had only 6 of them
    asyncio.run(side._truncate_to_master(handshake(master, ends[6] + 500, confirm=ends[6])))
    assert store.max_offset == ends[6]
    assert side.truncations == [(ends[10], ends[6])]
    assert side.epochs.entries == [EpochEntry(1, 0)]
    assert side.hooks.confirm == ends[6]


def test_an_old_master_cut_below_what_it_had_confirmed_obeys_and_records_the_breach(tmp_path):
    store, ends = store_with(tmp_path, "acked", 10)       # acknowledged all 10 (master-only ack)
    side = slave(tmp_path, store, [EpochEntry(1, 0)], confirmed=ends[10])
    master = [EpochEntry(1, 0), EpochEntry(2, ends[6])]
    asyncio.run(side._truncate_to_master(handshake(master, ends[6] + 500, confirm=ends[6])))
    assert store.max_offset == ends[6]                    # obeyed, as RocketMQ does
    [event] = read_events(tmp_path / FILE_NAME)
    assert event["kind"] == "ha-truncated-below-confirm" and event["node"] == "n2"
    assert event["details"]["consistent_point"] == ends[6] and event["details"]["confirm_offset"] == ends[10]


def test_a_cut_above_the_confirm_offset_breaks_nothing(tmp_path):
    store, ends = store_with(tmp_path, "unacked", 10)
    side = slave(tmp_path, store, [EpochEntry(1, 0)], confirmed=ends[6])
    asyncio.run(side._truncate_to_master(handshake([EpochEntry(1, 0), EpochEntry(2, ends[6])], ends[6] + 500)))
    assert store.max_offset == ends[6] and not (tmp_path / FILE_NAME).exists()


def test_a_slave_that_is_behind_keeps_everything(tmp_path):
    store, ends = store_with(tmp_path, "behind", 4)
    side = slave(tmp_path, store, [EpochEntry(1, 0)])
    asyncio.run(side._truncate_to_master(handshake([EpochEntry(1, 0)], ends[4] + 900)))
    assert store.max_offset == ends[4] and side.truncations == []


def test_divergent_later_epochs_are_dropped_with_their_data(tmp_path):
    store, ends = store_with(tmp_path, "div", 8)
    side = slave(tmp_path, store, [EpochEntry(1, 0), EpochEntry(3, ends[5])])
    master = [EpochEntry(1, 0), EpochEntry(2, ends[3]), EpochEntry(4, ends[7])]
    asyncio.run(side._truncate_to_master(handshake(master, ends[7] + 100)))
    assert store.max_offset == ends[3]
    assert side.epochs.entries == [EpochEntry(1, 0)]


def test_an_empty_epoch_of_ours_that_the_master_replaced_is_dropped(tmp_path):
    store, _ = store_with(tmp_path, "empty", 0)          # master of epoch 1, wrote nothing
    side = slave(tmp_path, store, [EpochEntry(1, 0)])
    asyncio.run(side._truncate_to_master(handshake([EpochEntry(2, 0)], 700)))
    assert side.epochs.entries == []
    assert side.epochs.append(EpochEntry(2, 0))          # the first transfer can start epoch 2


def test_no_common_epoch_resynchronises_from_the_start(tmp_path):
    store, ends = store_with(tmp_path, "none", 3)        # wrote in epoch 1 that the master replaced
    side = slave(tmp_path, store, [EpochEntry(1, 0)])
    asyncio.run(side._truncate_to_master(handshake([EpochEntry(2, 0)], 700)))
    assert store.max_offset == 0 and side.epochs.entries == []


def test_transfers_append_a_new_epoch_before_its_data_and_refuse_going_back(tmp_path):
    source, ends = store_with(tmp_path, "src", 4)
    target, _ = store_with(tmp_path, "dst", 0)
    side = slave(tmp_path, target, [])

    def transfer(offset: int, end: int, epoch: int, start: int) -> Command:
        return Command(RequestCode.HA_TRANSFER, {"offset": offset, "epoch": epoch,
                                                 "epoch_start": start, "confirm_offset": end},
                       source.read_raw(offset, end - offset), flags=2)

    assert side._on_transfer(transfer(0, ends[2], 1, 0))
    assert side._on_transfer(transfer(ends[2], ends[3], 2, ends[2]))
    assert side.epochs.entries == [EpochEntry(1, 0), EpochEntry(2, ends[2])]
    assert side.hooks.confirm == ends[3]
    with pytest.raises(HAError, match="epoch 1 data after our epoch 2"):
        side._on_transfer(transfer(ends[3], ends[4], 1, 0))
    with pytest.raises(HAError, match="our log ends at"):
        side._on_transfer(transfer(ends[2], ends[3], 2, ends[2]))
    assert target.read_raw(0, 1 << 16) == source.read_raw(0, ends[3])
    heartbeat = Command(RequestCode.HA_TRANSFER, {"offset": ends[3], "epoch": 3, "epoch_start": 0,
                                                  "confirm_offset": 10 ** 9}, b"", flags=2)
    assert not side._on_transfer(heartbeat)
    assert side.hooks.confirm == ends[3]  # never beyond what we have


def test_identity_is_pending_until_committed_and_survives_a_reload(tmp_path):
    store = IdentityStore(tmp_path, "c", "broker-a")
    ident = BrokerIdentity("c", "broker-a", 2, "addr;1")
    store.save_pending(ident)
    again = IdentityStore(tmp_path, "c", "broker-a")
    assert again.load_final() is None and again.load_pending() == ident
    again.commit(ident)
    assert IdentityStore(tmp_path, "c", "broker-a").load_final() == ident
    assert IdentityStore(tmp_path, "c", "broker-a").load_pending() is None


def test_identity_of_another_group_or_a_corrupt_file_is_refused(tmp_path):
    IdentityStore(tmp_path, "c", "broker-a").commit(BrokerIdentity("c", "broker-a", 1, "x"))
    with pytest.raises(IdentityError, match="broker-b"):
        IdentityStore(tmp_path, "c", "broker-b").load_final()
    (tmp_path / "broker_identity.json").write_text("{")
    with pytest.raises(IdentityError, match="broker_identity.json"):
        IdentityStore(tmp_path, "c", "broker-a").load_final()
