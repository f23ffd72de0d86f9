"""A fenced Controller-mode broker and replica info of older epochs (unit level: the
broker's HA strategy over a real store and epoch file, no controller)."""
from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace

from sut.controller.broker_ha import ControllerHA, ControllerHASettings
from sut.controller.epochs import EpochFile
from sut.controller.replication import LinkTiming, MasterSide
from sut.ha.base import Role
from sut.store.message_store import MessageStore, StoreConfig

LOG = logging.getLogger("test")


class BrokerStandIn:
    """The parts of a broker the HA strategy uses (sut.ha.base.BrokerContext)."""

    def __init__(self, tmp_path) -> None:
        self.data_dir = tmp_path
        self.config = SimpleNamespace(cluster="c", broker_name="broker-a", host="127.0.0.1",
                                      ha_port=1)
        self.store = MessageStore(tmp_path / "store", StoreConfig(segment_bytes=1 << 16), LOG)
        self.store.recover()
        self.log = LOG
        self.address = self.ha_address = "127.0.0.1:1"
        self.registrations = 0

    def spawn(self, coro, name):
        return asyncio.get_running_loop().create_task(coro, name=name)

    def registration_changed(self) -> None:
        self.registrations += 1


def replica_info(epoch: int) -> dict:
    return {"master_id": 1, "master_address": "127.0.0.1:9", "master_epoch": epoch,
            "sss_epoch": epoch, "sync_state_set": "1"}


def test_a_fenced_broker_ignores_replica_info_older_than_the_epoch_that_fenced_it(tmp_path):
    async def scenario():
        broker = BrokerStandIn(tmp_path)
        ha = ControllerHA(broker, ControllerHASettings(controller_addrs=["127.0.0.1:9"]))
        ha.epochs = EpochFile(tmp_path / "epochs.json")
        ha.master_side = MasterSide("127.0.0.1", 0, broker.store, ha.epochs, LinkTiming(), ha, LOG)
        ha.controller_id = 2
        try:
            await ha._fence(5, "the controller knows no master at epoch 5")
            await ha._apply_replica_info(replica_info(4), "a late answer from before")
            assert not ha.role_known and ha.master_epoch == 5 and ha.slave_side is None
            await ha._apply_replica_info(replica_info(5), "the current master")
            assert ha.role_known and ha.role is Role.SLAVE and ha.master_epoch == 5
        finally:
            if ha.slave_side is not None:
                await ha.slave_side.stop()
            await ha.controller.close()
            await broker.store.close()
    asyncio.run(asyncio.wait_for(scenario(), 30))
