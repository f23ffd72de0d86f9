"""Deploying master-slave-sync to the local namespace cluster over SSH, then killing the slave."""
from __future__ import annotations

import asyncio
import posixpath

import pytest

from sut.client import Consumer, Outcome, Producer
from sut.deploy import ModelDeployer
from sut.local import wait_until
from support.sut import status

pytestmark = pytest.mark.cluster


async def _send(namesrv: list[str], body: bytes):
    async with Producer(namesrv, send_timeout=5) as producer:
        return await producer.send("chaos", body, queue=0)


async def _read_from_slave(namesrv: list[str]) -> list[bytes]:
    async with Consumer(namesrv, "deploy-test", read_from="slave") as consumer:
        mq = next(q for q in await consumer.queues("chaos") if q.queue_id == 0)
        return [m.body for m in (await consumer.pull(mq, 0)).messages]


def test_master_and_slave_deployed_over_ssh_survive_a_slave_kill(netns_cluster, tmp_path):
    inventory, pool = netns_cluster
    deployer = ModelDeployer(pool, inventory, "master-slave-sync", tmp_path, timing="fast")
    master_node, slave_node = inventory.nodes[0], inventory.nodes[1]
    try:
        deployer.install()
        deployer.start()
        deployer.wait_healthy(60)
        endpoints = deployer.endpoints()
        namesrv = endpoints["namesrv"]
        assert namesrv == [f"{master_node.host}:9876"] and len(endpoints["brokers"]) == 2
        assert deployer.leader("broker") == master_node.name
        master, slave = (next(r for r in deployer.processes(n.name) if r.role == "broker")
                         for n in (master_node, slave_node))
        assert master.data_dir.startswith(master_node.workdir)
        wait_until(lambda: status(master.address).get("ha", {}).get("slaves"), 30, what="slave connected")

        first = asyncio.run(_send(namesrv, b"before the kill"))
        assert first.outcome == Outcome.OK, first

        pid = int(pool.read_file(slave_node.name, slave.pidfile).decode())
        pool.run(slave_node.name, ["kill", "-9", str(pid)])
        wait_until(lambda: not status(master.address).get("ha", {}).get("slaves"), 30,
                   what="master noticed the dead slave")
        alone = asyncio.run(_send(namesrv, b"while the slave is dead"))
        assert alone.outcome == Outcome.INDETERMINATE and alone.status == "SLAVE_NOT_AVAILABLE"

        deployer.start_process(slave)
        deployer.wait_healthy(60)
        wait_until(lambda: status(slave.address).get("max_offset") == status(master.address)["max_offset"],
                   30, what="restarted slave caught up")
        assert asyncio.run(_read_from_slave(namesrv)) == [b"before the kill", b"while the slave is dead"]
        assert asyncio.run(_send(namesrv, b"after the restart")).outcome == Outcome.OK

        copied = deployer.collect_logs(tmp_path / "nodes")
        names = {p.relative_to(tmp_path / "nodes").as_posix() for p in copied}
        assert f"{slave_node.name}/broker-a-1/broker.log" in names
        assert f"{master_node.name}/namesrv/namesrv.log" in names
        assert "connected to master" in (tmp_path / "nodes" / slave_node.name / "broker-a-1" / "broker.log").read_text()
    finally:
        deployer.stop()
    for ref in deployer.refs:  # nothing left running, pidfiles gone after the clean stop
        probe = pool.run(ref.node, ["test", "-e", ref.pidfile], check=False)
        assert probe.exited != 0, f"{ref.name} left {ref.pidfile}"
        assert posixpath.isabs(ref.config_path)
