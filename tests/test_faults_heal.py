"""`chaos heal` repairs a run that was SIGKILLed in the middle of a partition and a pause."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import nuclei
from harness.cli import EXIT_ERROR
from support.faults import chain_is_gone, proc_state, reachability, start_servers, stop_servers, wait_until

CHAOS = str(Path(sys.executable).parent / "chaos")
TESTS = Path(__file__).parent

# The doomed run: a fixed partition with a suspend overlapping it, written to
# the run directory like the real lifecycle does; it prints "ready" once both
# faults are on and then waits to be killed.
DOOMED_RUN = """
import sys, threading
from faults.runner import run_schedule
from pathlib import Path
import faults, inventory
from faults.schedule import FaultSpec, ScheduledEvent
from support.faults import make_context, server_proc

run_dir = Path(sys.argv[1])
inv = inventory.load(sys.argv[2])
pool = inventory.Pool(inv)
procs = {node.name: server_proc(node) for node in inv.nodes}
ctx = make_context(inv, pool, run_dir, procs)
partition = FaultSpec("fixed-partition", {"targets": ["n1"]})
suspend = FaultSpec("fixed-suspend", {"targets": ["n2"]})
schedule = [ScheduledEvent(0.0, partition, "start", 0, 0, 1), ScheduledEvent(0.1, suspend, "start", 0, 1, 2),
            ScheduledEvent(600, suspend, "stop", 0, 1, 2), ScheduledEvent(600, partition, "stop", 0, 0, 1)]
def report(active):
    if len(active) == 2:
        print("ready", flush=True)
run_schedule(ctx, schedule, threading.Event(), on_change=report)
"""


@pytest.fixture(scope="module")
def cluster(netns_cluster):
    inventory, pool = netns_cluster
    procs = start_servers(inventory, pool)
    try:
        yield inventory, pool, procs
    finally:
        nuclei.heal(pool, nuclei.Journal("/dev/null"), nodes=inventory.names)
        stop_servers(pool, procs)


def chaos(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHAOS, *args], capture_output=True, text=True, timeout=120)


def kill_a_run_mid_fault(inventory, run_dir: Path) -> None:
    env = {**os.environ, "PYTHONPATH": f"{TESTS}{os.pathsep}{TESTS.parent}"}
    child = subprocess.Popen([sys.executable, "-c", DOOMED_RUN, str(run_dir), str(inventory.source)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = child.stdout.readline()
        assert line.strip() == "ready", child.stderr.read() if child.poll() is not None else line
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)


def test_chaos_heal_repairs_a_run_killed_during_a_partition_and_a_pause(cluster, tmp_path) -> None:
    inventory, pool, procs = cluster
    run_dir = tmp_path / "runs" / "r1"
    run_dir.mkdir(parents=True)
    # As the run lifecycle records it: the inventory inline, with the file it came from.
    record = {**inventory.model_dump(mode="json"), "source": str(inventory.source)}
    (run_dir / "run.json").write_text(json.dumps({"seed": 1, "inventory": record}))
    kill_a_run_mid_fault(inventory, run_dir)

    assert proc_state(pool, procs["n2"]) == "T", "the run died with n2 paused"
    assert reachability(inventory, pool)["n1"] == set(), "and n1 cut off"
    pending = nuclei.Journal(run_dir / "journal.jsonl").pending()
    assert sorted(e.action for e in pending) == ["drop", "drop", "drop", "pause"]

    healed = chaos("heal", "--store", str(run_dir))
    assert healed.returncode == 0, healed.stderr
    assert "n2: resumed server" in healed.stdout and "removed drop rules" in healed.stdout
    assert proc_state(pool, procs["n2"]) in ("S", "R")
    assert all(chain_is_gone(pool, node) for node in inventory.names)
    assert all(len(seen) == 2 for seen in reachability(inventory, pool).values())
    assert nuclei.Journal(run_dir / "journal.jsonl").pending() == []

    (tmp_path / "latest").symlink_to(".")  # a store whose latest campaign is this directory
    again = chaos("heal", "--store", str(tmp_path))  # every run of the latest campaign
    assert again.returncode == 0, again.stderr
    assert "resumed" not in again.stdout and "healed: 3 nodes clean" in again.stdout


def test_heal_with_only_an_inventory_resumes_stopped_processes_and_removes_chains(cluster, tmp_path) -> None:
    inventory, pool, procs = cluster
    journal = nuclei.Journal(tmp_path / "lost-journal.jsonl")
    nuclei.drop(pool, journal, "n3", [inventory.nodes[0].host])
    pool.run("n1", f"kill -STOP $(cat {procs['n1'].pidfile})")
    healed = chaos("heal", "--inventory", str(inventory.source))
    assert healed.returncode == 0, healed.stderr
    assert "n1: resumed stopped process" in healed.stdout
    wait_until(lambda: proc_state(pool, procs["n1"]) in ("S", "R"), "n1 resumed")
    assert chain_is_gone(pool, "n3")


def test_heal_names_what_is_wrong_with_its_input(cluster, tmp_path) -> None:
    inventory, _, _ = cluster
    assert "give --store RUN_DIR" in chaos("heal").stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    result = chaos("heal", "--store", str(empty))
    assert result.returncode == EXIT_ERROR and "not a run directory" in result.stderr
    nameless = tmp_path / "nameless"
    nameless.mkdir()
    (nameless / "run.json").write_text("{}")
    assert "does not name the inventory" in chaos("heal", "--store", str(nameless)).stderr
    (nameless / "journal.jsonl").write_text('{"event": "apply"\n{"event": "undo", "id": "x"}\n')
    broken = chaos("heal", "--store", str(nameless), "--inventory", str(inventory.source))
    assert broken.returncode == EXIT_ERROR and "journal.jsonl:1: malformed journal line" in broken.stderr
    assert "Traceback" not in broken.stderr


def test_a_torn_last_journal_line_is_ignored(tmp_path) -> None:
    journal = nuclei.Journal(tmp_path / "journal.jsonl")
    entry = journal.record("pause", "n1", pid=1, starttime=2)
    with journal.path.open("a") as f:
        f.write('{"event": "apply", "id": "zz-9", "act')  # the crash hit mid-append
    assert [e.id for e in nuclei.Journal(journal.path).pending()] == [entry.id]


@pytest.mark.parametrize("shape", ["path", "nested path", "inline record"])
def test_heal_finds_the_inventory_that_run_json_names(tmp_path, shape) -> None:
    from harness.commands.faults import _inventory_of_run

    path = tmp_path / "lab.yaml"
    path.write_text("name: lab\nkind: ssh\nnodes:\n  - {name: a, host: 127.0.0.2}\n  - {name: b, host: 127.0.0.3}\n")
    value = {"path": str(path), "nested path": None,
             "inline record": {"name": "lab", "kind": "ssh", "source": str(tmp_path / "gone.yaml"),
                               "nodes": [{"name": "a", "host": "127.0.0.2"}, {"name": "b", "host": "127.0.0.3"}]}}
    data = {"spec": {"inventory": str(path)}} if shape == "nested path" else {"inventory": value[shape]}
    (tmp_path / "run.json").write_text(json.dumps(data))
    assert _inventory_of_run(tmp_path).names == ["a", "b"]
