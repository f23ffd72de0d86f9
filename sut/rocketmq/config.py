"""Rendering an `rmq-*` profile into RocketMQ .properties files and JVM command lines.

Pure: hosts, workdirs and the release directory in, processes out. Layout on
a node (all under its workdir; local nodes share one file system, so every
process gets a home of its own and never shares a store):

    <workdir>/rocketmq/<release>/lib, conf     the release (uploaded once)
    <workdir>/conf/<process>.properties         RocketMQ's config file (-c)
    <workdir>/data/<process>/                   user.home of the JVM: store/,
                                                logs/rocketmqlogs/, <role>.pid, <role>.out
"""
from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any

from sut.profiles import Profile, ProfileError
from sut.rocketmq.profiles import (CONTROLLER_MAPPED_FILE_MB, DIRECT_MEMORY_MB, HEAP_MB, MAPPED_FILE_MB, PORTS,
                                   TIMER_LOG_MB, TRANSIENT_STORE_POOL_SIZE, rmq_timing)

MAIN_CLASS = {"namesrv": "org.apache.rocketmq.namesrv.NamesrvStartup",
              "controller": "org.apache.rocketmq.controller.ControllerStartup",
              "broker": "org.apache.rocketmq.broker.BrokerStartup"}
# RocketMQ registers the cluster name as a system topic: it must differ from the
# workloads' topic ("chaos").
CLUSTER = "ChaosCluster"
DLEDGER_GROUP = "broker-a"
# JDK 17: hessian in the controller's replicas-info manager and DLedger's / the
# store's mmap clean-up reach into java.base.
ADD_OPENS = ("--add-opens=java.base/java.lang=ALL-UNNAMED", "--add-opens=java.base/java.nio=ALL-UNNAMED",
             "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED", "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
             "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED", "--add-opens=java.base/java.util=ALL-UNNAMED")
# Small, quick JVMs: seven of them share two cores. SerialGC and C1 only cost
# little throughput here and save start time and memory.
JVM_FLAGS = ("-server", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-OmitStackTraceInFastThrow",
             "-Xss512k", "-Djava.net.preferIPv4Stack=true")


# Keys the deployer writes that older releases lack (the release that first has each,
# read with javap in the jars of every served release): RocketMQ ignores a key it lacks
# (MixAll.properties2Object sets existing setters only), so they are left out rather
# than written to no effect. docs/rocketmq.md, "Releases".
KEYS_SINCE: dict[str, tuple[int, ...]] = {
    "scanInactiveMasterInterval": (5, 1, 1),
    **{key: (5, 2, 0) for key in ("controllerType", "jRaftGroupId", "jRaftServerId", "jRaftInitConf",
                                  "jRaftControllerRPCAddr", "jRaftElectionTimeoutMs")},
}


def release_has(key: str, version: str | None) -> bool:
    """Whether the release (None: the pinned one) has this config key."""
    since = KEYS_SINCE.get(key)
    return since is None or version is None or tuple(int(p) for p in version.split(".")) >= since


@dataclass(frozen=True)
class RmqProcess:
    """One RocketMQ process ready to start on its node."""

    name: str
    role: str
    node: int
    host: str
    ports: dict[str, int]
    properties: dict[str, str]
    data_dir: str
    config_path: str
    argv: tuple[str, ...]

    @property
    def address(self) -> str:
        return f"{self.host}:{self.ports['port']}"

    @property
    def pidfile(self) -> str:
        return posixpath.join(self.data_dir, f"{self.role}.pid")

    @property
    def stdout(self) -> str:
        return posixpath.join(self.data_dir, f"{self.role}.out")

    @property
    def log(self) -> str:
        return posixpath.join(self.data_dir, "logs", "rocketmqlogs", f"{self.role}.log")

    @property
    def invariant_logs(self) -> tuple[str, ...]:
        """The other logs where RocketMQ and DLedger report broken invariants of their own
        (checkers/invariants.py): the store's loggers and the root logger DLedger writes to."""
        names = {"broker": ("store.log", "storeerror.log", "broker_default.log"),
                 "controller": ("dledger.log",)}.get(self.role, ())
        return tuple(posixpath.join(self.data_dir, "logs", "rocketmqlogs", name) for name in names)


def release_dir(workdir: str, release: str) -> str:
    return posixpath.join(workdir.rstrip("/"), "rocketmq", release)


def render(profile: Profile, hosts: list[str], workdirs: list[str], release: str, timing: str = "default",
           java: str = "java", class_archive: bool = False, version: str | None = None) -> list[RmqProcess]:
    """Every process of the profile, configured for these nodes; with class_archive, each
    JVM maps its role's class-data-sharing archive (sut/rocketmq/class_archive.py)."""
    if len(hosts) < profile.nodes_needed or len(workdirs) < profile.nodes_needed:
        raise ProfileError(f"profile {profile.name} needs {profile.nodes_needed} nodes, "
                           f"the inventory has {min(len(hosts), len(workdirs))}")
    t = rmq_timing(timing)
    ports = {spec.name: dict(PORTS[spec.role]) for spec in profile.processes}
    host = {spec.name: hosts[spec.node] for spec in profile.processes}

    def peers(role: str, key: str, sep: str, named: bool = False) -> str:
        specs = [s for s in profile.processes if s.role == role]
        return sep.join((f"n{s.config['index']}-" if named else "") + f"{host[s.name]}:{ports[s.name][key]}"
                        for s in specs)

    out = []
    for spec in profile.processes:
        workdir = workdirs[spec.node].rstrip("/")
        data_dir = posixpath.join(workdir, "data", spec.name)
        props: dict[str, Any] = {"listenPort": ports[spec.name]["port"]}
        if spec.role == "namesrv":
            props |= _namesrv(t, data_dir)
        elif spec.role == "controller":
            props |= _controller(spec.config, t, data_dir, host[spec.name], ports[spec.name], peers)
        else:
            props |= _broker(spec.config, t, data_dir, host[spec.name], ports[spec.name], peers)
        home = release_dir(workdir, release)
        config_path = posixpath.join(workdir, "conf", f"{spec.name}.properties")
        archive = (f"-XX:SharedArchiveFile={posixpath.join(home, 'cds', spec.role + '.jsa')}",) if class_archive else ()
        argv = (java, f"-Xms{HEAP_MB[spec.role]}m", f"-Xmx{HEAP_MB[spec.role]}m", *JVM_FLAGS, *archive,
                f"-XX:MaxDirectMemorySize={direct_memory_mb(spec.role, spec.config)}m", *ADD_OPENS,
                f"-Duser.home={data_dir}", f"-Drocketmq.home.dir={home}",
                f"-Drmq.logback.configurationFile={home}/conf/rmq.{spec.role}.logback.xml",
                "-cp", f"{home}/lib/*", MAIN_CLASS[spec.role], "-c", config_path)
        out.append(RmqProcess(spec.name, spec.role, spec.node, host[spec.name], ports[spec.name],
                              {k: _text(v) for k, v in props.items() if release_has(k, version)}, data_dir,
                              config_path, argv))
    return out


def direct_memory_mb(role: str, config: dict[str, Any]) -> int:
    """Netty's share plus, on a broker with transientStorePoolEnable, the pool's
    buffers (allocated off-heap at start: without room for them the broker dies)."""
    pool = TRANSIENT_STORE_POOL_SIZE * MAPPED_FILE_MB if role == "broker" and config["transient_store_pool"] else 0
    return DIRECT_MEMORY_MB + pool


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _namesrv(t: dict[str, int], data_dir: str) -> dict[str, Any]:
    return {"scanNotActiveBrokerInterval": t["namesrv_scan_interval_ms"],
            "kvConfigPath": posixpath.join(data_dir, "namesrv", "kvConfig.json"),
            "clientRequestThreadPoolNums": 2, "defaultThreadPoolNums": 4}


def _controller(config: dict[str, Any], t: dict[str, int], data_dir: str, host: str, ports: dict[str, int],
                peers: Any) -> dict[str, Any]:
    store = posixpath.join(data_dir, "controller-store")
    props: dict[str, Any] = {
        "controllerStorePath": store,
        "mappedFileSize": CONTROLLER_MAPPED_FILE_MB * 1024 * 1024,
        "scanNotActiveBrokerInterval": t["controller_scan_interval_ms"],
        "scanInactiveMasterInterval": t["controller_scan_master_ms"],
        "enableElectUncleanMaster": config["unclean"],
        "controllerThreadPoolNums": 4,
    }
    if config["raft"] == "jraft":
        props |= {"controllerType": "jRaft", "jRaftGroupId": "chaos-controllers",
                  "jRaftServerId": f"{host}:{ports['raft_port']}",
                  "jRaftInitConf": peers("controller", "raft_port", ","),
                  "jRaftControllerRPCAddr": peers("controller", "port", ","),
                  "jRaftElectionTimeoutMs": t["jraft_election_timeout_ms"]}
    else:
        # A DLedger controller serves brokers and admin on its Raft peer address.
        props |= {"controllerType": "DLedger", "controllerDLegerGroup": "chaos-controllers",
                  "controllerDLegerPeers": peers("controller", "port", ";", named=True),
                  "controllerDLegerSelfId": f"n{config['index']}"}
    return props


def _broker(config: dict[str, Any], t: dict[str, int], data_dir: str, host: str, ports: dict[str, int],
            peers: Any) -> dict[str, Any]:
    store = posixpath.join(data_dir, "store")
    props: dict[str, Any] = {
        "brokerClusterName": CLUSTER, "brokerName": config["broker_name"],
        "brokerIP1": host, "brokerIP2": host, "haListenPort": ports["ha_port"],
        "namesrvAddr": peers("namesrv", "port", ";"),
        "storePathRootDir": store, "storePathCommitLog": posixpath.join(store, "commitlog"),
        "mappedFileSizeCommitLog": MAPPED_FILE_MB * 1024 * 1024,
        "mappedFileSizeConsumeQueue": 30000 * 20,
        # Index files (~420 MB each) serve lookup by key, which no workload uses. The timer
        # wheel serves the delayed workload, with a small timer log and few threads.
        "messageIndexEnable": False, "warmMapedFileEnable": False,
        "timerWheelEnable": True, "mappedFileSizeTimerLog": TIMER_LOG_MB * 1024 * 1024,
        "timerGetMessageThreadNum": 1, "timerPutMessageThreadNum": 1,
        # Half messages are checked back after transactionTimeOut, every transactionCheckInterval
        # (RocketMQ: 6 s and 30 s), short so a run sees its unknown transactions resolved.
        "transactionTimeOut": t["transaction_timeout_ms"], "transactionCheckInterval": t["transaction_check_ms"],
        "autoCreateTopicEnable": False, "autoCreateSubscriptionGroup": True,
        "registerNameServerPeriod": t["broker_register_interval_ms"],
        "brokerNotActiveTimeoutMillis": t["broker_not_active_timeout_ms"],
        "haSendHeartbeatInterval": t["ha_heartbeat_interval_ms"],
        "haHousekeepingInterval": t["ha_housekeeping_ms"],
        "slaveReadEnable": config["slave_read"],
        "transientStorePoolEnable": config["transient_store_pool"],
        "transientStorePoolSize": TRANSIENT_STORE_POOL_SIZE,
        "sendMessageThreadPoolNums": 2, "pullMessageThreadPoolNums": 4,
        "diskMaxUsedSpaceRatio": 95,
    }
    mode = config["mode"]
    if mode == "dledger":
        props |= {"enableDLegerCommitLog": True, "dLegerGroup": DLEDGER_GROUP, "brokerId": -1,
                  "dLegerPeers": peers("broker", "raft_port", ";", named=True),
                  "dLegerSelfId": f"n{config['index']}", "flushDiskType": "ASYNC_FLUSH"}
    elif mode == "controller":
        props |= {"enableControllerMode": True, "brokerId": -1,
                  "controllerAddr": peers("controller", "port", ";"),
                  "allAckInSyncStateSet": config["all_ack"], "flushDiskType": config["flush"],
                  "controllerHeartBeatTimeoutMills": t["controller_heartbeat_timeout_ms"],
                  "syncBrokerMetadataPeriod": t["sync_broker_metadata_ms"],
                  "checkSyncStateSetPeriod": t["check_sss_interval_ms"],
                  "syncControllerMetadataPeriod": t["sync_controller_metadata_ms"],
                  "haMaxTimeSlaveNotCatchup": t["ha_max_time_slave_not_catchup_ms"],
                  "brokerElectionPriority": config["index"] + 1}
        if not config["all_ack"]:
            props |= {"inSyncReplicas": 1, "minInSyncReplicas": 1}
        if config.get("min_in_sync"):
            props |= {"inSyncReplicas": config["min_in_sync"], "minInSyncReplicas": config["min_in_sync"]}
    elif mode == "master-slave":
        role = config["role"]
        props |= {"brokerRole": role, "brokerId": 0 if role != "SLAVE" else config["index"],
                  "flushDiskType": config.get("flush", "ASYNC_FLUSH")}
    else:
        raise ProfileError(f"broker mode '{mode}' is not a RocketMQ mode")
    return props


def properties_text(proc: RmqProcess) -> str:
    """The .properties file (keys sorted; values carry no user input but are escaped anyway)."""
    def esc(text: str) -> str:
        return text.replace("\\", "\\\\").replace("\n", "\\n")
    return "".join(f"{k}={esc(v)}\n" for k, v in sorted(proc.properties.items()))
