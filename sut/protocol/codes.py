"""The request and response codes: one table shared by every server and client in the SUT."""
from __future__ import annotations

import enum


class RequestCode(enum.IntEnum):
    """Every request the SUT understands. Add new codes here, nowhere else."""

    # every process: {role, name, ready, ...role-specific fields}
    PROCESS_STATUS = 1
    # broker data plane
    SEND_MESSAGE = 10
    SEND_BATCH = 11
    PULL_MESSAGE = 12
    QUERY_MAX_OFFSET = 13
    QUERY_MIN_OFFSET = 14
    COMMIT_CONSUMER_OFFSET = 15
    QUERY_CONSUMER_OFFSET = 16
    BROKER_STATUS = 17
    CREATE_TOPIC = 18
    GET_ALL_METADATA = 19   # topics + consumer offsets (RocketMQ GET_ALL_TOPIC_CONFIG/CONSUMER_OFFSET)
    # consumer groups (RocketMQ HEART_BEAT, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP)
    CONSUMER_HEARTBEAT = 20
    UNREGISTER_CONSUMER = 21
    GET_CONSUMER_LIST = 22
    # nameserver
    REGISTER_BROKER = 100
    UNREGISTER_BROKER = 101
    BROKER_HEARTBEAT = 102
    GET_ROUTE = 103
    GET_CLUSTER_INFO = 104
    GET_BROKER_MEMBER_GROUP = 105     # RIP-32: the live members of a broker group
    NOTIFY_MIN_BROKER_ID_CHANGE = 106  # RIP-32: nameserver -> brokers, the acting master changed
    # replication between brokers (classic HA and AutoSwitch)
    HA_HANDSHAKE = 200
    HA_TRANSFER = 201
    HA_ACK = 202
    # raft (DLedger mode and controllers)
    RAFT_VOTE = 300
    RAFT_APPEND = 301
    RAFT_HEARTBEAT = 302
    RAFT_STATUS = 303
    RAFT_PROPOSE = 304      # client append of one entry to the Raft log
    RAFT_READ_LOG = 305     # read committed entries (tests, log-matching checks)
    # linearizable key-value state machine on Raft
    KV_READ = 320
    KV_WRITE = 321
    KV_CAS = 322
    # controller (RIP-44)
    CONTROLLER_REGISTER_BROKER = 400
    CONTROLLER_GET_NEXT_BROKER_ID = 401
    CONTROLLER_APPLY_BROKER_ID = 402
    CONTROLLER_ALTER_SYNC_STATE_SET = 403
    CONTROLLER_ELECT_MASTER = 404
    CONTROLLER_GET_REPLICA_INFO = 405
    CONTROLLER_GET_SYNC_STATE_DATA = 406
    CONTROLLER_BROKER_HEARTBEAT = 407
    CONTROLLER_CLEAN_BROKER_DATA = 408
    CONTROLLER_GET_METADATA = 409
    CONTROLLER_NOTIFY_ROLE_CHANGE = 410
    CONTROLLER_UPDATE_BROKER_ADDRESS = 411


class ResponseCode(enum.IntEnum):
    """Every response status. Clients classify these into ok / fail / indeterminate."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    BAD_REQUEST = 4
    # send statuses (docs/ha-protocol.md, "Send statuses")
    FLUSH_DISK_TIMEOUT = 10
    FLUSH_SLAVE_TIMEOUT = 11
    SLAVE_NOT_AVAILABLE = 12
    SERVICE_NOT_AVAILABLE = 13
    DISK_FULL = 15  # the store's disk is full: refused before the append (sut/store/disk_space.py)
    NOT_MASTER = 14
    TOPIC_NOT_EXIST = 17
    PULL_NOT_FOUND = 19
    PULL_OFFSET_MOVED = 20
    QUERY_NOT_FOUND = 22
    # raft
    NOT_LEADER = 30
    APPEND_TIMEOUT = 31
    PENDING_FULL = 32
    TERM_STALE = 33
    INCONSISTENT_LOG = 34
    CAS_MISMATCH = 35
    # controller
    CONTROLLER_NOT_LEADER = 40
    CONTROLLER_FENCED_MASTER_ID = 41
    CONTROLLER_FENCED_MASTER_EPOCH = 42
    CONTROLLER_FENCED_SSS_EPOCH = 43
    CONTROLLER_INVALID_REQUEST = 44
    CONTROLLER_MASTER_STILL_EXISTS = 45
    CONTROLLER_MASTER_NOT_AVAILABLE = 46
    CONTROLLER_BROKER_NOT_ALIVE = 47
    CONTROLLER_BROKER_ID_INVALID = 48
    CONTROLLER_BROKER_NEED_TO_BE_REGISTERED = 49
    CONTROLLER_ELECT_MASTER_FAILED = 50
    CONTROLLER_INVALID_CLEAN_BROKER_METADATA = 51
    CONTROLLER_ALTER_SYNC_STATE_SET_FAILED = 52
    CONTROLLER_BROKER_METADATA_NOT_EXIST = 53
