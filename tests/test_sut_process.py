"""`python -m sut`: one-line errors, exit codes, pidfiles and `stop`."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_sut(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sut", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT)})


def start_namesrv(tmp_path: Path) -> tuple[Path, subprocess.Popen]:
    """A real nameserver process on a free loopback port: (its config file, the child)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = tmp_path / "ns.json"
    path.write_text(json.dumps({"data_dir": str(tmp_path / "d"), "port": port}))
    child = subprocess.Popen([sys.executable, "-m", "sut", "namesrv", "--config", str(path)],
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    return path, child


@pytest.mark.parametrize("content, message", [
    (None, "cannot read"),
    ("{not json", "line 1 column 2"),
    ("[1]", "must be a JSON object"),
    ('{"data_dir": "/tmp/x", "prot": 1}', "unknown field 'prot'"),
    ('{"data_dir": "/tmp/x", "port": "9876"}', "port: must be an integer"),
    ('{"port": 1}', "missing required field 'data_dir'"),
])
def test_bad_config_files_give_one_line_and_exit_2(tmp_path, content, message):
    path = tmp_path / "namesrv.json"
    if content is not None:
        path.write_text(content)
    proc = run_sut("namesrv", "--config", str(path))
    assert proc.returncode == 2
    assert message in proc.stderr and str(path) in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_a_port_in_use_is_a_one_line_startup_error(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        path = tmp_path / "ns.json"
        path.write_text(json.dumps({"data_dir": str(tmp_path / "d"), "port": port}))
        proc = run_sut("namesrv", "--config", str(path))
    assert proc.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "d" / "namesrv.pid").exists()


def test_stop_terminates_the_process_named_by_the_pidfile(tmp_path):
    path, child = start_namesrv(tmp_path)
    try:
        pidfile = tmp_path / "d" / "namesrv.pid"
        deadline = time.monotonic() + 20
        while not pidfile.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert int(pidfile.read_text()) == child.pid
        other = tmp_path / "other.json"  # a config the process was not started with
        other.write_text(path.read_text())
        assert run_sut("stop", "namesrv", "--config", str(other)).returncode == 0
        assert child.poll() is None
        assert run_sut("stop", "namesrv", "--config", str(path)).returncode == 0
        assert child.wait(10) == 0
        assert not pidfile.exists()
    finally:
        child.kill()
        child.wait()


def test_the_sut_imports_with_the_standard_library_only():
    """Nodes have only Python: every sut module but deploy.py must import without site-packages."""
    modules = sorted(
        ".".join(p.relative_to(ROOT).with_suffix("").parts)
        for p in (ROOT / "sut").rglob("*.py")
        if p.name != "deploy.py" and "__pycache__" not in p.parts)
    modules = [m.removesuffix(".__init__") for m in modules if not m.endswith("__main__")]
    code = f"import sys; sys.path.insert(0, {str(ROOT)!r}); import importlib\n" \
           f"for m in {modules!r}: importlib.import_module(m)"
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "sut.broker" in modules and "sut.client" in modules


def test_stop_also_ends_a_paused_process_cleanly(tmp_path):
    import signal
    path, child = start_namesrv(tmp_path)
    try:
        log = tmp_path / "d" / "namesrv.log"
        deadline = time.monotonic() + 20
        while "ready" not in (log.read_text() if log.exists() else "") and time.monotonic() < deadline:
            time.sleep(0.05)
        child.send_signal(signal.SIGSTOP)
        assert run_sut("stop", "namesrv", "--config", str(path), "--timeout", "10").returncode == 0
        assert child.wait(10) == 0  # exit code 0: it shut down on SIGTERM, not SIGKILL
    finally:
        child.kill()
        child.wait()
