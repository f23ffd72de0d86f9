"""SUT profiles: the one place that says which processes run where, with what config.

A profile is pure data: processes, each with a role, a node index and its
config values. Config values may hold three kinds of markers, filled in by
`render` once the nodes are known:

- Timing("key"): a timing value from the chosen scale in TIMINGS ("default"
  = RocketMQ's defaults, "fast" = a tenth, for tests);
- Address("process", "port_key"): "host:port" of one process of the profile;
- Peers("role", "port_key", group=None): the list of such addresses for every
  process of a role (optionally only those whose broker_name is `group`).

Ports are top-level int config fields named `port` or `*_port`, so `render`
can move them (tests on loopback give every process free ports). `render`
also sets `host` (the node's address) and `data_dir` (under the node's
workdir) for every process.

To add a profile, add an entry to PROFILES (and any new timing keys to
TIMINGS["default"]).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from sut import bugs as bug_library


@dataclass(frozen=True)
class Timing:
    key: str


@dataclass(frozen=True)
class Address:
    process: str
    port: str = "port"


@dataclass(frozen=True)
class Peers:
    role: str
    port: str = "port"
    group: str | None = None


@dataclass(frozen=True)
class ProcessSpec:
    name: str                 # unique in the profile; also names the data directory
    role: str                 # namesrv | broker | controller
    node: int                 # index into the inventory's nodes
    config: Mapping[str, Any] = field(default_factory=dict)


# Fault families, for `Profile.unsafe_under` (a fault name's family is the part
# after its target word: `leader-partition` -> partition, `random-kill` -> kill).
FAULT_FAMILIES = ("kill", "suspend", "partition", "loss", "crash")


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    processes: tuple[ProcessSpec, ...]
    # The HA design, for comparisons: dledger | controller | master-slave | single.
    mode: str = "single"
    # Whether the profile promises that no acknowledged message is ever lost.
    # Checkers and campaign gates read this one fact: an expected-unsafe profile
    # that a campaign never finds invalid means the harness has lost its teeth.
    expected_safe: bool = True
    # For an expected-unsafe profile: the fault families under which it is expected
    # to lose acknowledged data (so a gate knows which runs should catch it).
    unsafe_under: tuple[str, ...] = ()
    # Which system runs it: a name in sut/systems.py's table, whose entry gives the
    # deployer, the client and the failure-detection facts.
    system: str = "model"
    # Fault families (or single fault names) this profile cannot take, each with the
    # reason a run refuses it.
    refused: Mapping[str, str] = field(default_factory=dict)

    @property
    def nodes_needed(self) -> int:
        return max(p.node for p in self.processes) + 1

    def of_role(self, role: str) -> list[ProcessSpec]:
        return [p for p in self.processes if p.role == role]


class ProfileError(Exception):
    """An unknown profile or a profile that does not fit the inventory (one line)."""


# -- timing scales ------------------------------------------------------------------
TIMINGS: dict[str, dict[str, int]] = {
    "default": {
        # nameserver (RIP-32 lightweight heartbeats)
        "namesrv_scan_interval_ms": 5000,        # scanNotActiveBrokerInterval
        "broker_timeout_ms": 10000,              # brokerNotActiveTimeoutMillis
        "broker_heartbeat_interval_ms": 1000,    # brokerHeartbeatInterval
        "broker_register_interval_ms": 30000,    # registerNameServerPeriod
        "broker_heartbeat_timeout_ms": 1000,     # sendHeartbeatTimeoutMillis
        "namesrv_connect_timeout_ms": 3000,      # connectTimeoutMillis (broker -> nameserver)
        # store
        "flush_interval_ms": 500,                # flushIntervalCommitLog
        "sync_flush_timeout_ms": 5000,           # syncFlushTimeout
        "checkpoint_interval_ms": 1000,          # flushIntervalConsumeQueue
        "offset_flush_interval_ms": 5000,        # flushConsumerOffsetInterval
        "metadata_sync_interval_ms": 10000,      # SlaveSynchronize period (topics, offsets)
        # classic HA
        "slave_timeout_ms": 3000,                # slaveTimeout
        "ha_heartbeat_interval_ms": 5000,        # haSendHeartbeatInterval
        "ha_housekeeping_ms": 20000,             # haHousekeepingInterval
        "ha_reconnect_interval_ms": 5000,        # HAClient reconnect wait
        # DLedger (Raft): heartBeatTimeIntervalMs, min/maxVoteIntervalMs, push resend
        "raft_heartbeat_interval_ms": 2000,
        "raft_min_vote_interval_ms": 300,
        "raft_max_vote_interval_ms": 1000,
        "raft_resend_ms": 1000,
        "raft_vote_wait_ms": 2000,               # vote round: 2000 ms + random(maxVoteIntervalMs)
        "raft_max_wait_ack_ms": 2500,            # maxWaitAckTimeMs: an append waits this long for commit
        # Controller mode (RIP-44)
        "controller_heartbeat_interval_ms": 1000,   # broker -> every controller
        "controller_heartbeat_timeout_ms": 10000,   # controllerHeartBeatTimeoutMills
        "controller_scan_interval_ms": 5000,        # scanNotActiveBrokerInterval (controller)
        "sync_replica_info_interval_ms": 5000,      # syncBrokerMetadataPeriod
        "check_sss_interval_ms": 5000,              # checkSyncStateSetPeriod
        "ha_max_time_slave_not_catchup_ms": 15000,  # haMaxTimeSlaveNotCatchup
        "controller_ha_reconnect_ms": 1000,         # AutoSwitch HA client reconnect wait
    },
}
TIMINGS["fast"] = {k: max(1, v // 10) for k, v in TIMINGS["default"].items()}


def timing_values(scale: str) -> dict[str, int]:
    if scale not in TIMINGS:
        raise ProfileError(f"unknown timing scale '{scale}' (known: {', '.join(sorted(TIMINGS))})")
    return TIMINGS[scale]


# -- failure detection -------------------------------------------------------------
# DLedger's maxHeartBeatLeak: a follower starts an election after this many
# missed heartbeats (sut/dledger.py DLedgerSettings keeps the same default).
RAFT_MAX_HEARTBEAT_LEAK = 3


def failure_detection_s(profile: Profile | str, timing: str = "default") -> float:
    """Seconds until the model notices that its master (or leader) is gone, at the worst.

    - controller mode: the controllers declare the master dead after its heartbeat
      timeout, found by the next inactive-broker scan (timeout + scan interval);
    - DLedger mode: followers call an election after maxHeartBeatLeak missed
      heartbeats plus at most one vote interval;
    - master-slave and single: no failover; the nameserver drops the broker from
      routes after its broker timeout plus one scan interval.
    The model's entry in sut/systems.py; callers ask sut.systems.failure_detection_s,
    which knows every system's.
    """
    profile = get(profile) if isinstance(profile, str) else profile
    t = timing_values(timing)
    if profile.mode == "controller":
        ms = t["controller_heartbeat_timeout_ms"] + t["controller_scan_interval_ms"]
    elif profile.mode == "dledger":
        ms = t["raft_heartbeat_interval_ms"] * RAFT_MAX_HEARTBEAT_LEAK + t["raft_max_vote_interval_ms"]
    else:
        ms = t["broker_timeout_ms"] + t["namesrv_scan_interval_ms"]
    return ms / 1000


# -- building blocks -------------------------------------------------------------------
DEFAULT_TOPICS = {"chaos": 4}

NAMESRV = {"port": 9876,
           "scan_interval_ms": Timing("namesrv_scan_interval_ms"),
           "broker_timeout_ms": Timing("broker_timeout_ms")}

BROKER_BASE: dict[str, Any] = {
    "port": 10911,
    "ha_port": 10912,
    "cluster": "chaos",
    "namesrv_addrs": Peers("namesrv"),
    "topics": DEFAULT_TOPICS,
    "register_interval_ms": Timing("broker_register_interval_ms"),
    "heartbeat_interval_ms": Timing("broker_heartbeat_interval_ms"),
    "heartbeat_timeout_ms": Timing("broker_heartbeat_timeout_ms"),
    "namesrv_connect_timeout_ms": Timing("namesrv_connect_timeout_ms"),
    "offset_flush_interval_ms": Timing("offset_flush_interval_ms"),
    "metadata_sync_interval_ms": Timing("metadata_sync_interval_ms"),
    "store": {"flush_disk_type": "ASYNC_FLUSH",
              "flush_interval_ms": Timing("flush_interval_ms"),
              "sync_flush_timeout_ms": Timing("sync_flush_timeout_ms"),
              "checkpoint_interval_ms": Timing("checkpoint_interval_ms")},
}

MASTER_SLAVE_HA: dict[str, Any] = {
    "slave_timeout_ms": Timing("slave_timeout_ms"),
    "heartbeat_interval_ms": Timing("ha_heartbeat_interval_ms"),
    "housekeeping_ms": Timing("ha_housekeeping_ms"),
    "reconnect_interval_ms": Timing("ha_reconnect_interval_ms"),
}


def _single(name: str, flush: str) -> Profile:
    # ASYNC_FLUSH acks from the page cache: a machine crash loses what the flush
    # interval had not reached. SYNC_FLUSH acks after the fdatasync: nothing.
    broker = {**BROKER_BASE, "broker_name": "broker-a", "broker_id": 0, "ha_mode": "master-slave",
              "ha": {"broker_role": "ASYNC_MASTER"}, "store": {**BROKER_BASE["store"], "flush_disk_type": flush}}
    unsafe = ("crash",) if flush == "ASYNC_FLUSH" else ()
    return Profile(name, f"one nameserver and one broker with {flush}, no replication "
                   "(smoke tests, benchmarks, crash baselines)",
                   (ProcessSpec("namesrv", "namesrv", 0, NAMESRV), ProcessSpec("broker-a-0", "broker", 0, broker)),
                   expected_safe=not unsafe, unsafe_under=unsafe)


def _master_slave(name: str, master_role: str, description: str, slaves: int = 1,
                  acting_master: bool = False) -> Profile:
    def broker(proc: str, node: int, broker_id: int, role: str) -> ProcessSpec:
        ha = {**MASTER_SLAVE_HA, "broker_role": role}
        if role == "SYNC_MASTER":
            ha["in_sync_replicas"] = 2
        return ProcessSpec(proc, "broker", node, {**BROKER_BASE, "broker_name": "broker-a",
                                                  "broker_id": broker_id, "ha_mode": "master-slave",
                                                  "slave_acting_master": acting_master, "ha": ha})
    # Classic HA acks from page caches (ASYNC_FLUSH): a machine crash of the master
    # loses its unflushed tail, and with no failover the restarted master serves on
    # from its shorter log (an ASYNC_MASTER also loses what its slave had not pulled;
    # a SYNC_MASTER's slave has it, but nobody reads it). kill -9 keeps the page cache.
    unsafe = ("crash",)
    return Profile(name, description, (
        ProcessSpec("namesrv", "namesrv", 0, NAMESRV),
        broker("broker-a-0", 0, 0, master_role),
        *(broker(f"broker-a-{i}", i, i, "SLAVE") for i in range(1, slaves + 1)),
    ), mode="master-slave", expected_safe=not unsafe, unsafe_under=unsafe)


# The safe replicated profiles fsync before they acknowledge (DLedger: the Raft
# log per append batch; Controller mode: SYNC_FLUSH commitlog, controllers' Raft
# log). A replicated ack that lives only in page caches is taken back when the
# machine holding it crashes and comes back first (docs/sut.md, "What the crash
# nemesis found"); kill -9, pauses and partitions never need the fsync.
DURABLE_STORE: dict[str, Any] = {**BROKER_BASE["store"], "flush_disk_type": "SYNC_FLUSH"}

DLEDGER_HA: dict[str, Any] = {
    "sync_flush": True,
    "heartbeat_interval_ms": Timing("raft_heartbeat_interval_ms"),
    "min_vote_interval_ms": Timing("raft_min_vote_interval_ms"),
    "max_vote_interval_ms": Timing("raft_max_vote_interval_ms"),
    "resend_ms": Timing("raft_resend_ms"),
    "vote_wait_ms": Timing("raft_vote_wait_ms"),
    "max_wait_ack_ms": Timing("raft_max_wait_ack_ms"),
}


def _dledger(name: str, size: int, namesrv_node: int = 0) -> Profile:
    """One broker group of `size` brokers whose commitlog is a Raft log (sut/dledger.py);
    the Raft endpoint of each broker is its ha_port. A nameserver beside the first
    leader would be cut off with it by every partition that isolates that leader,
    leaving the majority's new leader unroutable, so where the default cluster has
    a spare node the nameserver gets it (docs/sut.md, "Where the nameserver runs")."""
    brokers = tuple(
        ProcessSpec(f"broker-a-{i}", "broker", i, {
            **BROKER_BASE, "broker_name": "broker-a", "broker_id": i + 1, "ha_mode": "dledger",
            "ha": {**DLEDGER_HA, "peers": Peers("broker", "ha_port", group="broker-a")}})
        for i in range(size))
    return Profile(name, f"DLedger mode: {size} brokers, the commitlog replicated by Raft, "
                         f"fsynced majority ack, automatic failover", (ProcessSpec("namesrv", "namesrv", namesrv_node, NAMESRV),
                                                               *brokers), mode="dledger")


CONTROLLER: dict[str, Any] = {
    "port": 9878,
    "raft_port": 9880,
    "controller_addrs": Peers("controller"),
    "raft_addrs": Peers("controller", "raft_port"),
    "raft_timing": {"heartbeat_interval_ms": Timing("raft_heartbeat_interval_ms"),
                    "min_vote_interval_ms": Timing("raft_min_vote_interval_ms"),
                    "max_vote_interval_ms": Timing("raft_max_vote_interval_ms"),
                    "resend_ms": Timing("raft_resend_ms"),
                    "vote_wait_ms": Timing("raft_vote_wait_ms")},
    "broker_heartbeat_timeout_ms": Timing("controller_heartbeat_timeout_ms"),
    "scan_interval_ms": Timing("controller_scan_interval_ms"),
    "raft_sync_flush": True,
}

CONTROLLER_HA: dict[str, Any] = {
    "controller_addrs": Peers("controller"),
    "heartbeat_interval_ms": Timing("controller_heartbeat_interval_ms"),
    "heartbeat_timeout_ms": Timing("controller_heartbeat_timeout_ms"),
    "sync_replica_info_interval_ms": Timing("sync_replica_info_interval_ms"),
    "check_sync_state_set_interval_ms": Timing("check_sss_interval_ms"),
    "ha_max_time_slave_not_catchup_ms": Timing("ha_max_time_slave_not_catchup_ms"),
    "slave_timeout_ms": Timing("slave_timeout_ms"),
    "ha_heartbeat_interval_ms": Timing("ha_heartbeat_interval_ms"),
    "ha_housekeeping_ms": Timing("ha_housekeeping_ms"),
    "ha_reconnect_interval_ms": Timing("controller_ha_reconnect_ms"),
}


def _controller(name: str, brokers: int, description: str, unclean: bool = False) -> Profile:
    """Controller mode: 3 controllers (Raft) and one broker group with AutoSwitch HA.
    Safe profiles ack when every SyncStateSet member has the message and the master
    has fsynced it (SYNC_FLUSH); the unclean one acks from the master's page cache
    alone and lets any live replica become master."""
    ack = ({"all_ack_in_sync_state_set": False, "in_sync_replicas": 1} if unclean
           else {"all_ack_in_sync_state_set": True})
    controllers = tuple(
        ProcessSpec(f"controller-{i}", "controller", i,
                    {**CONTROLLER, "enable_unclean_election": unclean})
        for i in range(3))
    group = tuple(
        ProcessSpec(f"broker-a-{i}", "broker", i, {
            **BROKER_BASE, "broker_name": "broker-a", "ha_mode": "controller",
            "ha": {**CONTROLLER_HA, **ack}, **({} if unclean else {"store": DURABLE_STORE})})
        for i in range(brokers))
    return Profile(name, description,
                   (ProcessSpec("namesrv", "namesrv", 0, NAMESRV), *controllers, *group),
                   mode="controller", expected_safe=not unclean,
                   unsafe_under=("kill", "suspend", "partition", "crash") if unclean else ())


PROFILES: dict[str, Profile] = {
    "controller-3": _controller(
        "controller-3", 3, "Controller mode: 3 controllers + 3 brokers, AutoSwitch HA, SYNC_FLUSH, ack "
        "when every SyncStateSet member has the message"),
    "controller-2": _controller(
        "controller-2", 2, "Controller mode: 3 controllers + 2 brokers, AutoSwitch HA, SYNC_FLUSH, ack "
        "when every SyncStateSet member has the message"),
    "controller-unclean": _controller(
        "controller-unclean", 3, "Controller mode with unclean election and master-only ack: "
        "expected to lose acknowledged messages under faults", unclean=True),
    "dledger-3": _dledger("dledger-3", 3, namesrv_node=3),
    "dledger-5": _dledger("dledger-5", 5),
    "master-slave-sync": _master_slave(
        "master-slave-sync", "SYNC_MASTER",
        "classic HA: a SYNC_MASTER waits for its slave (in_sync_replicas 2), no failover"),
    "master-slave-async": _master_slave(
        "master-slave-async", "ASYNC_MASTER",
        "classic HA: an ASYNC_MASTER acks before its slave has the data, no failover"),
    # RIP-32: no write failover; a masterless group is served read-only by its
    # smallest-id slave. SYNC_MASTER acks with one slave's copy, so it is as safe as
    # master-slave-sync (acting masters never take writes): safe but under crash.
    "acting-master": _master_slave(
        "acting-master", "SYNC_MASTER",
        "RIP-32 slave acting master: 1 SYNC_MASTER + 2 slaves; without a master the slave "
        "with the smallest id serves reads and consumer offsets read-only as id 0",
        slaves=2, acting_master=True),
    "single-broker": _single("single-broker", "ASYNC_FLUSH"),
    "single-broker-sync": _single("single-broker-sync", "SYNC_FLUSH"),
}


def serves_kv(role: str, config: Mapping[str, Any]) -> bool:
    """Whether a process serves the Raft KV store on its port (raft members, DLedger brokers)."""
    return role == "raft" or (role == "broker" and config.get("ha_mode") == "dledger")


def get(name: str) -> Profile:
    """One of the model's profiles (sut.systems.profile knows every system's)."""
    try:
        return PROFILES[name]
    except KeyError:
        raise ProfileError(f"unknown profile '{name}' (known: {', '.join(sorted(PROFILES))})") from None


# -- rendering ---------------------------------------------------------------------------
@dataclass
class RenderedProcess:
    """One process ready to start: its final JSON config and where it runs."""

    name: str
    role: str
    node: int
    host: str
    config: dict[str, Any]

    @property
    def address(self) -> str:
        return f"{self.host}:{self.config['port']}"

    @property
    def data_dir(self) -> str:
        return self.config["data_dir"]


PortMap = Callable[[str, str, int], int]  # (process name, port key, profile's port) -> port


def render(profile: Profile, hosts: list[str], workdirs: list[str], timing: str = "default",
           ports: PortMap | None = None, bugs: tuple[str, ...] = ()) -> list[RenderedProcess]:
    """Concrete configs for every process of a profile on the given nodes; `bugs`
    (sut/bugs.py) go into the config of every process whose role carries them."""
    if len(hosts) < profile.nodes_needed or len(workdirs) < profile.nodes_needed:
        raise ProfileError(f"profile {profile.name} needs {profile.nodes_needed} nodes, "
                           f"the inventory has {min(len(hosts), len(workdirs))}")
    values = timing_values(timing)
    placed: dict[str, RenderedProcess] = {}
    for spec in profile.processes:
        config = _resolve_timing(dict(spec.config), values, f"{profile.name}/{spec.name}")
        for key, value in list(config.items()):
            if (key == "port" or key.endswith("_port")) and isinstance(value, int):
                config[key] = ports(spec.name, key, value) if ports else value
        config["host"] = hosts[spec.node]
        config["data_dir"] = f"{workdirs[spec.node].rstrip('/')}/data/{spec.name}"
        switched_on = bug_library.for_role(bugs, spec.role)
        if switched_on:
            config[bug_library.CONFIG_KEY] = switched_on
        placed[spec.name] = RenderedProcess(spec.name, spec.role, spec.node, hosts[spec.node], config)
    for proc in placed.values():
        proc.config = _resolve_addresses(proc.config, placed, f"{profile.name}/{proc.name}")
    return list(placed.values())


def _resolve_timing(value: Any, values: dict[str, int], where: str) -> Any:
    if isinstance(value, Timing):
        if value.key not in values:
            raise ProfileError(f"{where}: unknown timing key '{value.key}'")
        return values[value.key]
    if isinstance(value, Mapping):
        return {k: _resolve_timing(v, values, where) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_resolve_timing(v, values, where) for v in value]
    return value


def _resolve_addresses(value: Any, placed: dict[str, RenderedProcess], where: str) -> Any:
    if isinstance(value, Address):
        proc = placed.get(value.process)
        if proc is None or value.port not in proc.config:
            raise ProfileError(f"{where}: no process '{value.process}' with a '{value.port}'")
        return f"{proc.host}:{proc.config[value.port]}"
    if isinstance(value, Peers):
        return [f"{p.host}:{p.config[value.port]}" for p in placed.values()
                if p.role == value.role and value.port in p.config
                and (value.group is None or p.config.get("broker_name") == value.group)]
    if isinstance(value, Mapping):
        return {k: _resolve_addresses(v, placed, where) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve_addresses(v, placed, where) for v in value]
    return value
