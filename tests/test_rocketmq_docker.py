"""Real Apache RocketMQ on the docker provider: the node image carries a Java runtime,
so an rmq-dledger-3 cluster comes up on four containers, names its master, and goes
away leaving no RocketMQ process in any container and no container or network."""
from __future__ import annotations

import pytest

from inventory import Pool, docker
from sut.rocketmq.deploy import RocketMQDeployer
from sut.rocketmq.release import ReleaseError, ensure
from conftest import require
from support.docker import engine_or_skip, leftovers

pytestmark = [pytest.mark.root, pytest.mark.jvm]

WORKDIR_MARK = "-Duser.home=/var/tmp/rocketmq-chaos"  # every RocketMQ JVM the deployer starts names it


def rocketmq_processes(pool: Pool, node: str) -> list[str]:
    """Command lines (cut short) of the node's processes that the deployer started."""
    listing = pool.run(node, ["ps", "-eo", "args"], check=False).stdout
    return [line[:120] for line in listing.splitlines() if WORKDIR_MARK in line and "ps -eo" not in line]


def test_an_rmq_dledger_cluster_comes_up_on_containers_names_its_master_and_goes_away(tmp_path):
    client = engine_or_skip()
    try:
        ensure()
    except ReleaseError as exc:
        require(False, f"real RocketMQ: {exc}")
    home = tmp_path / "home"
    inventory = docker.up("rmq", 4, home=home, persistent=False)
    try:
        with Pool(inventory) as pool:
            deployer = RocketMQDeployer(pool, inventory, "rmq-dledger-3", tmp_path / "run", timing="fast")
            try:
                deployer.install()
                deployer.start()
                deployer.wait_healthy(180)
                master = deployer.leader()
                assert master in {r.node for r in deployer.refs if r.role == "broker"}
                assert deployer.cluster_state()["groups"]["broker-a"]["master"] == master
                running = {n.name: rocketmq_processes(pool, n.name) for n in inventory.nodes}
                assert sum(map(len, running.values())) == len(deployer.refs), running
            finally:
                deployer.stop()
            assert all(rocketmq_processes(pool, n.name) == [] for n in inventory.nodes)
    finally:
        docker.down("rmq", home=home)
    assert leftovers(client, home) == []
