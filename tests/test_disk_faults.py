"""Disk faults through the crash file system: which files a rule hits, each fault applied
to a real FUSE mount on a local node and healed with nothing left, and a disk-full run
on single-broker-sync whose refused sends are recorded as DISK_FULL failures."""
from __future__ import annotations

import errno
import json
import random
import textwrap
import time

import pytest
from rich.console import Console

from faults import registry
from faults.context import FaultContext, FaultError
from faults.crash import crash_fs_unavailable
from harness.run import RunLifecycle
from harness.spec import build_spec
from nuclei import Journal, diskfault, heal, lazyfs
from nuclei.diskfault_node import DiskFaults, check_rule, file_kind
from tests.conftest import require
from workloads.history import read_history


@pytest.mark.parametrize("path, kind", [
    ("/broker-a-0/store/commitlog/00000000000000000000", "commitlog"),
    ("/broker-a-0/store/consumequeue/t/0/00000000000000000000", "consumequeue"),
    ("/n1/raftstore/log", "raftlog"),
    ("/broker-a-0/store/dledger-n0/data/00000000000000000000", "raftlog"),
    ("/broker-a-0/store/config/topics.json", "metadata"),
    ("/broker-a-0/checkpoint", "metadata"),
])
def test_each_file_of_the_store_has_its_kind(path, kind):
    assert file_kind(path) == kind


def test_a_rule_hits_only_its_operations_and_files():
    faults = DiskFaults()
    faults.set([{"kind": "error", "ops": ["fsync"], "files": ["commitlog"]}])
    faults.check("write", "/b/commitlog/0")
    faults.check("fsync", "/b/consumequeue/t/0/0")
    with pytest.raises(OSError) as caught:
        faults.check("fsync", "/b/commitlog/0")
    assert caught.value.errno == errno.EIO
    assert faults.clear() == {"error:fsync": 1} and faults.status()["rules"] == []
    faults.check("fsync", "/b/commitlog/0")


@pytest.mark.parametrize("rule", [{"kind": "melt"}, {"kind": "error", "ops": ["stat"]},
                                  {"kind": "error", "files": ["swap"]}, {"kind": "slow", "delay_ms": 60_000}])
def test_a_bad_rule_is_refused_with_what_is_wrong(rule):
    with pytest.raises(ValueError):
        check_rule(rule)


def test_a_bad_option_is_refused_before_anything_starts():
    with pytest.raises(FaultError, match="ops=.*'stat' is not one of read, write, fsync"):
        registry.create("random-disk-error", ops="read,stat")
    assert registry.create("random-disk-slow", delay_ms="20", ops="fsync").rules() == [
        {"kind": "slow", "ops": ["fsync"], "files": ["all"], "delay_ms": 20}]


@pytest.mark.parametrize("ratio, name", [("0.93", "DISK_FULL (SERVICE_NOT_AVAILABLE)"), ("0.12", "SERVICE_NOT_AVAILABLE")])
def test_real_rocketmq_names_a_send_refused_for_a_full_disk(ratio, name):
    from sut.rocketmq.driver import DriverError, classify_error, error_text
    exc = DriverError({"class": "MQBrokerException", "code": 14, "message": (
        "CODE: 14  DESC: service not available now. It may be caused by one of the following reasons: "
        f"the broker's disk is full [CL:  {ratio} CQ:  {ratio} INDEX:  {ratio}], messages are put to the slave")})
    assert classify_error(exc) == "fail" and error_text(exc).startswith(f"{name}: ")


# -- on a real mount ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def node(netns_cluster):
    require(crash_fs_unavailable() is None, f"needs FUSE: {crash_fs_unavailable()}")
    inventory, pool = netns_cluster
    return inventory, pool, inventory.nodes[0]


# One write, fsync and read of a commitlog file and a statfs on the node: errno or "ok"
# per step, the seconds each took, and the free blocks statfs showed.
PROBE = """
import errno, json, os, sys, time
root = sys.argv[1]; os.makedirs(root + "/b/commitlog", exist_ok=True)
out = {}
def step(name, call):
    t = time.monotonic()
    try:
        call(); out[name] = "ok"
    except OSError as e:
        out[name] = errno.errorcode[e.errno]
    out[name + "_s"] = time.monotonic() - t
fd = os.open(root + "/b/commitlog/0", os.O_RDWR | os.O_CREAT)
step("write", lambda: os.pwrite(fd, b"x" * 100, 0))
step("fsync", lambda: os.fsync(fd))
step("read", lambda: os.pread(fd, 10, 0))
os.close(fd)
out["bfree"] = os.statvfs(root).f_bfree
print(json.dumps(out))
"""


def probe(pool, target, mountpoint):
    result = pool.run(target.name, ["python3", "-c", textwrap.dedent(PROBE), mountpoint], check=False)
    assert result.exited == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="class")
def mounted(node, tmp_path_factory):
    """One crash file system on the node's data root for the class; unmounted, verified, after it."""
    inventory, pool, target = node
    journal = Journal(tmp_path_factory.mktemp("disk") / "journal.jsonl")
    mountpoint = lazyfs.data_mountpoint(target.workdir)
    lazyfs.mount(pool, journal, target.name, target.workdir, mountpoint)
    before = probe(pool, target, mountpoint)  # also makes the file the faults hit
    assert (before["write"], before["fsync"], before["read"]) == ("ok", "ok", "ok")
    yield journal, mountpoint
    report = heal(pool, journal, unmount=True)
    assert report.ok, report.errors
    assert not lazyfs.mounted(pool, target.name, target.workdir, mountpoint)
    assert not lazyfs.daemon_running(pool, target.name, target.workdir, mountpoint)
    assert journal.pending() == []


class TestOnARealMount:
    @pytest.mark.parametrize("fault, options, expect", [
        ("fixed-disk-full", {}, {"write": "ENOSPC", "fsync": "ok", "read": "ok", "bfree": 0}),
        ("fixed-disk-error", {"ops": "fsync,read"}, {"write": "ok", "fsync": "EIO", "read": "EIO"}),
        ("fixed-disk-slow", {"delay_ms": "300", "ops": "write"}, {"write": "ok", "fsync": "ok", "read": "ok"}),
    ])
    def test_each_disk_fault_acts_and_its_stop_leaves_nothing(self, node, mounted, fault, options, expect):
        inventory, pool, target = node
        journal, mountpoint = mounted
        ctx = FaultContext(pool=pool, nodes=inventory.nodes, rng=random.Random(1), journal=journal)
        nemesis = registry.create(fault, targets=target.name, **options)
        applied = nemesis.start(ctx)
        assert applied.targets == [target.name]
        during = probe(pool, target, mountpoint)
        assert {k: during[k] for k in expect} == expect, during
        if fault.endswith("slow"):
            assert during["write_s"] >= 0.3 and during["read_s"] < 0.3, during
        nemesis.stop(ctx, applied)
        after = probe(pool, target, mountpoint)
        assert (after["write"], after["fsync"], after["read"]) == ("ok", "ok", "ok") and after["bfree"] > 0
        assert diskfault.status(pool, target.name, target.workdir, mountpoint)["rules"] == []
        assert not [e for e in journal.pending() if e.action == diskfault.ACTION]

    def test_heal_clears_a_disk_fault_a_dead_run_left(self, node, mounted):
        inventory, pool, target = node
        journal, mountpoint = mounted
        diskfault.apply(pool, journal, target.name, target.workdir, mountpoint, [{"kind": "full"}])
        report = heal(pool, Journal(journal.path))  # a new harness reading the journal
        assert report.ok and any("cleared the disk faults" in line for line in report.done), report
        assert probe(pool, target, mountpoint)["write"] == "ok"


# -- a run ----------------------------------------------------------------------------------------

def test_a_disk_full_run_on_single_broker_sync_is_valid_with_its_refused_sends_failed(node, tmp_path):
    inventory, _, _ = node
    spec = build_spec({"workload": "queue", "time": 14, "interval": 5, "recovery": 8, "seed": 44, "rate": 30,
                       "inventory": inventory.source, "store": tmp_path / "store",
                       "profile": "single-broker-sync", "faults": ["random-disk-full"], "targets": ["brokers"]})
    started = time.monotonic()
    outcome = RunLifecycle(spec, Console(stderr=True, force_terminal=False), show_progress=False).execute()
    assert outcome.status == "complete", outcome.error
    run_dir = outcome.run.path
    sends = [ev for ev in read_history(run_dir) if ev["f"] == "send" and ev["type"] in ("ok", "fail", "info")]
    full = [ev for ev in sends if "DISK_FULL" in json.dumps(ev)]
    assert full and all(ev["type"] == "fail" for ev in full), full[:3]
    assert any(ev["type"] == "ok" for ev in sends)
    assert outcome.valid is True, json.loads((run_dir / "results.json").read_text())["checkers"]
    journal = [json.loads(line) for line in (run_dir / "journal.jsonl").read_text().splitlines()]
    applied = {e["id"] for e in journal if e["event"] == "apply"}
    assert {e["action"] for e in journal if e["event"] == "apply"} >= {"mount", "disk-fault"}
    assert applied == {e["id"] for e in journal if e["event"] == "undo"}
    for target in inventory.nodes:
        assert not lazyfs.mounted(_pool(node), target.name, target.workdir, lazyfs.data_mountpoint(target.workdir))
    print(f"disk-full run: {time.monotonic() - started:.1f} s")


def _pool(node):
    return node[1]
