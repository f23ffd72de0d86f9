"""Real Apache RocketMQ on the local namespace cluster: each mode's cluster comes up
healthy, names its master, and goes away leaving nothing (no JVM, no file outside the
nodes' workdirs); a second deployment on the same nodes skips the upload."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from sut.rocketmq.deploy import RocketMQDeployer
from support.rocketmq_deploy import rocketmq_cluster

pytestmark = [pytest.mark.cluster, pytest.mark.root, pytest.mark.jvm]

# Where a RocketMQ process writes when nobody gives it a home of its own.
DEFAULT_HOME_PATHS = [Path.home() / name for name in ("store", "logs", "namesrv", "controller")]


@pytest.fixture(scope="module")
def cluster(make_cluster):
    return rocketmq_cluster(make_cluster)


def processes_under(root: str) -> list[str]:
    """Command lines of live processes that name a path under `root`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if root in cmdline:
                found.append(cmdline[:160])
    return found


def stamp(paths: list[Path]) -> dict[str, float | None]:
    return {str(p): (p.stat().st_mtime if p.exists() else None) for p in paths}


@pytest.mark.parametrize("profile", ["rmq-controller-3", "rmq-dledger-3", "rmq-master-slave-sync"])
def test_a_cluster_of_each_mode_comes_up_names_its_master_and_goes_away_leaving_nothing(cluster, tmp_path, profile):
    inventory, pool = cluster
    root = os.path.commonpath([n.workdir for n in inventory.nodes])
    before = stamp(DEFAULT_HOME_PATHS)
    deployer = RocketMQDeployer(pool, inventory, profile, tmp_path, timing="fast")
    try:
        deployer.install()
        deployer.start()
        deployer.wait_healthy(150)
        master = deployer.leader()
        brokers = {r.node for r in deployer.refs if r.role == "broker"}
        assert master in brokers
        state = deployer.cluster_state()
        assert state["groups"]["broker-a"]["master"] == master
        if profile.startswith("rmq-controller"):
            assert state["controller"]["leader"] in {r.node for r in deployer.refs if r.role == "controller"}
        assert len(processes_under(root)) == len(deployer.refs)
    finally:
        deployer.stop()
    assert processes_under(root) == []
    for ref in deployer.refs:
        assert pool.run(ref.node, ["test", "-e", ref.pidfile], check=False).exited != 0
        assert ref.data_dir.startswith(next(n.workdir for n in inventory.nodes if n.name == ref.node))
    assert stamp(DEFAULT_HOME_PATHS) == before
    logs = deployer.collect_logs(tmp_path / "nodes")
    assert any(p.name == "broker.log" and p.stat().st_size > 0 for p in logs)


def test_a_second_install_finds_the_release_on_the_nodes_and_skips_the_upload(cluster, tmp_path):
    inventory, pool = cluster
    deployer = RocketMQDeployer(pool, inventory, "rmq-dledger-3", tmp_path)
    deployer.install()
    started = time.monotonic()
    deployer.install()
    assert time.monotonic() - started < 10
