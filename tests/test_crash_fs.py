"""The crash file system on a real FUSE mount inside a real local node (netns + sshd).

What is written without fsync is gone after "lose unsynced", what was fsynced
survives, names follow the directory fsync, and the mount is gone after a heal,
also after the process that mounted it was SIGKILLed and `chaos heal` ran. Memory-
mapped writes (RocketMQ's commitlog, DLedger's entry files) obey the same rule: a
page msync'ed survives, a page a killed process never synced is lost.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from faults.crash import crash_fs_unavailable
from nuclei import Journal, NucleusError, heal, lazyfs
from nuclei.lazyfs_node import Dirty
from sut.deploy import ModelDeployer
from tests.conftest import require

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def node(netns_cluster):
    require(crash_fs_unavailable() is None, f"needs FUSE: {crash_fs_unavailable()}")
    inventory, pool = netns_cluster
    return inventory, pool, inventory.nodes[0]


@pytest.fixture
def mounted(node, tmp_path):
    """A fresh lazyfs on the node's data root; unmounted (and verified) after the test."""
    inventory, pool, target = node
    journal = Journal(tmp_path / "journal.jsonl")
    mountpoint = f"{target.workdir}/data"
    entry = lazyfs.mount(pool, journal, target.name, target.workdir, mountpoint)
    yield pool, target, mountpoint, journal
    report = heal(pool, journal, unmount=True)
    assert report.ok, report.errors
    assert not lazyfs.mounted(pool, target.name, target.workdir, mountpoint)
    assert not lazyfs.daemon_running(pool, target.name, target.workdir, mountpoint)
    assert entry.id not in {e.id for e in journal.pending()}


def on_node(pool, target, code: str, *args: str) -> str:
    """Run a Python snippet on the node (in its mount namespace, where the lazyfs is)."""
    result = pool.run(target.name, ["python3", "-c", textwrap.dedent(code), *args], check=False)
    assert result.exited == 0, result.stderr
    return result.stdout.strip()


WRITE = """
import os, sys
root, name, data, sync = sys.argv[1], sys.argv[2], sys.argv[3].encode(), sys.argv[4] == "sync"
with open(os.path.join(root, name), "ab") as f:
    f.write(data)
    f.flush()
    if sync:
        os.fsync(f.fileno())
"""

FSYNC_DIR = """
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.fsync(fd)
os.close(fd)
"""

LIST = """
import json, os, sys
root = sys.argv[1]
print(json.dumps({n: open(os.path.join(root, n), "rb").read().decode() for n in sorted(os.listdir(root))}))
"""


def listing(pool, target, directory: str) -> dict[str, str]:
    return json.loads(on_node(pool, target, LIST, directory))


def test_data_written_without_fsync_is_gone_after_lose_unsynced(mounted):
    pool, target, mp, _ = mounted
    on_node(pool, target, WRITE, mp, "log", "durable-", "sync")
    on_node(pool, target, FSYNC_DIR, mp)
    on_node(pool, target, WRITE, mp, "log", "volatile", "nosync")
    assert listing(pool, target, mp) == {"log": "durable-volatile"}  # reads see unsynced data
    assert lazyfs.status(pool, target.name, target.workdir, mp)["unsynced_bytes"] == len("volatile")
    lost = lazyfs.lose_unsynced(pool, target.name, target.workdir, mp)
    assert lost["unsynced_files"] == 1 and lost["unsynced_bytes"] == len("volatile")
    assert listing(pool, target, mp) == {"log": "durable-"}


def test_data_written_with_fsync_survives_a_loss(mounted):
    pool, target, mp, _ = mounted
    on_node(pool, target, WRITE, mp, "a", "first", "sync")
    on_node(pool, target, WRITE, mp, "b", "second", "sync")
    on_node(pool, target, FSYNC_DIR, mp)
    lazyfs.lose_unsynced(pool, target.name, target.workdir, mp)
    assert listing(pool, target, mp) == {"a": "first", "b": "second"}
    assert lazyfs.status(pool, target.name, target.workdir, mp)["unsynced_files"] == 0


def test_a_created_file_survives_only_once_its_directory_is_fsynced(mounted):
    pool, target, mp, _ = mounted
    on_node(pool, target, WRITE, mp, "orphan", "data", "sync")  # data synced, name not
    on_node(pool, target, WRITE, mp, "named", "", "nosync")
    on_node(pool, target, FSYNC_DIR, mp)                         # both names durable now
    on_node(pool, target, WRITE, mp, "late", "x", "sync")        # name never synced
    lazyfs.lose_unsynced(pool, target.name, target.workdir, mp)
    assert listing(pool, target, mp) == {"named": "", "orphan": "data"}


def test_a_rename_is_durable_only_after_the_directory_fsync(mounted):
    pool, target, mp, _ = mounted
    on_node(pool, target, WRITE, mp, "state.tmp", "v1", "sync")
    on_node(pool, target, "import os, sys; os.replace(sys.argv[1] + '/state.tmp', sys.argv[1] + '/state')", mp)
    on_node(pool, target, FSYNC_DIR, mp)
    on_node(pool, target, WRITE, mp, "state.tmp", "v2", "sync")
    on_node(pool, target, "import os, sys; os.replace(sys.argv[1] + '/state.tmp', sys.argv[1] + '/state')", mp)
    assert listing(pool, target, mp) == {"state": "v2"}
    lazyfs.lose_unsynced(pool, target.name, target.workdir, mp)
    # Neither the second create nor its rename was made durable: the old state comes back.
    assert listing(pool, target, mp) == {"state": "v1"}


def test_a_new_directory_and_its_files_need_both_directory_fsyncs(mounted):
    pool, target, mp, _ = mounted
    on_node(pool, target, "import os, sys; os.makedirs(sys.argv[1] + '/d1/d2')", mp)
    on_node(pool, target, WRITE, f"{mp}/d1/d2", "f", "kept", "sync")
    for directory in (mp, f"{mp}/d1", f"{mp}/d1/d2"):
        on_node(pool, target, FSYNC_DIR, directory)
    on_node(pool, target, "import os, sys; os.makedirs(sys.argv[1] + '/gone')", mp)
    lazyfs.lose_unsynced(pool, target.name, target.workdir, mp)
    assert on_node(pool, target, "import os, sys; print(sorted(os.listdir(sys.argv[1])))", mp) == "['d1']"
    assert listing(pool, target, f"{mp}/d1/d2") == {"f": "kept"}


def test_truncation_and_overwrites_are_lost_like_writes(mounted):
    pool, target, mp, _ = mounted
    on_node(pool, target, WRITE, mp, "seg", "0123456789", "sync")
    on_node(pool, target, FSYNC_DIR, mp)
    on_node(pool, target, """
import os, sys
fd = os.open(sys.argv[1] + '/seg', os.O_RDWR)
os.ftruncate(fd, 4); os.pwrite(fd, b'AB', 6)
os.close(fd)
""", mp)
    assert listing(pool, target, mp) == {"seg": "0123\0\0AB"}
    lazyfs.lose_unsynced(pool, target.name, target.workdir, mp)
    assert listing(pool, target, mp) == {"seg": "0123456789"}


# A process that maps a durable two-page file MAP_SHARED (as a MappedByteBuffer does),
# writes page 0 and msyncs it (mmap.flush, as MappedByteBuffer.force() does), writes
# page 1, asks the crash file system's status (written back first, as a crash fault
# does) while its mapping is live, and dies by SIGKILL without syncing page 1: a JVM
# crashed between flushes.
MMAP_THEN_DIE = """
import json, mmap, os, signal, subprocess, sys
path, status, page = sys.argv[1], json.loads(sys.argv[2]), mmap.PAGESIZE
with open(path, "r+b") as f:
    m = mmap.mmap(f.fileno(), 2 * page, mmap.MAP_SHARED)
    m[0:6] = b"synced"
    m.flush(0, page)
    m[page:page + 8] = b"volatile"
    print(subprocess.run(status, capture_output=True, text=True, check=True).stdout, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""

PAGES = """
import mmap, sys
data = open(sys.argv[1], "rb").read()
print(repr((len(data), data[:6], data[mmap.PAGESIZE:mmap.PAGESIZE + 8])))
"""


def test_a_mapped_page_survives_the_crash_only_if_it_was_msynced(mounted):
    pool, target, mp, _ = mounted
    page = int(on_node(pool, target, "import mmap; print(mmap.PAGESIZE)"))
    on_node(pool, target, "import os, sys; f = open(sys.argv[1], 'wb'); f.write(bytes(int(sys.argv[2]))); "
            "f.flush(); os.fsync(f.fileno())", f"{mp}/seg", str(2 * page))
    on_node(pool, target, FSYNC_DIR, mp)
    assert lazyfs.status(pool, target.name, target.workdir, mp)["unsynced_bytes"] == 0
    status = lazyfs._program(target.workdir, "status", mp, "--writeback")
    died = pool.run(target.name, ["python3", "-c", MMAP_THEN_DIE, f"{mp}/seg", json.dumps(status)], check=False)
    assert died.exited != 0, (died.exited, died.stdout, died.stderr)
    # While the writer lived, its dirty page was written back on request and counted as
    # unsynced; after its death (written back on its last close too) it still is, and
    # readers see it until the crash.
    assert json.loads(died.stdout)["unsynced_by_dir"] == {".": page}
    assert lazyfs.status(pool, target.name, target.workdir, mp)["unsynced_bytes"] >= len("volatile")
    assert on_node(pool, target, PAGES, f"{mp}/seg") == repr((2 * page, b"synced", b"volatile"))
    lazyfs.lose_unsynced(pool, target.name, target.workdir, mp)
    assert on_node(pool, target, PAGES, f"{mp}/seg") == repr((2 * page, b"synced", bytes(8)))


def test_the_mount_is_gone_after_chaos_heal_when_the_harness_was_killed(node, tmp_path):
    inventory, pool, target = node
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    mountpoint = f"{target.workdir}/data"
    # A harness that mounts, journals it, and dies by SIGKILL before it can clean up.
    script = textwrap.dedent(f"""
        import os, signal
        from inventory import load, Pool
        from nuclei import Journal, lazyfs
        inventory = load({str(inventory.source)!r})
        with Pool(inventory) as pool:
            lazyfs.mount(pool, Journal({str(run_dir / 'journal.jsonl')!r}), {target.name!r},
                         {target.workdir!r}, {mountpoint!r})
            os.kill(os.getpid(), signal.SIGKILL)
    """)
    killed = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True,
                            timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert lazyfs.mounted(pool, target.name, target.workdir, mountpoint)
    # The run's SUT keeps its data on the crash file system: the heal must stop it, not pull
    # the file system from under it.
    single = inventory.model_copy(update={"nodes": [target]})
    deployer = ModelDeployer(pool, single, "single-broker", run_dir, timing="fast")
    (run_dir / "run.json").write_text(json.dumps({"spec": {"profile": "single-broker", "timing": "fast"}}))
    try:
        deployer.install()
        deployer.start()
        deployer.wait_healthy(60)
        broker = next(ref for ref in deployer.refs if ref.role == "broker")
        assert broker.data_dir.startswith(mountpoint)
        chaos = shutil.which("chaos", path=os.path.dirname(sys.executable)) or "chaos"
        healed = subprocess.run([chaos, "heal", "--store", str(run_dir), "--inventory", str(inventory.source)],
                                cwd=REPO, capture_output=True, text=True, timeout=180)
        assert healed.returncode == 0, healed.stdout + healed.stderr
        assert not sut_running(broker)
        assert "stopped its SUT" in healed.stdout and "unmounted the crash file system" in healed.stdout
        assert not lazyfs.mounted(pool, target.name, target.workdir, mountpoint)
        assert not lazyfs.daemon_running(pool, target.name, target.workdir, mountpoint)
    finally:
        deployer.stop()


def sut_running(ref) -> bool:
    """Whether a deployed SUT process still runs: an argv word is its config path (the local
    nodes share this host's PID namespace; its pidfile was on the unmounted file system)."""
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if ref.config_path.encode() in argv and b"sut" in argv:
            return True
    return False


def test_dirty_ranges_merge_into_disjoint_sorted_ranges():
    dirty = Dirty()
    for start, end in [(10, 20), (30, 40), (18, 31), (50, 60), (0, 5), (5, 6)]:
        dirty.write(start, end)
    assert dirty.ranges == [(0, 6), (10, 40), (50, 60)]
    dirty.truncate(55)
    assert dirty.ranges == [(0, 6), (10, 40), (50, 55)] and dirty.min_size == 55
    assert dirty.bytes == 6 + 30 + 5


def test_chaos_heal_with_only_the_inventory_unmounts_a_left_over_crash_fs(node, tmp_path):
    inventory, pool, target = node
    mountpoint = lazyfs.data_mountpoint(target.workdir)
    lazyfs.mount(pool, Journal(tmp_path / "lost-journal.jsonl"), target.name, target.workdir, mountpoint)
    chaos = shutil.which("chaos", path=os.path.dirname(sys.executable)) or "chaos"
    healed = subprocess.run([chaos, "heal", "--inventory", str(inventory.source)], cwd=REPO,
                            capture_output=True, text=True, timeout=180)
    assert healed.returncode == 0, healed.stdout + healed.stderr
    assert f"{target.name}: unmounted the crash file system at {mountpoint}" in healed.stdout
    assert not lazyfs.mounted(pool, target.name, target.workdir, mountpoint)
    assert not lazyfs.daemon_running(pool, target.name, target.workdir, mountpoint)


def test_a_mountpoint_that_cannot_be_made_is_a_one_line_error_and_nothing_is_mounted(node, tmp_path):
    inventory, pool, target = node
    journal = Journal(tmp_path / "journal.jsonl")
    not_a_dir = f"{target.workdir}/a-file"
    pool.run(target.name, f"touch {not_a_dir}")
    try:
        with pytest.raises(NucleusError, match=f"node {target.name}: cannot make the lazyfs mountpoint "
                                               f"{not_a_dir}/data: .*Not a directory"):
            lazyfs.mount(pool, journal, target.name, target.workdir, f"{not_a_dir}/data")
    finally:
        pool.run(target.name, f"rm -f {not_a_dir}")
    assert not journal.entries()  # refused before anything was journaled or started
    assert not lazyfs.daemon_running(pool, target.name, target.workdir, f"{not_a_dir}/data")


def test_the_next_runs_clean_up_unmounts_what_a_killed_harness_left(node, tmp_path, monkeypatch):
    """A run's harness dies by SIGKILL during a crash fault; the next run's stale clean-up
    (no `chaos heal` by hand) leaves no FUSE mount and no daemon."""
    from harness.stale import clean_up_stale

    inventory, pool, target = node
    home, run_dir = tmp_path / "home", tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps({
        "status": "running", "cluster": {"source": "inventory", "file": str(inventory.source)},
        "spec": {"profile": "single-broker", "timing": "fast"}}))
    mountpoint = lazyfs.data_mountpoint(target.workdir)
    script = textwrap.dedent(f"""
        import os, signal
        from harness.stale import take_lease
        from inventory import load, Pool
        from nuclei import Journal, lazyfs
        assert take_lease({str(run_dir)!r}) is not None
        with Pool(load({str(inventory.source)!r})) as pool:
            lazyfs.mount(pool, Journal({str(run_dir / 'journal.jsonl')!r}), {target.name!r},
                         {target.workdir!r}, {mountpoint!r})
            os.kill(os.getpid(), signal.SIGKILL)
    """)
    killed = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True,
                            timeout=120, env={**os.environ, "CHAOS_HOME": str(home)})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    try:
        assert lazyfs.mounted(pool, target.name, target.workdir, mountpoint)
        monkeypatch.setenv("CHAOS_HOME", str(home))
        [line] = clean_up_stale(lambda _line: None)
        assert "faults healed and the SUT stopped" in line, line
        assert not lazyfs.mounted(pool, target.name, target.workdir, mountpoint)
        assert not lazyfs.daemon_running(pool, target.name, target.workdir, mountpoint)
    finally:
        lazyfs.sweep(pool, target.name, target.workdir)


def test_a_torn_crash_leaves_a_partial_record_and_says_where(mounted):
    pool, target, mp, _ = mounted
    on_node(pool, target, WRITE, mp, "log", "synced|", "sync")
    on_node(pool, target, FSYNC_DIR, mp)
    on_node(pool, target, WRITE, mp, "log", "record-one|record-two|", "nosync")
    lost = lazyfs.lose_unsynced(pool, target.name, target.workdir, mp, torn_seed=11)
    [torn] = lost["torn"]
    assert lost["torn_seed"] == 11 and torn["file"] == "log" and torn["offset"] == len("synced|")
    kept = torn["bytes_kept"]
    assert 1 <= kept < len("record-one|record-two|") and kept + torn["bytes_lost"] == len("record-one|record-two|")
    assert listing(pool, target, mp) == {"log": "synced|record-one|record-two|"[:len("synced|") + kept]}
    assert lazyfs.status(pool, target.name, target.workdir, mp)["unsynced_files"] == 0
