"""The store and the sweeps that trust it: nothing outside is deleted, no stranger's pid is
signalled, a workdir means what it spells, and `chaos serve` is bounded per request."""
from __future__ import annotations

import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from harness.campaign.runner import _KILL_LEFTOVERS, _LEFTOVERS
from harness.cli import cli
from inventory.model import Node
from nuclei.process import _RESUME_STOPPED
from reports import serve
from support.stores import make_campaign, results


def night(store: Path, day: int) -> Path:
    return make_campaign(store, f"202401{day:02d}T000000Z-aaaa-nightly",
                         [{"profile": "dledger-3", "fault": "leader-kill", "results": results(True, rto=[1.0])}],
                         name="nightly", gates=[], status="complete")


def test_gc_follows_no_symlink_out_of_the_store(tmp_path):
    store, outside = tmp_path / "store", tmp_path / "outside"
    for name in ("run-target", "runs-target"):
        (outside / name / "history").mkdir(parents=True)
        (outside / name / "history" / "keep.jsonl").write_text("precious\n")
        (outside / name / "notes.txt").write_text("precious\n")
    old, older = night(store, 2), night(store, 1)
    (old / "runs" / "linked-run").symlink_to(outside / "run-target")
    for run in (older / "runs").iterdir():
        run.rename(older / f"{run.name}-real")
    (older / "runs").rmdir()
    (older / "runs").symlink_to(outside / "runs-target")
    night(store, 3)
    result = CliRunner().invoke(cli, ["gc", "--keep-nights", "1", "--store", str(store)])
    assert result.exit_code == 0, result.output
    assert result.output.count("prune  ") == 2, result.output
    assert sorted(str(p.relative_to(outside)) for p in outside.rglob("*")) == [
        "run-target", "run-target/history", "run-target/history/keep.jsonl", "run-target/notes.txt",
        "runs-target", "runs-target/history", "runs-target/history/keep.jsonl", "runs-target/notes.txt"]
    assert not (old / "runs" / "dledger-3-queue-leader-kill-r1" / "history").exists()  # a real run is pruned


@pytest.mark.parametrize("workdir", ["/var/..", "/./.", "/opt/chaos/../../etc", "/opt/./chaos"])
def test_a_workdir_with_dot_components_is_refused(workdir):
    with pytest.raises(ValidationError, match="must not contain . or .. components"):
        Node(name="n1", host="127.0.0.1", workdir=workdir)


def _sleeper(*words: str) -> subprocess.Popen:
    """A real process whose argv carries `words` (as a SUT's `-m sut ... --config` would)."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", *words])


def _bash(script: str) -> str:
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30).stdout


def test_the_campaign_leftover_sweep_trusts_only_this_nodes_sut(tmp_path):
    """PIDs are shared by local nodes: another node's SUT (or any program with `sut` in its
    argv) behind a pidfile here is not ours to report or kill."""
    workdir, other = tmp_path / "n1", tmp_path / "n2"
    (workdir / "data" / "broker-a-0").mkdir(parents=True)
    (workdir / "data" / "broker-a-1").mkdir(parents=True)
    ours = _sleeper("sut", "broker", "--config", f"{workdir}/conf/broker-a-0.json")
    stranger = _sleeper("sut", "broker", "--config", f"{other}/conf/broker-a-0.json")
    try:
        (workdir / "data" / "broker-a-0" / "broker.pid").write_text(f"{ours.pid}\n")
        (workdir / "data" / "broker-a-1" / "broker.pid").write_text(f"{stranger.pid}\n")
        quoted = shlex.quote(str(workdir))
        found = _bash(_LEFTOVERS % {"workdir": quoted}).splitlines()
        assert found == [f"process {ours.pid} ({workdir}/data/broker-a-0/broker.pid)"]
        _bash(_KILL_LEFTOVERS % {"workdir": quoted})
        assert ours.wait(timeout=10) == -signal.SIGKILL
        assert stranger.poll() is None
    finally:
        for proc in (ours, stranger):
            proc.kill()
            proc.wait()


def test_the_stopped_process_sweep_resumes_only_processes_of_the_directory(tmp_path):
    workdir, other = tmp_path / "n1", tmp_path / "n2"
    workdir.mkdir()
    ours = _sleeper(f"{workdir}/conf/x.json")
    stranger = _sleeper(f"{other}/conf/x.json")
    try:
        for proc, name in ((ours, "ours.pid"), (stranger, "stranger.pid")):
            (workdir / name).write_text(f"{proc.pid}\n")
            proc.send_signal(signal.SIGSTOP)
        time.sleep(0.2)
        resumed = _bash(_RESUME_STOPPED % {"directory": shlex.quote(str(workdir))}).splitlines()
        assert resumed == [f"{ours.pid} {workdir}/ours.pid"]
        assert _state(stranger.pid) == "T"
    finally:
        for proc in (ours, stranger):
            proc.send_signal(signal.SIGCONT)
            proc.kill()
            proc.wait()


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[0]


@pytest.fixture
def store_server(tmp_path, monkeypatch):
    assert serve.StoreHandler.timeout and serve.StoreHandler.timeout <= 60  # bounded by default
    monkeypatch.setattr(serve.StoreHandler, "timeout", 0.5)  # the same bound, shorter for the test
    night(tmp_path, 1)
    server = serve.make_server(tmp_path, port=0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_serve_drops_a_client_that_sends_nothing(store_server):
    with socket.create_connection(store_server.server_address[:2], timeout=5) as silent:
        started = time.monotonic()
        assert silent.recv(100) == b""  # closed by the server, not by our 5 s timeout
        assert time.monotonic() - started < 4


def test_serve_renders_the_store_index_once_for_a_burst_of_requests(store_server, monkeypatch):
    calls = []
    real = serve.render_store_index
    monkeypatch.setattr(serve, "render_store_index", lambda root: calls.append(root) or real(root))
    url = f"http://127.0.0.1:{store_server.server_address[1]}/"
    pages = [urllib.request.urlopen(url, timeout=5).read() for _ in range(5)]
    assert b"20240101T000000Z-aaaa-nightly" in pages[0] and len(set(pages)) == 1
    assert len(calls) == 1
