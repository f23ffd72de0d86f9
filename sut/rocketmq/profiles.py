"""The `rmq-*` profiles: which RocketMQ processes run on which node, as pure data.

Every profile puts the nameserver on node 0 alone (the article's layout) and
broker i (and, in Controller mode, controller i) on node i+1, so a 7-JVM
Controller-mode cluster needs 4 nodes and fits the default local cluster.
Controllers run standalone (`ControllerStartup`), not embedded in the
nameserver: a controller fault then never takes the routing down with it, and
`--target controllers` hits controllers only (docs/rocketmq.md says more).

Options the article crossed its matrix with are part of the profile name:
`-jraft` (the controllers' Raft is SOFAJRaft instead of DLedger), `-tsp`
(`transientStorePoolEnable`), `-slaveread` (`slaveReadEnable`).

Timing scales: "default" is RocketMQ's own values, "fast" shortens failure
detection and route refresh as `timing: fast` does for the model; the JVMs'
floors (a broker registers with the nameserver at most every 10 s; DLedger's
election timing is not configurable from the broker) are kept.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from typing import Any, Mapping

from sut.profiles import ProcessSpec, Profile, ProfileError

SYSTEM = "rocketmq"   # its name in sut/systems.py
PREFIX = "rmq-"

# -- timing scales (milliseconds) ------------------------------------------------------
RMQ_TIMINGS: dict[str, dict[str, int]] = {
    "default": {
        "namesrv_scan_interval_ms": 5000,           # NamesrvConfig.scanNotActiveBrokerInterval
        "broker_register_interval_ms": 30000,       # registerNameServerPeriod (clamped to >= 10 s)
        "broker_not_active_timeout_ms": 10000,      # brokerNotActiveTimeoutMillis
        "controller_heartbeat_timeout_ms": 10000,   # controllerHeartBeatTimeoutMills
        "controller_scan_interval_ms": 5000,        # ControllerConfig.scanNotActiveBrokerInterval
        "controller_scan_master_ms": 5000,          # scanInactiveMasterInterval
        "sync_broker_metadata_ms": 5000,            # syncBrokerMetadataPeriod
        "check_sss_interval_ms": 5000,              # checkSyncStateSetPeriod
        "sync_controller_metadata_ms": 10000,       # syncControllerMetadataPeriod
        "ha_max_time_slave_not_catchup_ms": 15000,  # haMaxTimeSlaveNotCatchup
        "ha_heartbeat_interval_ms": 5000,           # haSendHeartbeatInterval
        "ha_housekeeping_ms": 20000,                # haHousekeepingInterval
        "jraft_election_timeout_ms": 1000,          # jRaftElectionTimeoutMs
        "transaction_timeout_ms": 6000,             # transactionTimeOut: a half message's age before check-back
        "transaction_check_ms": 30000,              # transactionCheckInterval
    },
    "fast": {
        "namesrv_scan_interval_ms": 1000,
        "broker_register_interval_ms": 10000,
        "broker_not_active_timeout_ms": 3000,
        "controller_heartbeat_timeout_ms": 3000,
        "controller_scan_interval_ms": 1000,
        "controller_scan_master_ms": 1000,
        "sync_broker_metadata_ms": 1000,
        "check_sss_interval_ms": 1000,
        "sync_controller_metadata_ms": 2000,
        "ha_max_time_slave_not_catchup_ms": 5000,
        "ha_heartbeat_interval_ms": 1000,
        "ha_housekeeping_ms": 5000,
        "jraft_election_timeout_ms": 1000,
        "transaction_timeout_ms": 2000,
        "transaction_check_ms": 2000,
    },
}

# DLedger (dledger 0.3.x defaults; the broker passes none of them through):
# heartBeatTimeIntervalMs 2000, maxHeartBeatLeak 3, maxVoteIntervalMs 1000.
DLEDGER_DETECTION_MS = 2000 * 3 + 1000


def rmq_timing(scale: str) -> dict[str, int]:
    if scale not in RMQ_TIMINGS:
        raise ProfileError(f"unknown timing scale '{scale}' (known: {', '.join(sorted(RMQ_TIMINGS))})")
    return RMQ_TIMINGS[scale]


def failure_detection_s(profile: Profile, timing: str = "default") -> float:
    """Seconds until real RocketMQ notices a failed master, at the worst."""
    t = rmq_timing(timing)
    if profile.mode == "controller":
        ms = t["controller_heartbeat_timeout_ms"] + t["controller_scan_interval_ms"]
    elif profile.mode == "dledger":
        ms = DLEDGER_DETECTION_MS
    else:  # no failover: the nameserver drops the silent master from routes
        ms = t["broker_not_active_timeout_ms"] + t["namesrv_scan_interval_ms"]
    return ms / 1000


# -- ports and JVM sizes ----------------------------------------------------------------
# A broker also listens on port-2 (VIP channel) and on its HA port.
PORTS = {"namesrv": {"port": 9876},
         "controller": {"port": 9878, "raft_port": 9880},
         "broker": {"port": 10911, "ha_port": 10912, "raft_port": 40911}}
HEAP_MB = {"namesrv": 128, "controller": 160, "broker": 320}
MAPPED_FILE_MB = 16          # commitlog / DLedger entry files (RocketMQ: 1 GiB)
CONTROLLER_MAPPED_FILE_MB = 8
TIMER_LOG_MB = 8             # the timer wheel's log files (RocketMQ: 100 MiB)
# Direct memory of every JVM (netty's buffers); a broker with transientStorePoolEnable
# adds its pool: TRANSIENT_STORE_POOL_SIZE off-heap buffers of one commitlog file each.
DIRECT_MEMORY_MB = 128
# RocketMQ's default. The pool must keep a free buffer while one is held by the file
# being written and one by the file allocated ahead of it: with none free the broker
# refuses every send (SendMessageProcessor: isTransientStorePoolDeficient), so 2 never serves.
TRANSIENT_STORE_POOL_SIZE = 5


@dataclass(frozen=True)
class Options:
    """The article's switches, crossed with every scenario."""

    raft: str = "dledger"            # the controllers' Raft: dledger | jraft
    transient_store_pool: bool = False
    slave_read: bool = False

    @property
    def suffix(self) -> str:
        return ("-jraft" if self.raft == "jraft" else "") + ("-tsp" if self.transient_store_pool else "") \
            + ("-slaveread" if self.slave_read else "")


# What the safe profiles refuse. Every broker here flushes asynchronously and its
# replicas acknowledge from page cache (DLedger followers, Controller-mode slaves):
# an acknowledged message survives a machine crash while a majority of its broker
# group keeps it, so a crash that may hit a majority of a group (`major-crash`, or
# a minor/fixed crash that reaches that far) could take it back by design. A
# crash of a minority (leader-, random-, minor-crash, fixed-crash of one broker
# node) must lose nothing, and the gates hold such runs to it.
MAJORITY_CRASH = "major-crash"
REFUSED: dict[str, str] = {
    MAJORITY_CRASH: "a crash of a majority of a broker group at once may lose acknowledged messages by "
                    "design (ASYNC_FLUSH replicas acknowledge from page cache); crash at most a minority "
                    "of its nodes (docs/rocketmq.md, the crash fault)",
}
# The classic-HA baseline promises no loss under kill, suspend and partitions; its
# ASYNC_FLUSH master, crashed, comes back without its unflushed tail and with no
# failover serves on from the shorter log (its slave has the tail; nobody reads it).
REFUSED_WITHOUT_FAILOVER: dict[str, str] = {
    "crash": "a crash of the master loses acknowledged messages by design on this baseline (ASYNC_FLUSH, "
             "no failover); crash rmq-dledger-3 or rmq-controller-3 (docs/rocketmq.md, the crash fault)",
}


def _broker(i: int, mode: str, extra: Mapping[str, Any], opts: Options) -> ProcessSpec:
    config: dict[str, Any] = {"mode": mode, "broker_name": "broker-a", "index": i,
                              "transient_store_pool": opts.transient_store_pool,
                              "slave_read": opts.slave_read, **extra}
    return ProcessSpec(f"broker-a-{i}", "broker", i + 1, config)


NAMESRV = ProcessSpec("namesrv", "namesrv", 0, {})


def dledger(size: int, opts: Options = Options()) -> Profile:
    brokers = tuple(_broker(i, "dledger", {}, opts) for i in range(size))
    return Profile(f"rmq-dledger-{size}{opts.suffix}",
                   f"real RocketMQ 5.3, DLedger mode: {size} brokers of one group, the commitlog a Raft log "
                   "(majority ack), automatic failover", (NAMESRV, *brokers), mode="dledger",
                   system=SYSTEM, refused=REFUSED)


def controller(size: int, opts: Options = Options(), unclean: bool = False, name: str | None = None,
               min_in_sync: int | None = None) -> Profile:
    """Controller mode; the safe form acks when every SyncStateSet member has the
    message (allAckInSyncStateSet) and flushes before it acks; the unclean form acks
    from the master's page cache alone and lets any live replica be elected.
    `min_in_sync` sets minInSyncReplicas (and inSyncReplicas): the master refuses every
    write, half messages and transaction commits included, while its SyncStateSet is smaller."""
    ack = {"all_ack": not unclean, "flush": "ASYNC_FLUSH" if unclean else "SYNC_FLUSH",
           **({"min_in_sync": min_in_sync} if min_in_sync else {})}
    controllers = tuple(ProcessSpec(f"controller-{i}", "controller", i + 1,
                                    {"raft": opts.raft, "unclean": unclean, "index": i}) for i in range(3))
    brokers = tuple(_broker(i, "controller", ack, opts) for i in range(size))
    what = ("unclean election and master-only ack: expected to lose acknowledged messages under faults"
            if unclean else "ack when every SyncStateSet member has the message, SYNC_FLUSH")
    if min_in_sync:
        what += f", minInSyncReplicas={min_in_sync} (writes refused while the SyncStateSet is smaller)"
    return Profile(name or f"rmq-controller-{size}{opts.suffix}",
                   f"real RocketMQ 5.3, Controller mode: 3 standalone controllers ({opts.raft}) + {size} "
                   f"brokers, {what}", (NAMESRV, *controllers, *brokers), mode="controller",
                   expected_safe=not unclean,
                   unsafe_under=("kill", "suspend", "partition", "crash") if unclean else (),
                   system=SYSTEM, refused={} if unclean else REFUSED)


def master_slave_sync() -> Profile:
    brokers = (_broker(0, "master-slave", {"role": "SYNC_MASTER"}, Options()),
               _broker(1, "master-slave", {"role": "SLAVE"}, Options()))
    return Profile("rmq-master-slave-sync", "real RocketMQ 5.3, classic HA: a SYNC_MASTER and its SLAVE, "
                   "no failover (the baseline)", (NAMESRV, *brokers), mode="master-slave",
                   system=SYSTEM, refused=REFUSED_WITHOUT_FAILOVER)


def single_sync() -> Profile:
    """One broker that acknowledges a message only once it is on its disk: a machine crash
    must lose nothing acknowledged. The setting of the failed-flush report (docs/rocketmq-bugs.md)."""
    broker = _broker(0, "master-slave", {"role": "ASYNC_MASTER", "flush": "SYNC_FLUSH"}, Options())
    return Profile("rmq-single-sync", "real RocketMQ 5.3, one broker, SYNC_FLUSH (a send is acknowledged once "
                   "flushed to its disk), no replica, no failover", (NAMESRV, broker), mode="master-slave",
                   system=SYSTEM)


def _all() -> dict[str, Profile]:
    found = [controller(3, name="rmq-controller-unclean", unclean=True), master_slave_sync(), single_sync(),
             # Two replicas that must both hold every write: the setting of the
             # transactional-commit report (docs/rocketmq-consumption-bugs.md).
             controller(2, name="rmq-controller-2-minsync2", min_in_sync=2)]
    for tsp, read in product((False, True), repeat=2):
        found.append(dledger(3, Options(transient_store_pool=tsp, slave_read=read)))
        for raft in ("dledger", "jraft"):
            found.append(controller(3, Options(raft=raft, transient_store_pool=tsp, slave_read=read)))
    return {p.name: p for p in found}


PROFILES: dict[str, Profile] = _all()
