"""A real Apache RocketMQ on loopback for tests: one nameserver and one broker JVM.

Started from the pinned release in build/ (scripts/fetch-rocketmq.sh) with small heaps,
small mapped files, a temporary home and store per process and free ports, so a test
run never collides with another one; every process is stopped at the end (by the
Popen object this module started, never by name), also when the test fails.

    @pytest.mark.jvm
    def test_x(rmq_loopback):             # module-scoped: one cluster per test module
        rmq_loopback.namesrv              # "127.0.0.1:port"
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest

from sut.rocketmq.class_archive import free_port_block
from sut.rocketmq.driver import DRIVER_JAR, release_lib
from conftest import require

CLUSTER = "chaos-test"
BROKER_NAME = "broker-a"
START_TIMEOUT_S = 90.0
# JDK 17: RocketMQ's mmap clean-up and its serialisation reach into the JDK's internals.
JDK17_FLAGS = ("--add-opens", "java.base/java.nio=ALL-UNNAMED",
               "--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
               "--add-opens", "java.base/java.lang=ALL-UNNAMED",
               "--add-exports", "java.base/sun.nio.ch=ALL-UNNAMED")
SMALL_JVM = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k", "-XX:-UsePerfData")
# Small stores: 4 MB commitlog files, small consume queues, no index or timer files.
BROKER_STORE = {
    "mappedFileSizeCommitLog": 4 * 1024 * 1024,
    "mappedFileSizeConsumeQueue": 6000 * 20,
    "messageIndexEnable": "false",
    "timerWheelEnable": "false",
    "transientStorePoolEnable": "false",
    "diskMaxUsedSpaceRatio": 95,
}


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def require_rocketmq() -> None:
    """Skip (fail in CI) unless a JDK, the release and the compiled driver are there."""
    require(shutil.which("java") is not None, "no JDK: 'java' is not on PATH")
    require(release_lib().is_dir(), f"no RocketMQ release at {release_lib()} (bash scripts/setup.sh)")
    require(DRIVER_JAR.is_file(), f"no RocketMQ client driver at {DRIVER_JAR} (bash scripts/setup.sh)")


class LoopbackRocketMQ:
    """One nameserver and one broker on 127.0.0.1: a classic master (ASYNC_MASTER), or
    with `controller=True` a nameserver with an embedded controller (a DLedger group of
    one) and a broker in Controller mode that the controller elects master."""

    def __init__(self, root: Path, controller: bool = False) -> None:
        self.root = root
        self.controller = controller
        self.lib = release_lib()
        self.conf = self.lib.parent / "conf"
        self.namesrv_port = free_port_block(1)
        self.dledger_port = free_port_block(1)
        # The broker's listenPort, its VIP channel (listenPort - 2) and HA port (+ 1).
        self.broker_port = free_port_block(4) + 2
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def controller_addr(self) -> str:
        """The controller's address: a DLedger controller answers on its Raft peer port."""
        return f"127.0.0.1:{self.dledger_port}"

    @property
    def broker(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    def _config(self, name: str, values: dict[str, object]) -> Path:
        path = self.root / name / f"{name}.properties"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
        return path

    def _start(self, name: str, main: str, heap_mb: int, config: Path, logback: str) -> None:
        home = config.parent
        argv = ["java", f"-Xms{heap_mb // 2}m", f"-Xmx{heap_mb}m", "-XX:MaxDirectMemorySize=128m",
                *SMALL_JVM, *JDK17_FLAGS, f"-Duser.home={home}", f"-Drocketmq.home.dir={home}",
                f"-Drmq.logback.configurationFile={self.conf / logback}",
                "-cp", f"{self.lib}/*", main, "-c", str(config)]
        with open(home / "stdout.log", "ab") as out:
            self.procs[name] = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=home,
                                                start_new_session=True)

    def _wait_port(self, name: str, port: int) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _port_open(port):
            if self.procs[name].poll() is not None:
                raise RuntimeError(f"{name} exited with {self.procs[name].returncode}: {self.log_tail(name)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not listen on {port} within {START_TIMEOUT_S:g}s")
            time.sleep(0.2)

    def log_tail(self, name: str, lines: int = 15) -> str:
        path = self.root / name / "stdout.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def start_namesrv(self) -> None:
        values: dict[str, object] = {"listenPort": self.namesrv_port}
        if self.controller:
            values.update(enableControllerInNamesrv="true", controllerDLegerGroup="chaos-test-ctl",
                          controllerDLegerPeers=f"n0-127.0.0.1:{self.dledger_port}", controllerDLegerSelfId="n0",
                          controllerStorePath=self.root / "namesrv" / "controller", mappedFileSize=4 * 1024 * 1024)
        config = self._config("namesrv", values)
        self._start("namesrv", "org.apache.rocketmq.namesrv.NamesrvStartup", 96, config, "rmq.namesrv.logback.xml")
        self._wait_port("namesrv", self.namesrv_port)

    def start_broker(self) -> None:
        home = self.root / "broker"
        values: dict[str, object] = {
            "brokerClusterName": CLUSTER, "brokerName": BROKER_NAME, "brokerId": 0,
            "brokerRole": "ASYNC_MASTER", "flushDiskType": "ASYNC_FLUSH",
            "namesrvAddr": self.namesrv, "brokerIP1": "127.0.0.1", "listenPort": self.broker_port,
            "storePathRootDir": home / "store", "storePathCommitLog": home / "store" / "commitlog",
            "autoCreateTopicEnable": "false", **BROKER_STORE}
        if self.controller:
            values.update(enableControllerMode="true", controllerAddr=self.controller_addr, brokerId=-1,
                          allAckInSyncStateSet="true", syncBrokerMetadataPeriod=1000,
                          controllerHeartBeatTimeoutMills=3000)
        config = self._config("broker", values)
        self._start("broker", "org.apache.rocketmq.broker.BrokerStartup", 256, config, "rmq.broker.logback.xml")
        self._wait_port("broker", self.broker_port)

    def start(self) -> "LoopbackRocketMQ":
        self.start_namesrv()
        self.start_broker()
        return self

    def stop(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Stop one process this cluster started (by its own Popen, never by name)."""
        proc = self.procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        os.kill(proc.pid, sig)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def running(self, name: str) -> bool:
        proc = self.procs.get(name)
        return proc is not None and proc.poll() is None

    def close(self) -> None:
        for name in list(self.procs):
            self.stop(name)


@pytest.fixture(scope="module")
def rmq_cluster() -> Iterator[LoopbackRocketMQ]:
    """A started loopback RocketMQ in Controller mode for the module (nameserver with an
    embedded controller, one broker), always stopped and removed afterwards. A start that
    fails is tried once more on fresh ports: the free ports are picked before the JVMs bind
    them, and other test runs on the box pick theirs at the same time."""
    require_rocketmq()
    made: list[tuple[LoopbackRocketMQ, Path]] = []
    try:
        for attempt in (1, 2):
            root = Path(tempfile.mkdtemp(prefix="rmq-test-"))
            cluster = LoopbackRocketMQ(root, controller=True)
            made.append((cluster, root))
            try:
                cluster.start()
                break
            except RuntimeError:
                cluster.close()
                if attempt == 2:
                    raise
        yield cluster
    finally:
        for cluster, root in made:
            cluster.close()
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def rmq_loopback(rmq_cluster: LoopbackRocketMQ) -> LoopbackRocketMQ:
    """The module's cluster with its broker running (a test may have stopped it)."""
    if not rmq_cluster.running("broker"):
        rmq_cluster.start_broker()
    return rmq_cluster
