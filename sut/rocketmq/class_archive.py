"""Class-data-sharing archives for RocketMQ's JVMs: one per release, role and node JDK.

A RocketMQ JVM spends much of its start loading and verifying the same few
thousand classes. An archive holds them parsed, and the JVM maps it instead.
An archive is tied to the JDK that maps it and to the class path's location, so
it is made in two steps:

1. class lists, once per release on the control node (`class_lists`): a
   training cluster on loopback (a nameserver, a controller that is a Raft group
   of one, a Controller-mode broker it elects master) runs with
   `-XX:DumpLoadedClassList` until the nameserver routes the broker as master;
   each role's list of loaded classes goes to build/rocketmq-<V>-cds/<role>.classlist
   (beside the release, whose directory stays as Maven assembled it).
   Class names only: they fit any node.
2. archives, on each node at install (`dump_command`): `java -Xshare:dump` over the
   role's list with the node's own JDK and the release's path there, into
   <release>/cds/<role>.jsa, beside the `java -version` it was made with (a new JDK
   makes it again).

Processes start with `-XX:SharedArchiveFile=<release>/cds/<role>.jsa` and the
default `-Xshare:auto`: a JVM that cannot map the archive (absent, another JDK)
loads its classes as it would without one. An archive only saves time, so a
failed training or dump is reported and the run goes on without.
"""
from __future__ import annotations

import fcntl
import os
import posixpath
import secrets
import shlex
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

ROLES = ("namesrv", "controller", "broker")
TRAINING_TIMEOUT_S = 180.0
DUMP_TIMEOUT_S = 300.0


class ArchiveError(Exception):
    """No class lists could be made (one line)."""


def lists_dir(home: Path) -> Path:
    return home.with_name(f"{home.name}-cds")


def archive_path(release_dir: str, role: str) -> str:
    """Where a role's archive lives on a node (beside the release's lib/)."""
    return posixpath.join(release_dir, "cds", f"{role}.jsa")


def jvm_option(release_dir: str, role: str) -> str:
    return f"-XX:SharedArchiveFile={archive_path(release_dir, role)}"


def dump_command(release_dir: str, role: str, java: str = "java") -> str:
    """Shell run on a node: the role's archive unless one made by this node's JDK is there.

    `java -version`'s text is kept beside the archive; the archive is written under a
    temporary name and renamed, so a JVM never maps a half-written one."""
    cds = posixpath.join(release_dir, "cds")
    jsa, classlist = archive_path(release_dir, role), posixpath.join(cds, f"{role}.classlist")
    stamp, part = f"{jsa}.java", f"{jsa}.part"
    q = shlex.quote
    dump = shlex.join([java, "-Xshare:dump", "-XX:+UseSerialGC", f"-XX:SharedClassListFile={classlist}",
                       f"-XX:SharedArchiveFile={part}", "-cp", f"{release_dir}/lib/*"])
    return (f"v=$({q(java)} -version 2>&1 | head -n 2); "
            f"if [ -f {q(jsa)} ] && [ \"$(cat {q(stamp)} 2>/dev/null)\" = \"$v\" ]; then exit 0; fi; "
            f"rm -f {q(part)}; {dump} >{q(jsa)}.log 2>&1 && [ -s {q(part)} ] && "
            f"mv -f {q(part)} {q(jsa)} && printf '%s' \"$v\" >{q(stamp)}")


# -- the class lists (control node) ----------------------------------------------------------

def class_lists(home: Path, java: str = "java") -> Path:
    """build/rocketmq-<V>-cds/ with one class list per role, training once if needed."""
    target = lists_dir(home)
    if all((target / f"{role}.classlist").is_file() for role in ROLES):
        return target
    target.mkdir(exist_ok=True)
    with open(target / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not all((target / f"{role}.classlist").is_file() for role in ROLES):
            _train(home, target, java)
    return target


def free_port_block(width: int = 1) -> int:
    """A port p with p .. p+width-1 free on every address now (RocketMQ's servers bind
    0.0.0.0, so a port free on loopback alone is not enough)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + width < 65535 and all(_bindable(base + i) for i in range(width)):
            return base
    raise ArchiveError("no free loopback ports for the class-list training")


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def _training_configs(scratch: Path) -> tuple[str, dict[str, dict[str, object]]]:
    namesrv, raft, broker = free_port_block(), free_port_block(), free_port_block(4) + 2
    group = f"cds-{secrets.token_hex(3)}"
    configs: dict[str, dict[str, object]] = {
        "namesrv": {"listenPort": namesrv},
        "controller": {"controllerType": "DLedger", "controllerDLegerGroup": group,
                       "controllerDLegerPeers": f"n0-127.0.0.1:{raft}", "controllerDLegerSelfId": "n0",
                       "controllerStorePath": scratch / "controller" / "store", "mappedFileSize": 4 << 20},
        "broker": {"brokerClusterName": group, "brokerName": "cds", "brokerIP1": "127.0.0.1",
                   "brokerIP2": "127.0.0.1", "listenPort": broker, "haListenPort": broker + 1,
                   "namesrvAddr": f"127.0.0.1:{namesrv}", "enableControllerMode": True,
                   "controllerAddr": f"127.0.0.1:{raft}", "brokerId": -1, "allAckInSyncStateSet": True,
                   "flushDiskType": "SYNC_FLUSH", "storePathRootDir": scratch / "broker" / "store",
                   "mappedFileSizeCommitLog": 4 << 20, "mappedFileSizeConsumeQueue": 6000 * 20,
                   "messageIndexEnable": False, "timerWheelEnable": False, "diskMaxUsedSpaceRatio": 95,
                   "controllerHeartBeatTimeoutMills": 3000, "syncBrokerMetadataPeriod": 1000,
                   "checkSyncStateSetPeriod": 1000, "syncControllerMetadataPeriod": 2000},
    }
    return f"127.0.0.1:{namesrv}", configs


def _train(home: Path, target: Path, java: str) -> None:
    from sut.rocketmq import admin
    from sut.rocketmq.config import ADD_OPENS, HEAP_MB, JVM_FLAGS, MAIN_CLASS
    with tempfile.TemporaryDirectory(prefix="chaos-rmq-cds-") as tmp:
        scratch = Path(tmp)
        namesrv, configs = _training_configs(scratch)
        procs: dict[str, subprocess.Popen[bytes]] = {}
        try:
            for role in ROLES:
                workdir = scratch / role
                workdir.mkdir(parents=True, exist_ok=True)
                config = workdir / f"{role}.properties"
                config.write_text("".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}\n"
                                          for k, v in configs[role].items()))
                argv = [java, f"-Xmx{HEAP_MB[role]}m", *JVM_FLAGS, "-XX:MaxDirectMemorySize=128m", *ADD_OPENS,
                        f"-XX:DumpLoadedClassList={workdir / 'classlist'}", f"-Duser.home={workdir}",
                        f"-Drocketmq.home.dir={home}",
                        f"-Drmq.logback.configurationFile={home}/conf/rmq.{role}.logback.xml",
                        "-cp", f"{home}/lib/*", MAIN_CLASS[role], "-c", str(config)]
                with open(workdir / "out.log", "wb") as out:
                    procs[role] = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=workdir,
                                                   start_new_session=True)
            _wait_for_master(namesrv, procs)
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGTERM)
            for proc in procs.values():
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            admin.close()
        for role in ROLES:
            made = scratch / role / "classlist"
            if not made.is_file() or made.stat().st_size == 0:
                raise ArchiveError(f"the {role} JVM of the class-list training wrote no class list")
            (target / f"{role}.classlist.part").write_bytes(made.read_bytes())
            (target / f"{role}.classlist.part").replace(target / f"{role}.classlist")


def _wait_for_master(namesrv: str, procs: dict[str, subprocess.Popen[bytes]]) -> None:
    from sut.rocketmq import admin
    deadline = time.monotonic() + TRAINING_TIMEOUT_S
    while time.monotonic() < deadline:
        dead = [role for role, proc in procs.items() if proc.poll() is not None]
        if dead:
            raise ArchiveError(f"the class-list training's {', '.join(dead)} JVM exited early")
        try:
            if any(entry.broker_id == 0 for entry in admin.cluster_list(namesrv, 5.0)):
                return
        except admin.AdminError:
            pass
        time.sleep(1.0)
    raise ArchiveError(f"the class-list training's broker was not master after {TRAINING_TIMEOUT_S:g}s")
