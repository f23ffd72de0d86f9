"""Process nuclei on a real namespace cluster: kill/restart and pause/resume, verified in /proc."""
from __future__ import annotations

import json

import pytest

import nuclei
from nuclei.process import Proc, inspect
from support.faults import proc_state, server_proc, start_proc, stop_servers, wait_until

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def cluster(netns_cluster):
    inventory, pool = netns_cluster
    procs = {node.name: server_proc(node) for node in inventory.nodes}
    for proc in procs.values():
        start_proc(pool, proc)
    try:
        yield inventory, pool, procs
    finally:
        stop_servers(pool, procs)


@pytest.fixture
def journal(tmp_path):
    return nuclei.Journal(tmp_path / "journal.jsonl")


def journal_lines(journal: nuclei.Journal) -> list[dict]:
    return [json.loads(line) for line in journal.path.read_text().splitlines()]


def test_kill_removes_the_process_and_restart_brings_a_new_one(cluster, journal) -> None:
    _, pool, procs = cluster
    proc = procs["n1"]
    before = inspect(pool, proc)[0]
    [entry] = nuclei.kill(pool, journal, proc)
    assert proc_state(pool, proc) is None, "the pid is gone (or a zombie) right after kill returns"
    assert entry.params["pid"] == before.pid and entry.params["signal"] == "KILL"
    assert [line["event"] for line in journal_lines(journal)] == ["apply"]

    started: list[str] = []

    def start(ref) -> None:
        started.append(ref.name)
        start_proc(pool, ref)

    after = nuclei.restart(pool, journal, entry, start=start, proc=proc)
    assert started == ["server"]
    assert after is not None and after.pid != before.pid
    assert proc_state(pool, proc) in ("S", "R")
    assert journal.pending() == []


def test_kill_with_another_signal_waits_until_the_process_exits(cluster, journal) -> None:
    _, pool, procs = cluster
    proc = procs["n2"]
    [entry] = nuclei.kill(pool, journal, proc, signal="TERM")
    assert proc_state(pool, proc) is None
    nuclei.restart(pool, journal, entry, start=lambda ref: start_proc(pool, ref))
    assert proc_state(pool, proc) in ("S", "R")


def test_pause_stops_the_process_and_resume_continues_it(cluster, journal) -> None:
    _, pool, procs = cluster
    proc = procs["n3"]
    [entry] = nuclei.pause(pool, journal, proc)
    assert proc_state(pool, proc) == "T"
    assert [e.id for e in journal.pending()] == [entry.id]
    nuclei.resume(pool, journal, entry)
    assert proc_state(pool, proc) in ("S", "R")
    nuclei.resume(pool, journal, entry)  # idempotent: a running process stays as it is
    assert journal.pending() == []


def test_heal_restarts_from_the_journal_alone(cluster, journal) -> None:
    """What `chaos heal` does after a crash: no deployer, only what the journal kept."""
    _, pool, procs = cluster
    proc = procs["n1"]
    nuclei.kill(pool, journal, proc)
    paused = nuclei.pause(pool, journal, procs["n2"])
    report = nuclei.heal(pool, nuclei.Journal(journal.path))
    assert report.ok, report.errors
    assert proc_state(pool, proc) in ("S", "R")
    assert proc_state(pool, procs["n2"]) in ("S", "R")
    assert paused and journal.pending() == []


def test_a_pidfile_naming_another_program_is_refused(cluster, journal, tmp_path) -> None:
    inventory, pool, procs = cluster
    node = inventory.nodes[0]
    stranger = Proc(node.name, "stranger", pidfile=f"{node.workdir}/stranger.pid",
                           argv=("python3", "-m", "not.this.program", node.workdir))
    # The pidfile points at n1's server, which runs a different command line.
    pool.run(node.name, f"cp {procs[node.name].pidfile} {stranger.pidfile}")
    with pytest.raises(nuclei.NucleusError, match="refusing to signal"):
        nuclei.kill(pool, journal, stranger)
    assert proc_state(pool, procs[node.name]) in ("S", "R")
    assert journal.entries() == []


def test_a_missing_process_is_reported_as_not_running(cluster, journal) -> None:
    inventory, pool, _ = cluster
    node = inventory.nodes[0]
    ghost = Proc(node.name, "ghost", pidfile=f"{node.workdir}/ghost.pid", argv=("python3", "x"))
    with pytest.raises(nuclei.ProcessNotRunning, match="ghost is not running"):
        nuclei.pause(pool, journal, ghost)


def test_a_pattern_must_name_the_node_workdir_on_a_shared_pid_namespace(cluster, journal) -> None:
    inventory, pool, procs = cluster
    node = inventory.nodes[1]
    with pytest.raises(nuclei.NucleusError, match="could match other nodes"):
        inspect(pool, Proc(node.name, "server", pattern="python3 -c import socket"))
    scoped = Proc(node.name, "server", pattern=f"{node.workdir}")
    found = inspect(pool, scoped)
    assert [state.pid for state in found] == [inspect(pool, procs[node.name])[0].pid]
    [entry] = nuclei.pause(pool, journal, scoped)
    assert proc_state(pool, procs[node.name]) == "T"
    nuclei.resume(pool, journal, entry)
    wait_until(lambda: proc_state(pool, procs[node.name]) in ("S", "R"), "resumed")


def test_a_journaled_kill_that_never_landed_heals_without_a_second_process(cluster, journal) -> None:
    """The harness died between journaling a kill and sending it: the original still runs."""
    inventory, pool, procs = cluster
    proc = procs["n3"]
    [state] = inspect(pool, proc)
    pidfile_before = pool.read_file(proc.node, proc.pidfile)
    journal.record("kill", proc.node, signal="KILL", name=proc.name, role=proc.role, pidfile=proc.pidfile,
                   pattern=None, argv=list(proc.argv), pid=state.pid, starttime=state.starttime,
                   cwd=None, env={}, logfile=proc.logfile)
    report = nuclei.heal(pool, nuclei.Journal(journal.path))
    assert report.ok, report.errors
    assert pool.read_file(proc.node, proc.pidfile) == pidfile_before
    assert [s.pid for s in inspect(pool, proc)] == [state.pid]
    [undone] = [line for line in journal_lines(journal) if line["event"] == "undo"]
    assert undone["note"]["restarted"] is False and "never delivered" in undone["note"]["reason"]
    with pytest.raises(Exception, match="names the live pid"):
        start_proc(pool, proc)  # a second start must not take over the pidfile
    assert pool.read_file(proc.node, proc.pidfile) == pidfile_before
