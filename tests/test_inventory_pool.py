"""The SSH pool against real sshd processes of a local cluster."""
from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from inventory import CommandFailed, Inventory, NodeUnreachable, Pool, local, netns
from inventory.errors import CommandTimeout

pytestmark = pytest.mark.cluster

HOSTILE = "a'b; rm -rf x"


def poll(condition, timeout: float = 30.0, interval: float = 0.05) -> bool:
    return local.poll(condition, timeout, interval)


def process_alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def workdir(inventory: Inventory, node: str, *parts: str) -> str:
    return str(Path(inventory.node(node).workdir, *parts))


def test_hostile_value_is_echoed_back_exactly_and_removes_nothing(netns_cluster):
    inventory, pool = netns_cluster
    base = workdir(inventory, "n1", "quoting")
    pool.run("n1", ["mkdir", "-p", f"{base}/x"])
    result = pool.run("n1", f"cd {shlex.quote(base)} && {shlex.join(['echo', HOSTILE])}")
    assert result.stdout == HOSTILE + "\n"
    many = pool.run_many(inventory.names, ["printf", "%s", HOSTILE])
    assert {r.stdout for r in many.values()} == {HOSTILE}
    assert Path(base, "x").is_dir()


def test_hostile_path_is_safe_in_file_operations(netns_cluster, tmp_path):
    inventory, pool = netns_cluster
    source = tmp_path / "payload"
    source.write_bytes(b"\x00binary\xffdata\n")
    remote = workdir(inventory, "n2", HOSTILE, "payload")
    pool.put("n2", source, remote)
    assert pool.read_file("n2", remote) == source.read_bytes()


def test_failed_command_names_node_command_and_exit_status(netns_cluster):
    _, pool = netns_cluster
    with pytest.raises(CommandFailed) as caught:
        pool.run("n3", "echo oops >&2; exit 3")
    assert (caught.value.node, caught.value.exited) == ("n3", 3)
    assert str(caught.value) == "node n3: command 'echo oops >&2; exit 3' exited 3: oops"
    unchecked = pool.run("n3", "exit 4", check=False)
    assert unchecked.exited == 4 and not unchecked.ok


def test_timed_out_command_is_killed_on_the_node(netns_cluster):
    inventory, pool = netns_cluster
    marker = workdir(inventory, "n1", "timeout-marker")
    with pytest.raises(CommandTimeout, match="timed out after 1 s"):
        pool.run("n1", f"sleep 3; touch {shlex.quote(marker)}", timeout=1)
    time.sleep(3)  # the sleep would have finished by now had it not been killed
    assert not Path(marker).exists()


def test_run_many_runs_on_all_nodes_at_once(netns_cluster):
    inventory, pool = netns_cluster
    pool.run_many(inventory.names, "true")  # connect first: handshakes are slow on a loaded machine
    results = pool.run_many(inventory.names, "date +%s.%N; sleep 2; date +%s.%N")
    spans = [tuple(map(float, r.stdout.split())) for r in results.values()]
    assert max(start for start, _ in spans) < min(end for _, end in spans)


def test_connection_is_reused_between_commands(netns_cluster):
    _, pool = netns_cluster
    first = pool.run("n1", "echo $SSH_CLIENT").stdout
    second = pool.run("n1", "echo $SSH_CLIENT").stdout
    assert first == second  # same client port: one SSH connection


def test_detached_process_survives_the_session_and_its_pidfile_is_right(netns_cluster):
    inventory, pool = netns_cluster
    pidfile = workdir(inventory, "n2", "run", "sleeper.pid")
    logfile = workdir(inventory, "n2", "log", "sleeper.log")
    pid = pool.start_detached("n2", ["sleep", "600"], pidfile, logfile)
    try:
        pool.close()  # end every SSH session to n2
        assert pool.read_file("n2", pidfile).decode().strip() == str(pid)
        assert process_alive(pid)
        assert Path(f"/proc/{pid}/cmdline").read_bytes() == b"sleep\x00600\x00"
        assert os.getsid(pid) == pid  # its own session: no SIGHUP from sshd
        node_netns = os.stat(f"/run/netns/{inventory.node('n2').netns}").st_ino
        assert os.stat(f"/proc/{pid}/ns/net").st_ino == node_netns
    finally:
        pool.run("n2", ["kill", "-9", str(pid)], check=False)


def test_detached_process_gets_env_cwd_and_log(netns_cluster):
    inventory, pool = netns_cluster
    cwd = workdir(inventory, "n3", "cwd with space")
    pool.run("n3", ["mkdir", "-p", cwd])
    logfile = workdir(inventory, "n3", "env.log")
    env = {"GREETING": HOSTILE}
    pool.start_detached("n3", ["sh", "-c", 'echo "$GREETING"; pwd'], workdir(inventory, "n3", "env.pid"),
                        logfile, cwd=cwd, env=env)
    assert poll(lambda: Path(logfile).exists() and Path(logfile).read_text().count("\n") == 2)
    assert Path(logfile).read_text() == f"{HOSTILE}\n{cwd}\n"


def test_put_dir_uploads_a_tree_without_bytecode_caches(netns_cluster, tmp_path):
    inventory, pool = netns_cluster
    tree = tmp_path / "tree"
    (tree / "pkg" / "sub").mkdir(parents=True)
    (tree / "pkg" / "__pycache__").mkdir()
    (tree / "top.txt").write_text("top\n")
    (tree / "pkg" / "mod.py").write_text("X = 1\n")
    (tree / "pkg" / "sub" / "blob.bin").write_bytes(bytes(range(256)) * 64)
    (tree / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"cache")
    (tree / "pkg" / "run.sh").write_text("#!/bin/sh\n")
    (tree / "pkg" / "run.sh").chmod(0o755)
    remote = workdir(inventory, "n1", "uploaded")
    pool.put_dir("n1", tree, remote)
    listing = pool.run("n1", f"cd {shlex.quote(remote)} && find . -type f | sort").stdout.split()
    assert listing == ["./pkg/mod.py", "./pkg/run.sh", "./pkg/sub/blob.bin", "./top.txt"]
    assert pool.read_file("n1", f"{remote}/pkg/sub/blob.bin") == bytes(range(256)) * 64
    assert pool.run("n1", ["test", "-x", f"{remote}/pkg/run.sh"], check=False).ok


def test_put_dir_of_a_symlinked_directory_uploads_what_it_points_to(netns_cluster, tmp_path):
    inventory, pool = netns_cluster
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "lib.txt").write_text("lib\n")
    (tmp_path / "link").symlink_to(tmp_path / "real", target_is_directory=True)
    remote = workdir(inventory, "n1", "linked")
    pool.put_dir("n1", tmp_path / "link", remote)
    assert pool.read_file("n1", f"{remote}/lib.txt") == b"lib\n"


def test_reading_a_missing_file_says_which_file_and_node(netns_cluster):
    inventory, pool = netns_cluster
    missing = workdir(inventory, "n1", "does-not-exist")
    with pytest.raises(CommandFailed, match=rf"node n1: command 'read {missing}' exited None: No such file"):
        pool.read_file("n1", missing)


def test_unreachable_node_error_names_node_and_reason(netns_cluster):
    inventory, _ = netns_cluster
    broken = inventory.model_copy(deep=True)
    broken.nodes[0].port = 2222  # our node's address, but nothing listens there
    with Pool(broken, connect_timeout=5) as pool:
        with pytest.raises(NodeUnreachable) as caught:
            pool.run("n1", "true")
    assert caught.value.node == "n1"
    assert str(caught.value) == f"node n1 is unreachable: cannot connect to {broken.nodes[0].host}:2222: Connection refused"


def test_wrong_host_key_is_rejected(netns_cluster, tmp_path):
    inventory, _ = netns_cluster
    impostor = tmp_path / "impostor"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(impostor)], check=True)
    key_type, key = impostor.with_suffix(".pub").read_text().split()[:2]
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("".join(f"{n.host} {key_type} {key}\n" for n in inventory.nodes))
    with Pool(inventory.model_copy(update={"known_hosts": known_hosts})) as pool:
        with pytest.raises(NodeUnreachable, match="host key of .* does not match"):
            pool.run("n1", "true")


def test_unknown_host_key_is_rejected_unless_strict_checking_is_off(netns_cluster, tmp_path):
    inventory, _ = netns_cluster
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    strict = inventory.model_copy(update={"known_hosts": empty})
    with Pool(strict) as pool:
        with pytest.raises(NodeUnreachable, match="is not in .*empty_known_hosts.*strict_host_keys: false"):
            pool.run("n1", "true")
    relaxed = strict.model_copy(update={"strict_host_keys": False})
    with Pool(relaxed) as pool:
        assert pool.run("n1", "echo ok").stdout == "ok\n"
    assert empty.read_text() == ""  # accepting a key never writes known_hosts


@contextlib.contextmanager
def ssh_silenced(inventory: Inventory, node: str):
    """Inside the node's own namespace, drop what its sshd sends: the node goes silent."""
    record = next(r for r in netns.clusters() if r.name == inventory.name)
    index = [n.name for n in inventory.nodes].index(node) + 1
    rule = ["OUTPUT", "-p", "tcp", "--sport", "22", "-j", "DROP"]
    iptables = ["ip", "netns", "exec", record.netns(index), "iptables", "-w"]
    subprocess.run([*iptables, "-I", *rule], check=True)
    try:
        yield
    finally:
        subprocess.run([*iptables, "-D", *rule], check=True)


def test_a_node_silent_in_the_middle_of_file_transfers_is_given_up_after_io_timeout(netns_cluster, tmp_path):
    inventory, _ = netns_cluster
    remote = workdir(inventory, "n3", "silent.bin")
    local = tmp_path / "blob.bin"
    local.write_bytes(os.urandom(200_000))
    with Pool(inventory, io_timeout=2, per_node=1) as pool:  # one connection: every call reuses it
        pool.put("n3", local, remote)  # the connection's SFTP session is open from here on
        pool.run("n3", "true")
        with ssh_silenced(inventory, "n3"):
            began = time.monotonic()
            with pytest.raises(NodeUnreachable, match="node n3 is unreachable"):
                pool.read_file("n3", remote)
            assert time.monotonic() - began < 15  # io_timeout, not TCP's retransmission limit
        pool.put_dir("n3", tmp_path, workdir(inventory, "n3", "tree"))  # and it answers again
        with ssh_silenced(inventory, "n3"):
            began = time.monotonic()
            with pytest.raises(NodeUnreachable, match="node n3 is unreachable"):
                pool.put_dir("n3", tmp_path, workdir(inventory, "n3", "tree"), timeout=1)
            assert time.monotonic() - began < 40  # timeout + kill grace + client slack, not an hour
        assert pool.read_file("n3", remote) == local.read_bytes()
