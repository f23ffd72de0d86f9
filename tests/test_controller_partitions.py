"""Controller mode under real iptables partitions and kills on a network-namespace cluster.

The SUT is deployed with sut.deploy onto 3 namespace nodes (namesrv, controller
and broker processes spread as the profile says) and driven from the control
node through the bridge, which partitions never cut: a partitioned old master
stays reachable for clients, exactly the situation of RocketMQ issue 7017.
A seeded schedule of partitions and kills runs through the nuclei (journaled,
healed at the end); then every SEND_OK message must be readable in
`controller-3`. `controller-unclean` runs the same schedule and may lose.
"""
from __future__ import annotations

import asyncio
import time

import pytest

import nuclei
from nuclei.net import remove
from support.controller import Step, read_all_message_ids, seeded_schedule, steps_for_this_run, wait_until
from support.controller_chaos import workload
from sut import admin
from sut.deploy import ModelDeployer

FAULTS = ("partition-master", "partition-node", "kill-master", "kill-broker", "kill-controller")


def schedule(seed: int, steps: int) -> list[Step]:
    return seeded_schedule(seed, steps, FAULTS, hold=(2.0, 4.0), rest=(1.0, 2.0))


class Chaos:
    """Applies one step at a time through the nuclei; everything is journaled."""

    def __init__(self, deployer: ModelDeployer, pool, inventory, journal) -> None:
        self.deployer, self.pool, self.inventory, self.journal = deployer, pool, inventory, journal
        self.log: list[str] = []

    def _refs(self, role: str):
        return [r for r in self.deployer.refs if r.role == role]

    def _pick(self, items, pick: float):
        return items[int(pick * len(items))] if items else None

    def run(self, plan: list[Step]) -> None:
        for step in plan:
            undo = self.apply(step)
            time.sleep(step.hold)
            undo()
            time.sleep(step.rest)

    def apply(self, step: Step):
        nodes = [n.name for n in self.inventory.nodes]
        if step.fault.startswith("partition"):
            node = (self.deployer.leader("broker") if step.fault == "partition-master"
                    else self._pick(nodes, step.pick)) or self._pick(nodes, step.pick)
            peers = [n.host for n in self.inventory.nodes if n.name != node]
            entry = nuclei.drop(self.pool, self.journal, node, peers)
            self.log.append(f"{step.fault} {node} {step.hold:.1f}s")
            return lambda: remove(self.pool, self.journal, entry)
        if step.fault == "kill-master":
            node = self.deployer.leader("broker")
            ref = next((r for r in self._refs("broker") if r.node == node), None)
        elif step.fault == "kill-controller":
            node = self.deployer.leader("controller")
            ref = next((r for r in self._refs("controller") if r.node == node), None)
        else:
            ref = self._pick(self._refs("broker"), step.pick)
        if ref is None:
            self.log.append(f"{step.fault}: no target")
            return lambda: None
        entries = nuclei.kill(self.pool, self.journal, ref)
        self.log.append(f"{step.fault} {ref.name} {step.hold:.1f}s")

        def restart() -> None:
            for entry in entries:
                nuclei.restart(self.pool, self.journal, entry, start=self.deployer.start_process,
                               proc=ref)
        return restart


def broker_statuses(deployer: ModelDeployer) -> list[dict | None]:
    async def ask():
        return await asyncio.gather(*(admin.process_status(r.address, timeout=1.5)
                                      for r in deployer.refs if r.role == "broker"))
    return admin.run_sync(ask())


def whole(deployer: ModelDeployer) -> bool:
    statuses = broker_statuses(deployer)
    if not all(s and s.get("ready") for s in statuses):
        return False
    masters = [s for s in statuses if s["ha_role"] == "master"]
    return (len(masters) == 1 and len(masters[0]["ha"]["sync_state_set"]) == len(statuses)
            and all(s["max_offset"] == masters[0]["max_offset"] for s in statuses))



def run_profile(profile: str, netns_cluster, tmp_path, seed: int):
    inventory, pool = netns_cluster
    journal = nuclei.Journal(tmp_path / f"{profile}-journal.jsonl")
    deployer = ModelDeployer(pool, inventory, profile, tmp_path / profile, timing="fast")
    chaos = Chaos(deployer, pool, inventory, journal)
    ok: list[str] = []
    attempted: list[str] = []
    namesrv = deployer.endpoints()["namesrv"]
    try:
        deployer.install()
        deployer.start()
        deployer.wait_healthy(60)

        async def drive():
            stop = asyncio.Event()
            load = asyncio.create_task(workload(namesrv, stop, ok, attempted))
            try:
                await asyncio.to_thread(chaos.run, schedule(seed, steps_for_this_run(10)))
            finally:
                await asyncio.to_thread(nuclei.heal, pool, journal)
                await asyncio.sleep(1.0)
                stop.set()
                await load
        asyncio.run(drive())
        wait_until(lambda: whole(deployer), 90, f"{profile} to be whole after {chaos.log}")
        return ok, attempted, read_all_message_ids(namesrv), chaos.log
    except BaseException:
        deployer.collect_logs(tmp_path / f"{profile}-logs")
        raise
    finally:
        report = nuclei.heal(pool, journal)
        deployer.stop()
        assert not report.errors, report.errors


@pytest.mark.long
@pytest.mark.parametrize("seed", [2])
def test_partitions_and_kills_never_lose_an_acknowledged_message(netns_cluster, tmp_path, seed):
    ok, attempted, read, log = run_profile("controller-3", netns_cluster, tmp_path, seed)
    assert len(ok) > 20, f"too few successful sends to mean anything: {len(ok)} ({log})"
    missing = set(ok) - set(read)
    assert not missing, f"seed {seed}: {len(missing)} acknowledged messages lost; faults {log}"
    assert set(read) <= set(attempted)


@pytest.mark.long
@pytest.mark.parametrize("seed", [2])
def test_the_same_partitions_on_controller_unclean_may_lose(netns_cluster, tmp_path, seed, capsys):
    ok, attempted, read, log = run_profile("controller-unclean", netns_cluster, tmp_path, seed)
    assert set(read) <= set(attempted), "read a message nobody sent"
    with capsys.disabled():
        print(f"\ncontroller-unclean seed {seed}: {len(set(ok) - set(read))} of {len(ok)} "
              f"acknowledged messages lost under {log}")
