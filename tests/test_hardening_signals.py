"""Every stop signal heals: `chaos run` stopped by SIGINT, SIGTERM or SIGHUP in the
middle of a partition leaves no namespace, process, iptables rule or cluster
directory behind; after a SIGKILL, the next `chaos run` cleans up first.

Each run brings up its own throwaway 3-node cluster under a CHAOS_HOME of its
own (so it never uses, or sweeps, anybody's default cluster).
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import finish, skip_unless_root
from inventory import netns
from nuclei.net import chain_rules

pytestmark = [pytest.mark.root]

REPO = Path(__file__).resolve().parent.parent
CHAOS = str(Path(sys.executable).parent / "chaos")


@pytest.fixture
def home(tmp_path: Path):
    """A CHAOS_HOME of the test's own; whatever cluster is left in it is removed, also on failure."""
    skip_unless_root()
    home = tmp_path / "home"
    yield home
    for record in netns.clusters(home=home):
        netns.down(record.name, home=home)


def start_run(home: Path, store: Path, *where: str) -> subprocess.Popen:
    """`chaos run` with partitions every 2 s, on `where` (default: a 4-node cluster of its own)."""
    cmd = [CHAOS, "run", "--profile", "dledger-3", *(where or ("--nodes", "4")), "--fault", "random-partition",
           "--time", "120", "--interval", "2", "--timing", "fast", "--store", str(store), "--no-check",
           "--quiet"]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                            env={**os.environ, "CHAOS_HOME": str(home)})


def wait_for(probe, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")


def run_dir_with_fault_on(store: Path) -> Path | None:
    for nemesis in store.glob("*/runs/*/nemesis.jsonl"):
        if '"phase":"start"' in nemesis.read_text():
            return nemesis.parent
    return None


def run_json(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text())


def leftovers(home: Path, cluster: str) -> list[str]:
    """Everything of the cluster still on this host: namespaces, links, host iptables
    rules, processes started from its state directory, the state directory itself."""
    tag = netns.choose_tag(cluster, {})
    found = [f"netns {n}" for n in netns._list_netns() if n.startswith(f"{netns.PREFIX}{tag}")]
    found += [f"link {n}" for n in netns._list_links() if n.startswith(f"{netns.PREFIX}{tag}")]
    rules = subprocess.run(["iptables", "-w", "5", "-S"], capture_output=True, text=True).stdout
    found += [f"rule {r}" for r in rules.splitlines() if f"{netns.PREFIX}{tag}" in r]
    state_dir = home / "clusters" / cluster  # sshd configs and the SUT's work directories are in it
    found += [f"process {line}" for line in processes_mentioning(f"{state_dir}/")]
    if state_dir.exists():
        found.append(f"directory {state_dir}")
    return found


def processes_mentioning(text: str) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            line = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in line:
            found.append(line[:160])
    return found


def stop(proc: subprocess.Popen) -> tuple[str, str]:
    return finish(proc, 240)


@contextlib.contextmanager
def run_in_a_fault(home: Path, store: Path, *where: str) -> Iterator[tuple[subprocess.Popen, Path, list[str]]]:
    """A `chaos run` once a partition is on: (process, run directory, [stdout, stderr] once it ends)."""
    proc = start_run(home, store, *where)
    output: list[str] = []
    try:
        yield proc, wait_for(lambda: run_dir_with_fault_on(store), 180, "a partition to start"), output
    finally:
        output += stop(proc)


@pytest.mark.cluster
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_a_stop_signal_mid_fault_heals_and_removes_the_run_cluster(tmp_path, home, signum):
    store = tmp_path / "store"
    with run_in_a_fault(home, store) as (proc, run_dir, output):
        cluster = run_json(run_dir)["cluster"]["name"]
        proc.send_signal(signum)
        if signum == signal.SIGTERM:  # a second signal during the clean-up only asks to wait
            wait_for(lambda: "heal" in run_json(run_dir)["timings"]["phases"], 60, "the clean-up")
            proc.send_signal(signum)
    out, err = output
    assert proc.returncode == 130, err
    record = run_json(run_dir)
    reason = "interrupted by Ctrl-C" if signum == signal.SIGINT else f"interrupted by {signum.name}"
    assert record["status"] == "interrupted" and record["stop_reason"] == reason, record
    assert {"heal", "collect", "stop"} <= set(record["timings"]["phases"])
    journal = [json.loads(line) for line in (run_dir / "journal.jsonl").read_text().splitlines()]
    applied = {e["id"] for e in journal if e["event"] == "apply"}
    assert applied and applied == {e["id"] for e in journal if e["event"] == "undo"}
    assert leftovers(home, cluster) == []
    assert f"store: {run_dir.resolve()}" in out
    if signum == signal.SIGTERM:
        assert "please wait" in err


def unreachable_inventory(tmp_path: Path) -> Path:
    """A node on a closed loopback port: the next run fails fast, after its clean-up."""
    path = tmp_path / "closed.yaml"
    path.write_text("name: closed\nkind: ssh\nstrict_host_keys: false\n"
                    "nodes:\n  - {name: n1, host: 127.0.0.1, port: 1}\n")
    return path


def next_run(tmp_path: Path, home: Path) -> subprocess.CompletedProcess:
    return subprocess.run([CHAOS, "run", "--profile", "single-broker", "--fault", "noop", "--time", "5",
                           "--inventory", str(unreachable_inventory(tmp_path)), "--store", str(tmp_path / "s2"),
                           "--quiet"], capture_output=True, text=True, cwd=REPO, timeout=180,
                          env={**os.environ, "CHAOS_HOME": str(home)})


def next_up(tmp_path: Path, home: Path) -> subprocess.CompletedProcess:
    """`chaos up` of another cluster in the same CHAOS_HOME (removed by the `home` fixture)."""
    return subprocess.run([CHAOS, "up", "--name", f"up{os.getpid()}", "--nodes", "3"], capture_output=True,
                          text=True, cwd=REPO, timeout=180, env={**os.environ, "CHAOS_HOME": str(home)})


@pytest.mark.cluster
@pytest.mark.parametrize("next_command", [next_run, next_up], ids=["chaos-run", "chaos-up"])
def test_after_a_sigkill_the_next_chaos_run_or_up_removes_the_stale_cluster_first(tmp_path, home, next_command):
    store = tmp_path / "store"
    with run_in_a_fault(home, store) as (proc, run_dir, _):
        cluster = run_json(run_dir)["cluster"]["name"]
        proc.send_signal(signal.SIGKILL)
    assert leftovers(home, cluster), "SIGKILL gives no chance to clean up: the cluster is still there"
    assert run_json(run_dir)["status"] == "running"

    after = next_command(tmp_path, home)
    assert f"clean-up first: cluster {cluster}: its owner (pid {proc.pid}) has exited" in after.stderr, after.stderr
    assert f"run {run_dir.resolve()}: its harness (pid {proc.pid}) was killed" in after.stderr
    assert leftovers(home, cluster) == []
    record = run_json(run_dir)
    assert record["status"] == "error" and "killed" in record["error"]
    assert not list((home / "runs").glob("*.json")), "every lease is released or handled"


def test_after_a_sigkill_on_a_lasting_cluster_the_next_run_heals_its_journal_and_stops_its_sut(
        tmp_path, home, make_cluster):
    inventory, pool = make_cluster(4)
    store = tmp_path / "store"
    with run_in_a_fault(home, store, "--inventory", str(inventory.source)) as (proc, run_dir, _):
        proc.send_signal(signal.SIGKILL)
    workdirs = [node.workdir for node in inventory.nodes]
    assert any(chain_rules(pool, n) for n in inventory.names), "the partition is still applied"
    assert sut_processes(workdirs), "the SUT still runs"

    after = next_run(tmp_path, home)
    assert f"run {run_dir.resolve()}: its harness (pid {proc.pid}) was killed; faults healed and the SUT " \
           "stopped" in after.stderr, after.stderr
    assert not any(chain_rules(pool, n) for n in inventory.names)
    assert sut_processes(workdirs) == []
    assert run_json(run_dir)["status"] == "error"


def sut_processes(workdirs: list[str]) -> list[str]:
    return [line for line in processes_mentioning(" -m sut ") if any(w in line for w in workdirs)]


@pytest.mark.cluster
def test_a_sigterm_to_teeth_while_its_cluster_comes_up_removes_the_cluster_and_exits_130(tmp_path, home):
    """The stop handlers cover the whole `chaos teeth`, not only each campaign's runs."""
    store = tmp_path / "store"
    cmd = [CHAOS, "teeth", str(REPO / "campaigns" / "smoke.yaml"), "--bug", "raft-commit-without-quorum",
           "--store", str(store), "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                            env={**os.environ, "CHAOS_HOME": str(home)})
    try:
        record = wait_for(lambda: netns.clusters(home=home), 180, "the teeth cluster to come up")[0]
        proc.send_signal(signal.SIGTERM)
    finally:
        out, err = stop(proc)
    assert proc.returncode == 130, err
    assert leftovers(home, record.name) == []
    assert not netns.clusters(home=home)
