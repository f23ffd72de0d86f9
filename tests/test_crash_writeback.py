"""Kernel-like writeback (`dirty_expire=S`) and power-cycle disk reset (`reset_disk=true`)
of the crash faults.

The flusher's model (nuclei.lazyfs_node.CrashState.write_back_expired) is driven the way
the FUSE layer drives it, on a real directory, with explicit times; the options are
checked before anything starts; then on a real FUSE mount inside a local node: a file
written without fsync survives a `lose` S seconds later only with `--dirty-expire S`, and
a crash with `reset_disk=true` clears an injected fsync error that its disk fault's own
stop then finds already gone.
"""
from __future__ import annotations

import os
import random
import threading
import time

import pytest
from click.testing import CliRunner

from faults import registry
from faults.context import FaultContext, FaultError
from faults.crash import crash_fs_unavailable, run_dirty_expire
from harness.cli import EXIT_ERROR, cli
from nuclei import Journal, diskfault, heal, lazyfs
from nuclei.lazyfs_node import CrashState, start_flusher
from tests.conftest import require
from tests.test_crash_fs import WRITE, listing, on_node
from tests.test_disk_faults import probe

S = 30.0


# -- the flusher's model, no FUSE ------------------------------------------------------------

def write(state: CrashState, name: str, data: bytes, offset: int = 0) -> None:
    """What the FUSE layer does for a create (if new) and a write of `name` under the mount."""
    live = state.path(name)
    new = not os.path.exists(live)
    fd = os.open(live, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fid = state.fid(live, new=new)
        if new:
            state.entry_changed(name)
        os.pwrite(fd, data, offset)
        state.wrote(fid, offset, offset + len(data))
    finally:
        os.close(fd)


def mkdir(state: CrashState, name: str) -> None:
    os.mkdir(state.path(name))
    state.fid(state.path(name), new=True)
    state.entry_changed(name)


def after_loss(state: CrashState) -> dict[str, bytes]:
    """Every file of the tree after a crash now, by its path under the mount."""
    state.lose()
    found = {}
    for here, _dirs, files in os.walk(state.live):
        for name in files:
            path = os.path.join(here, name)
            found[os.path.relpath(path, state.live)] = open(path, "rb").read()
    return found


def dirtied_at(state: CrashState, name: str) -> float:
    return state.dirtied_when[state.fids[os.lstat(state.path(name)).st_ino]]


def test_a_file_dirty_for_s_seconds_is_durable_after_a_tick_and_a_younger_one_is_not(tmp_path):
    state = CrashState(str(tmp_path / "state"), dirty_expire=S)
    write(state, "old", b"written back")
    write(state, "young", b"still dirty")
    t0 = dirtied_at(state, "old")
    state.dirtied_when[state.fids[os.lstat(state.path("young")).st_ino]] = t0 + 10
    assert state.write_back_expired(now=t0 + S - 0.1) == {"files": 0, "dirs": 0}
    assert state.write_back_expired(now=t0 + S) == {"files": 1, "dirs": 1}  # and the root's new entries
    assert state.status()["unsynced_files"] == 1
    assert state.status()["written_back"] == {"files": 1, "dirs": 1}
    assert after_loss(state) == {"old": b"written back", "young": b""}  # young's name is durable, its data not


def test_directory_entries_changed_s_seconds_ago_are_durable_and_younger_ones_are_not(tmp_path):
    state = CrashState(str(tmp_path / "state"), dirty_expire=S)
    mkdir(state, "/store")
    write(state, "/store/commitlog", b"log")
    last = max([*state.dir_dirtied_when.values(), *state.dirtied_when.values()])
    assert state.write_back_expired(now=last + S) == {"files": 1, "dirs": 2}  # the root and store/
    write(state, "/store/late", b"x")       # store/ dirty again, from now
    os.rename(state.path("/store/commitlog"), state.path("/store/renamed"))
    state.entry_changed("/store/commitlog")
    state.entry_changed("/store/renamed")
    assert state.write_back_expired(now=time.monotonic() + S - 1) == {"files": 0, "dirs": 0}
    assert after_loss(state) == {"store/commitlog": b"log"}  # the rename and the new name were young


def test_a_file_dirtied_again_after_its_writeback_waits_s_seconds_again(tmp_path):
    state = CrashState(str(tmp_path / "state"), dirty_expire=S)
    write(state, "log", b"first")
    state.write_back_expired(now=time.monotonic() + S)
    assert state.dirtied_when == {} and state.dir_dirtied_when == {}
    write(state, "log", b"-second", offset=5)
    again = dirtied_at(state, "log")
    write(state, "log", b"-third", offset=12)     # still dirty: its clock does not restart
    assert dirtied_at(state, "log") == again
    assert state.write_back_expired(now=again + S - 0.1)["files"] == 0
    assert after_loss(state) == {"log": b"first"}
    write(state, "log", b"-second", offset=5)
    assert state.write_back_expired(now=dirtied_at(state, "log") + S)["files"] == 1
    assert after_loss(state) == {"log": b"first-second"}


def test_a_file_or_directory_gone_before_its_writeback_is_forgotten_without_error(tmp_path):
    state = CrashState(str(tmp_path / "state"), dirty_expire=S)
    mkdir(state, "/d")
    write(state, "/d/gone", b"x")
    state.forget(state.path("/d/gone"))
    os.unlink(state.path("/d/gone"))
    os.rmdir(state.path("/d"))
    state.entry_changed("/d")
    assert state.write_back_expired(now=time.monotonic() + S) == {"files": 0, "dirs": 1}  # the root only
    assert state.dirtied_when == {} and state.dir_dirtied_when == {}
    assert after_loss(state) == {}


def test_without_dirty_expire_nothing_is_tracked_or_written_back(tmp_path):
    state = CrashState(str(tmp_path / "state"))
    write(state, "log", b"volatile")
    assert state.write_back_expired(now=time.monotonic() + 3600) == {"files": 0, "dirs": 0}
    assert state.dir_dirtied_when == {}
    assert state.status()["dirty_expire_s"] is None
    assert start_flusher(state, threading.Event()) is None
    assert after_loss(state) == {}


def test_the_flusher_thread_writes_back_and_stops_when_told(tmp_path):
    state = CrashState(str(tmp_path / "state"), dirty_expire=0.1)
    stop = threading.Event()
    flusher = start_flusher(state, stop)
    with state.lock:
        write(state, "log", b"data")
    deadline = time.monotonic() + 5
    while state.status()["written_back"]["files"] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    flusher.join(timeout=5)
    assert not flusher.is_alive()
    assert after_loss(state) == {"log": b"data"}


# -- the options -----------------------------------------------------------------------------

@pytest.mark.parametrize("value, why", [("0", "0 s is out of range"), ("-5", "-5 s is out of range"),
                                        ("3601", "3601 s is out of range"), ("nan", "out of range"),
                                        ("soon", "valid number")])
def test_a_bad_dirty_expire_is_refused_with_what_is_allowed(value, why):
    with pytest.raises(FaultError, match=rf"fault leader-crash: option dirty_expire='{value}': .*{why}.*"
                                         r"allowed: seconds in \(0, 3600\]"):
        registry.create("leader-crash", dirty_expire=value)


def test_crash_options_are_typed():
    crash = registry.create("fixed-crash", targets="n1", dirty_expire="30", reset_disk="true")
    assert (crash.dirty_expire, crash.reset_disk) == (30.0, True)
    assert registry.create("random-crash").dirty_expire is None
    with pytest.raises(FaultError, match="reset_disk='maybe'.*boolean"):
        registry.create("random-crash", reset_disk="maybe")


def test_the_run_mounts_the_one_dirty_expire_its_crash_faults_agree_on():
    assert run_dirty_expire(["random-kill", "random-disk-error"]) is None
    assert run_dirty_expire(["leader-crash:dirty_expire=30", "random-crash:dirty_expire=30.0",
                             "random-disk-full"]) == 30.0
    for faults, shown in ((["leader-crash:dirty_expire=30", "random-crash"], r"30 s and unset: strict"),
                          (["random-crash:dirty_expire=5", "random-crash:dirty_expire=30"], r"5 s and 30 s")):
        with pytest.raises(FaultError, match=rf"faults {faults[0]} and {faults[1]} disagree on dirty_expire "
                                             rf"\({shown}\)"):
            run_dirty_expire(faults)


def test_a_run_whose_crash_faults_disagree_is_one_line_and_nothing_starts(tmp_path):
    require(crash_fs_unavailable() is None, f"needs FUSE: {crash_fs_unavailable()}")
    store = tmp_path / "store"
    result = CliRunner().invoke(cli, ["run", "--profile", "single-broker-sync", "--fault",
                                      "leader-crash:dirty_expire=30", "--overlap", "random-crash",
                                      "--store", str(store)])
    assert result.exit_code == EXIT_ERROR, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: faults leader-crash:dirty_expire=30 and random-crash "
                                                   "disagree on dirty_expire"), lines
    assert not store.exists()


# -- on a real mount ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def node(netns_cluster):
    require(crash_fs_unavailable() is None, f"needs FUSE: {crash_fs_unavailable()}")
    inventory, pool = netns_cluster
    return inventory, pool, inventory.nodes[0]


def mount(node, tmp_path, dirty_expire):
    inventory, pool, target = node
    journal = Journal(tmp_path / "journal.jsonl")
    mountpoint = lazyfs.data_mountpoint(target.workdir)
    entry = lazyfs.mount(pool, journal, target.name, target.workdir, mountpoint, dirty_expire=dirty_expire)
    assert entry.params["dirty_expire_s"] == dirty_expire
    return journal, mountpoint


def heal_all(node, journal, mountpoint):
    inventory, pool, target = node
    report = heal(pool, journal, unmount=True)
    assert report.ok, report.errors
    assert not lazyfs.mounted(pool, target.name, target.workdir, mountpoint)
    assert not lazyfs.daemon_running(pool, target.name, target.workdir, mountpoint)
    assert journal.pending() == []


@pytest.mark.parametrize("dirty_expire", [None, 1.0])
def test_a_file_never_fsynced_survives_a_crash_s_seconds_later_only_with_dirty_expire(node, tmp_path, dirty_expire):
    inventory, pool, target = node
    journal, mp = mount(node, tmp_path, dirty_expire)
    try:
        on_node(pool, target, WRITE, mp, "topics.json", "{topics}", "nosync")
        if dirty_expire is None:
            time.sleep(2.0)
        else:  # the flusher wakes every second: written back within 2 s
            deadline = time.monotonic() + 5
            while lazyfs.status(pool, target.name, target.workdir, mp)["written_back"]["files"] == 0:
                assert time.monotonic() < deadline, "the flusher wrote nothing back"
                time.sleep(0.2)
        status = lazyfs.status(pool, target.name, target.workdir, mp)
        assert status["dirty_expire_s"] == dirty_expire
        lazyfs.lose_unsynced(pool, target.name, target.workdir, mp)
        expected = {} if dirty_expire is None else {"topics.json": "{topics}"}
        assert listing(pool, target, mp) == expected
    finally:
        heal_all(node, journal, mp)


def test_a_crash_with_reset_disk_clears_an_injected_fsync_error_and_the_disk_fault_still_stops(node, tmp_path):
    inventory, pool, target = node
    journal, mp = mount(node, tmp_path, None)
    try:
        ctx = FaultContext(pool=pool, nodes=inventory.nodes, rng=random.Random(1), journal=journal)
        disk = registry.create("fixed-disk-error", targets=target.name, ops="fsync")
        disk_applied = disk.start(ctx)
        assert probe(pool, target, mp)["fsync"] == "EIO"
        crash = registry.create("fixed-crash", targets=target.name, reset_disk="true")
        crashed = crash.start(ctx)
        reset = crashed.details["disk_reset"][target.name]
        assert reset["rules"][0]["ops"] == ["fsync"] and reset["hits"] == {"error:fsync": 1}
        assert crashed.details["dirty_expire_s"] is None
        after = probe(pool, target, mp)
        assert (after["write"], after["fsync"], after["read"]) == ("ok", "ok", "ok")
        disk.stop(ctx, disk_applied)        # finds nothing left, marks its entry undone
        crash.stop(ctx, crashed)
        assert [e.action for e in journal.pending()] == ["mount"]
        assert diskfault.status(pool, target.name, target.workdir, mp)["rules"] == []
    finally:
        heal_all(node, journal, mp)
