"""Inventory files, naming and address choice: pure logic, no root needed."""
from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import cli
from inventory import Inventory, InventoryError, Node, load
from inventory.netns import (IFNAMSIZ_MAX, ClusterRecord, choose_subnet, choose_tag, subnets_in_use)
from inventory.pool import Pool, shell_command

SSH_INVENTORY = """\
name: lab
kind: ssh
defaults: {user: admin, key_file: keys/lab_ed25519, sudo: true}
nodes:
  - {name: n1, host: 192.0.2.11, roles: [controller]}
  - {name: n2, host: 192.0.2.12, port: 2222}
  - {name: n3, host: 192.0.2.13, user: ops}
"""


def write(tmp_path: Path, text: str, name: str = "inventory.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_ssh_inventory_applies_defaults_and_resolves_key_paths(tmp_path):
    inventory = load(write(tmp_path, SSH_INVENTORY))
    assert inventory.kind == "ssh" and inventory.names == ["n1", "n2", "n3"]
    assert inventory.strict_host_keys is True
    n1, n2, n3 = inventory.nodes
    assert n1.key_file == tmp_path / "keys" / "lab_ed25519"
    assert (n1.user, n1.sudo, n1.roles, n1.port) == ("admin", True, ["controller"], 22)
    assert n2.port == 2222
    assert n3.user == "ops"
    assert inventory.source == tmp_path / "inventory.yaml"


def test_key_file_may_be_omitted_to_use_the_agent(tmp_path):
    inventory = load(write(tmp_path, "nodes: [{name: a, host: 192.0.2.1}]"))
    assert inventory.nodes[0].key_file is None
    assert inventory.name == "inventory"  # from the file name


def test_strict_host_keys_can_be_turned_off_explicitly(tmp_path):
    text = "strict_host_keys: false\nknown_hosts: ~/kh\nnodes: [{name: a, host: h}]"
    inventory = load(write(tmp_path, text))
    assert inventory.strict_host_keys is False
    assert inventory.known_hosts == Path("~/kh").expanduser()


def test_bad_port_error_names_file_field_and_value(tmp_path):
    text = SSH_INVENTORY.replace("port: 2222", "port: 70000")
    path = write(tmp_path, text)
    with pytest.raises(InventoryError) as caught:
        load(path)
    message = str(caught.value)
    assert str(path) in message
    assert "nodes[1].port" in message and "65535" in message and "70000" in message
    assert "\n" not in message


def test_third_node_error_uses_its_index(tmp_path):
    text = SSH_INVENTORY.replace("host: 192.0.2.13, ", "host: 192.0.2.13, port: ssh, ")
    with pytest.raises(InventoryError, match=r"nodes\[2\]\.port: .*integer.*'ssh'"):
        load(write(tmp_path, text))


def test_misspelled_field_is_reported_as_unknown(tmp_path):
    with pytest.raises(InventoryError, match=r"nodes\[0\]\.prot: unknown field"):
        load(write(tmp_path, "nodes: [{name: a, host: h, prot: 22}]"))


def test_missing_host_is_reported(tmp_path):
    with pytest.raises(InventoryError, match=r"nodes\[0\]\.host: Field required"):
        load(write(tmp_path, "nodes: [{name: a}]"))


def test_duplicate_node_names_are_rejected(tmp_path):
    text = "nodes: [{name: a, host: h1}, {name: a, host: h2}]"
    with pytest.raises(InventoryError, match=r"nodes: .*'a' is used twice \(nodes\[0\] and nodes\[1\]\)"):
        load(write(tmp_path, text))


def test_unknown_kind_is_rejected_but_docker_is_accepted(tmp_path):
    with pytest.raises(InventoryError, match=r"kind: .*'netns', 'docker' or 'ssh'"):
        load(write(tmp_path, "kind: vagrant\nnodes: [{name: a, host: h}]"))
    assert load(write(tmp_path, "kind: docker\nnodes: [{name: a, host: h}]")).kind == "docker"


def test_invalid_yaml_error_names_the_line(tmp_path):
    path = write(tmp_path, "nodes:\n  - name: a\n    host: [unclosed\n")
    with pytest.raises(InventoryError, match=r"inventory .*inventory.yaml: invalid YAML: line \d+"):
        load(path)


def test_missing_file_and_wrong_top_level_are_clear(tmp_path):
    with pytest.raises(InventoryError, match=r"nope.yaml: cannot read: No such file"):
        load(tmp_path / "nope.yaml")
    with pytest.raises(InventoryError, match="top level must be a mapping"):
        load(write(tmp_path, "- just\n- a list\n"))


def test_inventory_round_trips_through_yaml(tmp_path):
    original = load(write(tmp_path, SSH_INVENTORY))
    copy = load(original.write(tmp_path / "copy.yaml"))
    assert copy.model_dump() == original.model_dump()


def test_unknown_node_lookup_lists_the_known_ones():
    inventory = Inventory(name="x", nodes=[Node(name="n1", host="h")])
    with pytest.raises(InventoryError, match=r"no node 'n9' \(nodes: n1\)"):
        inventory.node("n9")


def test_cli_reports_a_bad_inventory_in_one_line(tmp_path):
    path = write(tmp_path, "nodes: [{name: a, host: h, port: -1}]")
    result = CliRunner().invoke(cli, ["nodes", "--inventory", str(path)])
    assert result.exit_code == 3
    assert result.output.strip().count("\n") == 0
    assert "nodes[0].port" in result.output and "Traceback" not in result.output


def test_cli_rejects_a_node_count_out_of_range():
    result = CliRunner().invoke(cli, ["up", "--nodes", "12", "--name", "never-created"])
    assert result.exit_code == 3
    assert "3 to 9 nodes, not 12" in result.output


def test_subnet_is_derived_from_the_name_and_skips_taken_ones():
    preferred = choose_subnet("alpha", set())
    assert choose_subnet("alpha", set()) == preferred
    assert choose_subnet("alpha", {preferred}) == (preferred + 1) % 256
    with pytest.raises(InventoryError, match="every subnet"):
        choose_subnet("alpha", set(range(256)))


def test_host_routes_mark_overlapping_subnets_as_taken():
    networks = [ipaddress.IPv4Network("10.213.7.0/24"), ipaddress.IPv4Network("10.213.8.128/25"),
                ipaddress.IPv4Network("192.0.2.0/24")]
    assert subnets_in_use(networks) == {7, 8}
    assert subnets_in_use([ipaddress.IPv4Network("10.0.0.0/8")]) == set(range(256))


def test_tag_collision_with_another_cluster_gets_a_different_tag():
    tag = choose_tag("alpha", {})
    assert len(tag) == 6
    assert choose_tag("alpha", {tag: "alpha"}) == tag
    assert choose_tag("alpha", {tag: "beta"}) != tag


def test_kernel_object_names_fit_ifnamsiz_for_the_largest_cluster():
    record = ClusterRecord(name="x" * 40, tag=choose_tag("x" * 40, {}), subnet=255, size=9,
                           owner_pid=1, owner_start=1, persistent=True)
    names = [record.bridge] + [record.veth(i) for i in range(1, 10)] + [record.netns(i) for i in range(1, 10)]
    assert all(len(n) <= IFNAMSIZ_MAX for n in names)
    assert len(set(names)) == len(names)


def test_argv_commands_are_quoted_for_the_shell():
    assert shell_command(["echo", "a'b; rm -rf x"]) == "echo 'a'\"'\"'b; rm -rf x'"
    assert shell_command("echo $HOME") == "echo $HOME"


def test_sudo_and_timeout_wrap_the_whole_command():
    inventory = Inventory(name="x", nodes=[Node(name="a", host="h", user="ops", sudo=True)])
    pool = Pool(inventory)
    wrapped = pool._wrap(inventory.nodes[0], "cd /x && ls", timeout=7, sudo=None)
    assert wrapped == "sudo -n timeout -k 5 7 sh -c 'cd /x && ls'"
    assert pool._wrap(inventory.nodes[0], "ls", timeout=None, sudo=False) == "sh -c ls"
