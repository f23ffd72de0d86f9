"""The local network-namespace cluster, checked against the real kernel and sshd."""
from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import cli
from inventory import Pool, load, netns
from conftest import skip_unless_root, unique_cluster_name

pytestmark = pytest.mark.cluster


def kernel_objects(prefix: str) -> list[str]:
    """Namespaces and links whose name starts with `prefix`, as `ip` reports them."""
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split("\n")
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout.split("\n")
    names = [line.split()[0] for line in namespaces if line.strip()]
    names += [line.split(":")[1].strip().split("@")[0] for line in links if line.strip()]
    return [name for name in names if name.startswith(prefix)]


def poll(condition, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def live_pids(pids: list[int]) -> list[int]:
    """The pids that still exist and are not zombies."""
    alive = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.append(pid)
    return alive


def sshd_pids(record: netns.ClusterRecord, nodes: list[str] | None = None) -> list[int]:
    """The sshd pids of the nodes; sshd writes its pidfile just after it listens, so a
    loaded machine can show the file still empty for a moment: wait for its content."""
    layout = netns.Layout(netns.chaos_home(), record.name)
    return [_pid_in(layout.sshd_pidfile(n)) for n in nodes or record.node_names]


def _pid_in(pidfile, timeout_s: float = 10.0) -> int:
    deadline = time.monotonic() + timeout_s
    while not (text := pidfile.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return int(text)


def record_of(name: str) -> netns.ClusterRecord:
    return next(r for r in netns.clusters() if r.name == name)


def assert_nothing_left(record: netns.ClusterRecord, pids: list[int]) -> None:
    assert kernel_objects(f"{netns.PREFIX}{record.tag}") == []
    assert live_pids(pids) == []
    assert not netns.Layout(netns.chaos_home(), record.name).root.exists()
    rules = subprocess.run(["iptables", "-S", "FORWARD"], capture_output=True, text=True).stdout
    assert f"{netns.PREFIX}{record.tag}" not in rules


def test_each_node_answers_over_ssh_with_its_own_address(netns_cluster):
    inventory, pool = netns_cluster
    results = pool.run_many(inventory.names, ["ip", "-4", "-o", "addr", "show", "dev", "eth0"])
    for node in inventory.nodes:
        assert f"inet {node.host}/24" in results[node.name].stdout
    assert len({node.host for node in inventory.nodes}) == len(inventory.nodes)


def test_nodes_reach_each_other_through_the_bridge(netns_cluster):
    inventory, pool = netns_cluster
    peer = inventory.nodes[2].host
    banner = pool.run("n1", ["bash", "-c", f"exec 3<>/dev/tcp/{peer}/22 && head -c 4 <&3"], timeout=10)
    assert banner.stdout == "SSH-"


def test_iptables_rule_in_one_node_does_not_appear_in_another(netns_cluster):
    inventory, pool = netns_cluster
    marker = f"chaos-test-{os.getpid()}"
    rule = ["INPUT", "-p", "tcp", "--dport", "9", "-m", "comment", "--comment", marker, "-j", "DROP"]
    pool.run("n1", ["iptables", "-w", "5", "-A", *rule])
    try:
        assert marker in pool.run("n1", ["iptables", "-S", "INPUT"]).stdout
        assert marker not in pool.run("n2", ["iptables", "-S", "INPUT"]).stdout
        host_rules = subprocess.run(["iptables", "-S", "INPUT"], capture_output=True, text=True).stdout
        assert marker not in host_rules
    finally:
        pool.run("n1", ["iptables", "-w", "5", "-D", *rule])


def test_inventory_file_describes_the_cluster(netns_cluster):
    inventory, _ = netns_cluster
    reloaded = load(inventory.source)
    assert reloaded.kind == "netns" and reloaded.strict_host_keys
    assert reloaded.known_hosts.exists()
    network = ipaddress.ip_network(f"{inventory.nodes[0].host}/24", strict=False)
    assert all(ipaddress.ip_address(n.host) in network for n in reloaded.nodes)
    assert all(Path(n.workdir).is_dir() and n.netns for n in reloaded.nodes)
    assert len({n.workdir for n in reloaded.nodes}) == len(reloaded.nodes)


def test_two_clusters_coexist_without_address_collisions(netns_cluster, make_cluster):
    first, first_pool = netns_cluster
    second, second_pool = make_cluster(3)
    first_net = ipaddress.ip_network(f"{first.nodes[0].host}/24", strict=False)
    second_net = ipaddress.ip_network(f"{second.nodes[0].host}/24", strict=False)
    assert not first_net.overlaps(second_net)
    assert first_pool.run("n1", "hostname -I").stdout.split() == [first.nodes[0].host]
    assert second_pool.run("n1", "hostname -I").stdout.split() == [second.nodes[0].host]


def test_down_leaves_no_namespace_bridge_veth_or_process_behind():
    skip_unless_root()
    name = unique_cluster_name("down")
    inventory = netns.up(name, 3, persistent=False)
    record = record_of(name)
    try:
        with Pool(inventory) as pool:
            sut_pid = pool.start_detached("n2", ["sleep", "600"], f"{inventory.node('n2').workdir}/sleep.pid",
                                          f"{inventory.node('n2').workdir}/sleep.log")
        pids = sshd_pids(record) + [sut_pid]
        assert len(live_pids(pids)) == 4
        assert len(kernel_objects(f"{netns.PREFIX}{record.tag}")) == 1 + 3 + 3  # bridge, veths, namespaces
    finally:
        assert netns.down(name) is True
    assert_nothing_left(record, pids)
    assert netns.down(name) is False


def test_failed_creation_half_way_leaves_nothing_behind():
    skip_unless_root()
    name = unique_cluster_name("fail")
    at_failure: dict = {}

    def fail_at_second_node(node: str) -> None:
        if node == "n2":  # remember what exists at the moment of the failure
            record = at_failure["record"] = record_of(name)
            layout = netns.Layout(netns.chaos_home(), name)
            # sshd writes its pidfile just after it daemonizes
            assert poll(lambda: all(layout.sshd_pidfile(n).exists() for n in ("n1", "n2")))
            at_failure["pids"] = sshd_pids(record, ["n1", "n2"])
            raise RuntimeError("injected failure after two nodes")

    with pytest.raises(RuntimeError, match="injected failure"):
        netns.up(name, 4, persistent=False, on_node=fail_at_second_node)
    assert len(live_pids(at_failure["pids"])) == 0
    assert_nothing_left(at_failure["record"], at_failure["pids"])


def test_up_replaces_an_existing_cluster_of_the_same_name():
    skip_unless_root()
    name = unique_cluster_name("again")
    netns.up(name, 3, persistent=False)
    try:
        old_pids = sshd_pids(record_of(name))
        inventory = netns.up(name, 4, persistent=False)
        assert inventory.names == ["n1", "n2", "n3", "n4"]
        assert live_pids(old_pids) == []
        with Pool(inventory) as pool:
            assert len(pool.run_many(inventory.names, "true")) == 4
    finally:
        netns.down(name)


def test_chaos_down_sweeps_a_cluster_whose_owner_died():
    skip_unless_root()
    name = unique_cluster_name("orphan")
    script = textwrap.dedent(f"""
        from inventory import netns
        netns.up({name!r}, 3, persistent=False)
        # exit without `down`, as a crashed test run would
    """)
    subprocess.run([sys.executable, "-c", script], check=True, cwd=Path(__file__).parent.parent, timeout=120)
    record = record_of(name)
    pids = sshd_pids(record)
    assert len(live_pids(pids)) == 3
    result = CliRunner().invoke(cli, ["down", "--name", unique_cluster_name("absent")])
    assert result.exit_code == 0, result.output
    assert f"cluster {name}: its owner (pid" in result.output
    assert_nothing_left(record, pids)


def test_chaos_up_nodes_down_from_the_command_line():
    skip_unless_root()
    name = unique_cluster_name("cli")
    runner = CliRunner()
    try:
        result = runner.invoke(cli, ["up", "--nodes", "3", "--name", name])
        assert result.exit_code == 0, result.output
        path = Path(result.stdout.strip().splitlines()[-1])
        assert path == netns.inventory_path(name) and path.exists()
        table = runner.invoke(cli, ["nodes", "--name", name])
        assert table.exit_code == 0, table.output
        assert table.output.count("yes") == 3
        for node in ("n1", "n2", "n3"):
            assert node in table.output
    finally:
        down = runner.invoke(cli, ["down", "--name", name])
    assert f"cluster {name}: removed" in down.output
    assert not netns.inventory_path(name).exists()


def test_chaos_nodes_reports_an_unreachable_node(netns_cluster, tmp_path):
    inventory, _ = netns_cluster
    broken = inventory.model_copy(deep=True)
    broken.nodes[1].port = 2222  # nothing listens there
    path = broken.write(tmp_path / "broken.yaml")
    result = CliRunner().invoke(cli, ["nodes", "--inventory", str(path)])
    assert result.exit_code == 3
    assert "1 of 3 nodes unreachable" in result.output
    assert f"node n2 is unreachable: cannot connect to {inventory.nodes[1].host}:2222" in result.output
    assert "Traceback" not in result.output
