"""Asking a RocketMQ cluster about itself with RocketMQ's own admin tool (mqadmin).

Runs `org.apache.rocketmq.tools.command.MQAdminStartup` from the local release
on the control node (which reaches every node's address). One JVM per
question costs a second or two: enough for health checks and finding the
master before a leader-* fault; the workload's client does not use it.
"""
from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from sut.rocketmq.release import local_dir

ADMIN_CLASS = "org.apache.rocketmq.tools.command.MQAdminStartup"
JVM = ("-Xmx96m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true")


class AdminError(Exception):
    """The admin tool failed or timed out (one line)."""


def mqadmin(args: list[str], timeout: float = 30.0, home: Path | None = None) -> str:
    """stdout of one mqadmin command; its logs go to a home that is removed after."""
    lib = (home or local_dir()) / "lib"
    with tempfile.TemporaryDirectory(prefix="rmq-admin-") as user_home:
        argv = ["java", *JVM, f"-Duser.home={user_home}", f"-Drocketmq.home.dir={lib.parent}",
                "-cp", f"{lib}/*", ADMIN_CLASS, *args]
        try:
            result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AdminError(f"mqadmin {args[0]} did not answer within {timeout:g}s") from None
    if result.returncode != 0:
        tail = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise AdminError(f"mqadmin {args[0]} failed: {tail[0][:200]}")
    return result.stdout


@dataclass(frozen=True)
class BrokerEntry:
    cluster: str
    broker_name: str
    broker_id: int
    address: str


def cluster_list(namesrv: str, timeout: float = 30.0) -> list[BrokerEntry]:
    """The brokers the nameserver routes to: brokerId 0 is a group's master."""
    entries = []
    for line in mqadmin(["clusterList", "-n", namesrv], timeout).splitlines():
        words = line.split()
        if len(words) >= 4 and not words[0].startswith("#") and words[2].lstrip("-").isdigit():
            entries.append(BrokerEntry(words[0], words[1], int(words[2]), words[3]))
    return entries


def controller_leader(controller: str, timeout: float = 30.0) -> str | None:
    """The address of the controllers' Raft leader, as the asked controller sees it."""
    for line in mqadmin(["getControllerMetaData", "-a", controller], timeout).splitlines():
        words = line.split()
        if len(words) == 2 and words[0] == "#ControllerLeaderAddress" and words[1] != "null":
            return words[1]
    return None
