"""Stale leases: a killed harness's lease never hits the live run that reuses its directory,
another user's lease is one line, and `chaos campaign` / `chaos teeth` clean up first too."""
from __future__ import annotations

import json
import multiprocessing
import os
import pwd
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness import stale
from harness.cli import cli
from harness.store import write_json
from conftest import require

REPO = Path(__file__).resolve().parents[1]


def dead_pid() -> int:
    dead = multiprocessing.Process(target=lambda: None)
    dead.start()
    dead.join()
    return dead.pid


def killed_run(run_dir: Path, pid: int) -> Path:
    """A run directory still saying `running`, and the lease its SIGKILLed harness left."""
    write_json(run_dir / "run.json", {"status": "running", "cluster": {"source": "provisioned", "name": "run-x"}})
    lease = stale.leases_dir() / f"{pid}-{run_dir.name}.json"
    write_json(lease, {"pid": pid, "start": 1, "run_dir": str(run_dir)})
    return lease


def test_a_dead_lease_leaves_the_live_run_that_reuses_its_directory_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("CHAOS_HOME", str(tmp_path / "home"))
    run_dir = tmp_path / "campaign" / "runs" / "r1"
    dead = killed_run(run_dir, dead_pid())
    mine = stale.take_lease(run_dir)   # the resumed run, alive, in the same directory
    try:
        lines = stale.clean_up_stale(lambda line: None)
        assert len(lines) == 1 and "the run is live again" in lines[0] and "left alone" in lines[0], lines
        assert json.loads((run_dir / "run.json").read_text())["status"] == "running"
        assert not dead.exists() and mine.exists()
    finally:
        stale.release_lease(mine)


@pytest.mark.parametrize("command", ["campaign", "teeth"])
def test_campaign_and_teeth_clean_up_stale_leases_before_they_start(tmp_path, monkeypatch, command):
    monkeypatch.setenv("CHAOS_HOME", str(tmp_path / "home"))
    run_dir = tmp_path / "killed"
    lease = killed_run(run_dir, dead_pid())

    def stop_here(*args, **kwargs):
        from harness.campaign import CampaignError
        raise CampaignError("stopped by the test after the clean-up")
    if command == "campaign":
        monkeypatch.setattr("harness.campaign.runner.CampaignRunner.__init__", stop_here)
        args = ["campaign", str(REPO / "campaigns" / "smoke.yaml")]
    else:
        monkeypatch.setattr("harness.campaign.teeth.run_teeth", stop_here)
        args = ["teeth", str(REPO / "campaigns" / "smoke.yaml")]
    result = CliRunner().invoke(cli, [*args, "--store", str(tmp_path / "store")])
    assert "stopped by the test" in str(result.exception) + result.output, result.output
    assert not lease.exists()
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "error" and "the harness was killed" in record["error"]


def test_another_users_lease_is_one_line_not_a_traceback(tmp_path, monkeypatch):
    require(os.geteuid() == 0, "needs root to own the lease and to become another user")
    home = Path(tempfile.mkdtemp(prefix="chaos-lease-"))  # outside pytest's root-only tmp tree
    try:
        home.chmod(0o755)
        monkeypatch.setenv("CHAOS_HOME", str(home))
        lease = killed_run(home / "run", dead_pid())   # owned by root
        for path in (home, home / "run", stale.leases_dir()):
            path.chmod(0o755)
        read, write = os.pipe()
        child = os.fork()
        if child == 0:  # a harness run by another user meets root's lease
            try:
                os.close(read)
                nobody = pwd.getpwnam("nobody")
                os.setgid(nobody.pw_gid)
                os.setuid(nobody.pw_uid)
                lines = stale.clean_up_stale(lambda line: None)
                os.write(write, json.dumps(lines).encode())
            except BaseException as error:  # noqa: BLE001 - handed to the parent
                os.write(write, json.dumps([f"raised {type(error).__name__}: {error}"]).encode())
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read) as answer:
            lines = json.loads(answer.read())
        os.waitpid(child, 0)
        assert len(lines) == 1 and "cannot be removed (Permission denied): run chaos as its owner" in lines[0], lines
        assert lease.exists() and json.loads((home / "run" / "run.json").read_text())["status"] == "running"
    finally:
        subprocess.run(["rm", "-rf", "--", str(home)], check=True)


def test_the_crash_file_system_daemon_exits_and_unmounts_when_its_run_is_gone(tmp_path):
    import shutil
    import time

    from nuclei import lazyfs_node
    require(os.geteuid() == 0 and os.path.exists("/dev/fuse"), "needs root and /dev/fuse for a real FUSE mount")
    state, mountpoint = tmp_path / "state", tmp_path / "mnt"
    mountpoint.mkdir()
    daemon = subprocess.Popen([sys.executable, str(REPO / "nuclei" / "lazyfs_node.py"), "serve",
                               "--state", str(state), "--mountpoint", str(mountpoint)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while not lazyfs_node.mounted(str(mountpoint)):
            assert daemon.poll() is None and time.monotonic() < deadline, daemon.stderr.read()
            time.sleep(0.1)
        (mountpoint / "f").write_text("x")
        shutil.rmtree(state)                    # the run's work directory wiped
        assert daemon.wait(timeout=15) == 0
        assert "is gone: unmounting" in daemon.stderr.read()
        assert not lazyfs_node.mounted(str(mountpoint))
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        subprocess.run(["umount", "-l", str(mountpoint)], capture_output=True)
