"""Crash faults are refused before a run starts where FUSE cannot mount: one line, nothing made."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from faults import crash
from harness.cli import EXIT_ERROR, cli


@pytest.mark.parametrize("missing,reason", [
    ("root", "crash faults need root"),
    ("fuse", "crash faults need /dev/fuse"),
])
def test_a_crash_fault_without_fuse_is_a_one_line_error_and_nothing_starts(tmp_path, monkeypatch, missing, reason):
    if missing == "root":
        monkeypatch.setattr(crash.os, "geteuid", lambda: 1000)
    else:
        real_exists = crash.os.path.exists
        monkeypatch.setattr(crash.os.path, "exists", lambda p: p != "/dev/fuse" and real_exists(p))
    store = tmp_path / "store"
    result = CliRunner().invoke(cli, ["run", "--profile", "single-broker-sync", "--fault", "leader-crash",
                                      "--store", str(store)])
    assert result.exit_code == EXIT_ERROR, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "fault leader-crash" in lines[0]
    assert reason in lines[0] and "Traceback" not in result.output
    assert not store.exists()


def test_other_faults_do_not_need_fuse(monkeypatch):
    monkeypatch.setattr(crash.os, "geteuid", lambda: 1000)
    assert not crash.needs_crash_fs(["random-kill", "leader-partition", "noop"])
    assert crash.needs_crash_fs(["random-kill", "minor-crash"])


def test_every_crash_fault_is_listed_with_its_selector():
    from faults.registry import known
    names = {name: reg for name, reg in known().items() if reg.cls is crash.CrashFault}
    assert sorted(names) == ["fixed-crash", "leader-crash", "major-crash", "minor-crash", "random-crash"]
    assert all("unsynced" in reg.description for reg in names.values())
    result = CliRunner().invoke(cli, ["faults"])
    assert result.exit_code == 0 and all(name in result.output for name in names)


def test_the_journal_less_sweep_looks_where_the_deployer_mounts():
    from inventory.model import Node
    from nuclei import lazyfs
    from sut.deploy import ModelDeployer
    node = Node(name="n1", host="10.0.0.1", workdir="/var/lib/chaos/n1")
    assert ModelDeployer.data_root(node) == lazyfs.data_mountpoint(node.workdir) == "/var/lib/chaos/n1/data"
