"""A real Spark standalone cluster on loopback, started from pyspark's own bin/spark-class.

One master and N workers, each a JVM in its own process group with its own
work directory and ports, all under one root directory. `stop()` ends every
process group (executors and their Python workers are children of a worker
JVM) and reports any process still holding the root directory. Used by the
cluster tests and bench/checker_pipeline.py.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).resolve().parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"
LOOPBACK = "127.0.0.1"


def java_available() -> bool:
    return shutil.which("java") is not None or bool(os.environ.get("JAVA_HOME"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


class StandaloneCluster:
    """`with StandaloneCluster(root) as cluster: cluster.master_url` — always stopped on exit."""

    def __init__(self, root: Path, workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        self.root = Path(root).resolve()
        self.workers, self.cores, self.memory = workers, cores, memory
        self.port = free_port()
        self.master_url = f"spark://{LOOPBACK}:{self.port}"
        self.processes: list[subprocess.Popen] = []

    def _env(self) -> dict[str, str]:
        conf_dir = self.root / "conf"  # empty: no site configuration leaks in
        conf_dir.mkdir(parents=True, exist_ok=True)
        return {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_CONF_DIR": str(conf_dir),
                "SPARK_LOCAL_IP": LOOPBACK, "SPARK_LOCAL_DIRS": str(self.root / "local"),
                "SPARK_LOG_DIR": str(self.root / "logs")}

    def _start(self, name: str, main_class: str, *args: str) -> Path:
        log = self.root / f"{name}.log"
        with open(log, "ab") as out:
            self.processes.append(subprocess.Popen(
                [str(SPARK_CLASS), main_class, *args], stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=self._env(), cwd=self.root, start_new_session=True))
        return log

    def start(self, timeout: float = 120) -> "StandaloneCluster":
        master_log = self._start("master", "org.apache.spark.deploy.master.Master", "--host", LOOPBACK,
                                 "--port", str(self.port), "--webui-port", str(free_port()))
        self._wait_for(master_log, "I have been elected leader", timeout)
        for n in range(1, self.workers + 1):
            work_dir = self.root / f"worker{n}"
            work_dir.mkdir(parents=True, exist_ok=True)
            log = self._start(f"worker{n}", "org.apache.spark.deploy.worker.Worker",
                              "--host", LOOPBACK, "--port", str(free_port()),
                              "--webui-port", str(free_port()), "--cores", str(self.cores),
                              "--memory", self.memory, "--work-dir", str(work_dir), self.master_url)
            self._wait_for(log, "Successfully registered with master", timeout)
        return self

    def _wait_for(self, log: Path, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in log.read_text(errors="replace"):
                return
            if any(p.poll() is not None for p in self.processes):
                break
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"Spark standalone: {log.name} never said {text!r}:\n"
                           f"{log.read_text(errors='replace')[-2000:]}")

    def stop(self) -> None:
        """TERM then KILL every process group; waits until each JVM is gone."""
        for process in reversed(self.processes):
            _end_group(process)
        self.processes.clear()

    def leftovers(self) -> list[int]:
        """Pids of processes still running in or on the cluster's directory."""
        return processes_using(self.root)

    def __enter__(self) -> "StandaloneCluster":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _end_group(process: subprocess.Popen) -> None:
    for sig, grace in ((signal.SIGTERM, 15), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            pass
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            continue
        # the group's other members (executors, Python workers) may outlive the leader a moment
        if not _group_alive(process.pid):
            return
    process.wait()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def processes_using(root: Path) -> list[int]:
    """Pids whose working directory or command line is under `root`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if cwd.startswith(str(root)) or str(root) in cmdline:
            found.append(int(entry.name))
    return found
