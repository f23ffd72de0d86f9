"""The broker process: requests, topics, consumer offsets, nameserver registration.

Replication lives behind an HAStrategy chosen by `ha_mode` (sut/ha/); the
broker asks it whether and how to append (put), what consumers may read
(confirm_offset) and what to tell the nameservers (registration).
"""
from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

from sut import bugs
from sut.broker_metadata import MetadataVersion, merge_document, metadata_document, parse_document
from sut.config import ConfigError, parse, split_address
from sut.consumer_groups import CONSUMER_EXPIRY_MS, ConsumerGroups
from sut.ha import HAStrategy, Role, strategy_class
from sut.message import MAX_MSG_ID, Message, valid_topic
from sut.process import Service, StartupError
from sut.protocol import (
    MAX_FRAME_BYTES, BadRequest, Command, Connection, RequestCode, ResponseCode, RpcClient,
    RpcError, RpcServer, get_field,
)
from sut.store.commitlog import StoreError
from sut.store.disk_space import DiskSpace
from sut.store.message_store import MessageStore, StoreConfig
from sut.store.metadata import ConsumerOffsets, TopicTable

RC = ResponseCode
PERM_READ, PERM_WRITE = 4, 2
_PULL_STATUS = {"FOUND": RC.SUCCESS, "NO_NEW_MESSAGE": RC.PULL_NOT_FOUND,
                "NO_MATCHED_QUEUE": RC.PULL_NOT_FOUND, "OFFSET_TOO_SMALL": RC.PULL_OFFSET_MOVED,
                "OFFSET_OVERFLOW": RC.PULL_OFFSET_MOVED}


@dataclass
class BrokerConfig:
    """A broker's JSON config (RocketMQ names in brackets)."""

    data_dir: str
    host: str = "127.0.0.1"                 # listen address
    advertise_host: str | None = None       # address in routes, if not `host` (e.g. 0.0.0.0)
    port: int = 10911                       # [listenPort]
    ha_port: int = 10912                    # [haListenPort]
    cluster: str = "DefaultCluster"         # [brokerClusterName]
    broker_name: str = "broker-a"           # [brokerName]
    broker_id: int = 0                      # [brokerId]: 0 = master
    namesrv_addrs: list[str] = field(default_factory=list)  # [namesrvAddr]
    ha_mode: str = "master-slave"
    ha: dict[str, Any] = field(default_factory=dict)         # settings of the ha_mode
    store: StoreConfig = field(default_factory=StoreConfig)
    topics: dict[str, int] = field(default_factory=dict)     # topic -> queue count
    auto_create_topic: bool = True          # [autoCreateTopicEnable]
    default_queue_count: int = 4            # [defaultTopicQueueNums]
    register_interval_ms: int = 30000       # [registerNameServerPeriod]
    heartbeat_interval_ms: int = 1000       # [brokerHeartbeatInterval] (lightweight)
    heartbeat_timeout_ms: int = 1000        # [sendHeartbeatTimeoutMillis]
    namesrv_connect_timeout_ms: int = 3000  # [connectTimeoutMillis] (the remoting client's)
    offset_flush_interval_ms: int = 5000    # [flushConsumerOffsetInterval]
    metadata_sync_interval_ms: int = 10000  # SlaveSynchronize period: slaves copy topics/offsets
    consumer_expiry_ms: int = CONSUMER_EXPIRY_MS  # [channelExpiredTimeout]: a silent consumer leaves
    slave_acting_master: bool = False       # [enableSlaveActingMaster] (RIP-32)
    max_pull_count: int = 32                # [maxTransferCountOnMessageInMemory]
    max_pull_bytes: int = 256 * 1024        # [maxTransferBytesOnMessageInMemory]
    max_suspend_ms: int = 15000             # longest long-polling pull
    max_frame_bytes: int = MAX_FRAME_BYTES

    def validate(self) -> str | None:
        for i, addr in enumerate(self.namesrv_addrs):
            try:
                split_address(addr, f"namesrv_addrs[{i}]")
            except ConfigError as exc:
                return str(exc)
        for topic, queues in self.topics.items():
            if not valid_topic(topic):
                return f"topic name '{topic}' is not valid (letters, digits, _ - % |; 1-127 chars)"
            if not 0 < queues <= 1024:
                return f"topic '{topic}' needs 1..1024 queues, got {queues}"
        if not 0 < self.default_queue_count <= 1024:
            return "default_queue_count must be 1..1024"
        if self.store.max_message_bytes + 1024 > self.max_frame_bytes:
            return "max_frame_bytes must exceed store.max_message_bytes"
        if min(self.register_interval_ms, self.heartbeat_interval_ms, self.heartbeat_timeout_ms,
               self.namesrv_connect_timeout_ms,
               self.offset_flush_interval_ms, self.metadata_sync_interval_ms, self.consumer_expiry_ms,
               self.max_pull_count, self.max_pull_bytes) <= 0:
            return "intervals and pull limits must be positive"
        return None


def create(raw: dict[str, Any], source: str) -> "Broker":
    """Factory for `python -m sut broker`: check the whole config, including the ha object."""
    config = parse(BrokerConfig, raw, f"config {source}")
    cls = strategy_class(config.ha_mode)
    settings = parse(cls.settings_class, config.ha, f"config {source}: ha")
    problem = cls.check_config(config, settings)
    if problem:
        raise ConfigError(f"config {source}: {problem}")
    return Broker(config, cls, settings)


class Broker(Service):
    role = "broker"

    def __init__(self, config: BrokerConfig, ha_class: type[HAStrategy], ha_settings: Any) -> None:
        super().__init__(config.data_dir)
        self.config = config
        self.store = MessageStore(self.data_dir, config.store, self.log)
        self.disk = DiskSpace(self.data_dir)  # a full disk refuses sends before the append
        self.topics = TopicTable(self.data_dir / "config" / "topics.json", self.log)
        self.offsets = ConsumerOffsets(self.data_dir / "config" / "consumer_offsets.json", self.log)
        self.consumers = ConsumerGroups(config.consumer_expiry_ms)
        self.ha: HAStrategy = ha_class(self, ha_settings)
        self.server = RpcServer(config.host, config.port, self.handle, self.log,
                                max_frame=config.max_frame_bytes)
        # A timed-out call closes its connection (clientCloseSocketIfTimeout), so a broker
        # whose link to a nameserver heals reaches it within one heartbeat, not after TCP's
        # retransmission backoff; a new leader cut off from it then registers soon after.
        self._namesrv = [RpcClient(*split_address(a, "namesrv_addrs"), on_push=self._on_namesrv_push,
                                   connect_timeout=config.namesrv_connect_timeout_ms / 1000,
                                   close_on_timeout=True)
                         for a in config.namesrv_addrs]
        self.registered: set[str] = set()
        self.metadata_version = MetadataVersion()
        self.master_addr: str | None = None   # the group's master, as the nameservers say
        self.acting_master = False            # RIP-32: this slave acts as the group's master
        self._pre_online_done = False
        self._peers: dict[str, RpcClient] = {}
        self._register_now = asyncio.Event()
        self._started = False
        self._handlers = {
            RequestCode.SEND_MESSAGE: self._on_send,
            RequestCode.SEND_BATCH: self._on_send_batch,
            RequestCode.PULL_MESSAGE: self._on_pull,
            RequestCode.QUERY_MAX_OFFSET: self._on_max_offset,
            RequestCode.QUERY_MIN_OFFSET: self._on_min_offset,
            RequestCode.COMMIT_CONSUMER_OFFSET: self._on_commit_offset,
            RequestCode.QUERY_CONSUMER_OFFSET: self._on_query_offset,
            RequestCode.CONSUMER_HEARTBEAT: self._on_consumer_heartbeat,
            RequestCode.UNREGISTER_CONSUMER: self._on_unregister_consumer,
            RequestCode.GET_CONSUMER_LIST: self._on_consumer_list,
            RequestCode.CREATE_TOPIC: self._on_create_topic,
            RequestCode.GET_ALL_METADATA: self._on_get_all_metadata,
            RequestCode.BROKER_STATUS: self._on_status,
            RequestCode.PROCESS_STATUS: self._on_status,
        }
        self._handlers.update(self.ha.handlers())

    # -- BrokerContext for the HA strategy -------------------------------------------
    @property
    def address(self) -> str:
        return f"{self.config.advertise_host or self.config.host}:{self.config.port}"

    @property
    def ha_address(self) -> str:
        return f"{self.config.advertise_host or self.config.host}:{self.config.ha_port}"

    def registration_changed(self) -> None:
        self._register_now.set()

    # -- lifecycle --------------------------------------------------------------------
    async def start(self) -> None:
        try:
            self.store.recover()
        except (StoreError, OSError) as exc:
            raise StartupError(f"cannot recover the store in {self.data_dir}: {exc}") from None
        self.topics.load(self.config.topics)
        self.offsets.load()
        await self.store.start(self.spawn)
        await self.ha.start()
        try:
            await self.server.start()
        except OSError as exc:
            raise StartupError(f"cannot listen on {self.config.host}:{self.config.port}: "
                               f"{exc.strerror or exc}") from None
        self._started = True
        self.spawn(self._registration_loop(), "namesrv-registration")
        self.spawn(self._offset_flush_loop(), "offset-flush")
        self.spawn(self._metadata_sync_loop(), "metadata-sync")
        self.log.info("broker %s id %d (%s, %s) serving on %s, store end %d", self.config.broker_name,
                      self.ha.broker_id, self.config.ha_mode, self.ha.role.value, self.address,
                      self.store.max_offset)

    async def stop(self) -> None:
        await self.server.close()
        await self.cancel_tasks()
        if self._started:
            await self._unregister()
        await self.ha.stop()
        for client in [*self._namesrv, *self._peers.values()]:
            await client.close()
        self.offsets.persist()
        await self.store.close()

    # -- dispatch -----------------------------------------------------------------------
    def handle(self, cmd: Command, conn: Connection) -> Any:
        """Dispatch by request code: a Command for cheap requests, a coroutine for the rest."""
        handler = self._handlers.get(cmd.code)
        if handler is None:
            return cmd.reply(RC.REQUEST_CODE_NOT_SUPPORTED, {"error": f"unknown request code {cmd.code}"})
        return handler(cmd, conn)

    def _queue_arg(self, cmd: Command) -> tuple[str, int]:
        topic = get_field(cmd, "topic", str)
        queue_id = get_field(cmd, "queue_id", int)
        if not valid_topic(topic):
            raise BadRequest(f"invalid topic name {topic!r}")
        if queue_id < 0:
            raise BadRequest(f"queue id {queue_id} is negative")
        return topic, queue_id

    def _writable_queue(self, cmd: Command, topic: str, queue_id: int) -> Command | None:
        """A rejection (before any append) if the topic/queue cannot take messages here."""
        queues = self.topics.queues(topic)
        if queues is None:
            if not self.config.auto_create_topic:
                return cmd.reply(RC.TOPIC_NOT_EXIST, {"error": f"topic {topic} does not exist"})
            if self.ha.role != Role.MASTER:
                return cmd.reply(RC.NOT_MASTER, {"error": "this broker is a slave"})
            self.topics.create(topic, self.config.default_queue_count)
            self.log.info("auto-created topic %s with %d queues", topic, self.config.default_queue_count)
            self.registration_changed()
            queues = self.config.default_queue_count
        if queue_id >= queues:
            return cmd.reply(RC.BAD_REQUEST, {"error": f"topic {topic} has {queues} queues, "
                                                       f"no queue {queue_id}"})
        if not self.ha.ready:
            return cmd.reply(RC.SERVICE_NOT_AVAILABLE, {"error": "broker not ready (fenced)"})
        if self.disk.full():
            return cmd.reply(RC.DISK_FULL, {"error": f"the store's disk is {self.disk.used_ratio():.0%} full"})
        return None

    # -- sending ------------------------------------------------------------------------
    async def _on_send(self, cmd: Command, conn: Connection) -> Command:
        topic, queue_id = self._queue_arg(cmd)
        msg_id = _msg_id(get_field(cmd, "msg_id", str))
        born = _born_ts(cmd)
        return await self._put(cmd, topic, queue_id, [Message(topic, queue_id, msg_id, cmd.body, born)])

    async def _on_send_batch(self, cmd: Command, conn: Connection) -> Command:
        topic, queue_id = self._queue_arg(cmd)
        ids = get_field(cmd, "msg_ids", list)
        sizes = get_field(cmd, "sizes", list)
        born = _born_ts(cmd)
        if not ids or len(ids) != len(sizes) or not all(type(s) is int and s >= 0 for s in sizes):
            raise BadRequest("msg_ids and sizes must be non-empty lists of equal length")
        if sum(sizes) != len(cmd.body):
            raise BadRequest(f"sizes add up to {sum(sizes)} but the body has {len(cmd.body)} bytes")
        messages, pos = [], 0
        for msg_id, size in zip(ids, sizes):
            if not isinstance(msg_id, str):
                raise BadRequest("msg_ids must be strings")
            messages.append(Message(topic, queue_id, _msg_id(msg_id), cmd.body[pos:pos + size], born))
            pos += size
        return await self._put(cmd, topic, queue_id, messages)

    async def _put(self, cmd: Command, topic: str, queue_id: int, messages: list[Message]) -> Command:
        rejection = self._writable_queue(cmd, topic, queue_id)
        if rejection is not None:
            return rejection
        for msg in messages:
            if not self.store.fits(msg):
                return cmd.reply(RC.BAD_REQUEST, {"error": f"message of {len(msg.body)} bytes exceeds "
                                                           f"the maximum {self.config.store.max_message_bytes}"})
        try:
            result = await self.ha.put(messages)
        except OSError as exc:  # the write may have reached the disk partly: indeterminate
            self.log.error("append failed: %s", exc)
            return cmd.reply(RC.SYSTEM_ERROR, {"error": f"append failed: {exc}"})
        fields: dict[str, Any] = {"broker_name": self.config.broker_name, **result.extra}
        if result.error:
            fields["error"] = result.error
        if result.appended is not None:
            first = result.appended.entries[0]
            fields.update(queue_id=queue_id, queue_offset=first[2], phys_offset=first[0],
                          count=len(result.appended.entries))
        return cmd.reply(result.code, fields)

    # -- reading ------------------------------------------------------------------------
    def _on_pull(self, cmd: Command, conn: Connection) -> Any:
        topic, queue_id = self._queue_arg(cmd)
        offset = get_field(cmd, "offset", int)
        max_count = min(max(get_field(cmd, "max_count", int, 32), 1), self.config.max_pull_count)
        suspend = min(max(get_field(cmd, "suspend_ms", int, 0), 0), self.config.max_suspend_ms) / 1000
        got = self._get(topic, queue_id, offset, max_count)
        if got.status in ("NO_NEW_MESSAGE", "NO_MATCHED_QUEUE") and suspend > 0:
            return self._pull_later(cmd, topic, queue_id, offset, max_count, suspend)
        return self._pull_reply(cmd, topic, got)

    def _get(self, topic: str, queue_id: int, offset: int, max_count: int):
        limit = self.store.max_offset if bugs.on("read-beyond-confirm-offset") else self.ha.confirm_offset()
        return self.store.get_messages(topic, queue_id, offset, max_count, self.config.max_pull_bytes, limit)

    async def _pull_later(self, cmd: Command, topic: str, queue_id: int, offset: int, max_count: int,
                          suspend: float) -> Command:
        """Long polling: answer when data arrives or the suspend time is over."""
        deadline = time.monotonic() + suspend
        while True:
            await self.store.wait_new_data(deadline - time.monotonic())
            got = self._get(topic, queue_id, offset, max_count)
            if got.status not in ("NO_NEW_MESSAGE", "NO_MATCHED_QUEUE") or time.monotonic() >= deadline:
                return self._pull_reply(cmd, topic, got)

    def _pull_reply(self, cmd: Command, topic: str, got) -> Command:
        if got.status == "NO_MATCHED_QUEUE" and self.topics.queues(topic) is None:
            return cmd.reply(RC.TOPIC_NOT_EXIST, {"error": f"topic {topic} does not exist"})
        # `master` plays the part of RocketMQ's suggestWhichBrokerId: a replica that
        # is not the master may lag, so "nothing here" from it says nothing about
        # the log (consumers pull again, from the master).
        return cmd.reply(_PULL_STATUS[got.status],
                         {"next_offset": got.next_offset, "min_offset": got.min_offset,
                          "max_offset": got.max_offset, "count": got.count,
                          "broker_name": self.config.broker_name,
                          "master": self.ha.role is Role.MASTER,
                          # False while the master holds entries not yet confirmed by its
                          # replicas (a restarted master before its slaves reconnect): then
                          # "nothing more" means "nothing confirmed yet", not the log's end.
                          "log_confirmed": self.ha.confirm_offset() >= self.store.max_offset},
                         got.records)

    def _on_max_offset(self, cmd: Command, conn: Connection) -> Command:
        topic, queue_id = self._queue_arg(cmd)
        return cmd.reply(RC.SUCCESS, {"offset": self.store.queue_max_offset(
            topic, queue_id, self.ha.confirm_offset())})

    def _on_min_offset(self, cmd: Command, conn: Connection) -> Command:
        self._queue_arg(cmd)
        return cmd.reply(RC.SUCCESS, {"offset": 0})  # no retention: queues start at 0

    def _on_commit_offset(self, cmd: Command, conn: Connection) -> Command:
        topic, queue_id = self._queue_arg(cmd)
        group = get_field(cmd, "group", str)
        offset = get_field(cmd, "offset", int)
        if not group or offset < 0:
            raise BadRequest("group must be non-empty and offset >= 0")
        if self._refuses_master_only():
            return self._not_acting(cmd)
        if bugs.on("offset-commit-ahead"):
            # The queue's end counts as consumed: what the consumer has not processed yet too.
            offset = max(offset, self.store.queue_max_offset(topic, queue_id, self.ha.confirm_offset()))
        self.offsets.commit(group, topic, queue_id, offset)
        self.metadata_version.bump()
        return cmd.reply(RC.SUCCESS)

    def _refuses_master_only(self) -> bool:
        """RIP-32: only the master, or the slave acting for it, serves consumer offsets."""
        return (self.config.slave_acting_master and self.ha.role is Role.SLAVE
                and not self.acting_master)

    def _not_acting(self, cmd: Command) -> Command:
        return cmd.reply(RC.NOT_MASTER, {"error": f"broker {self.address} is a slave and does not "
                                                  f"act as master of {self.config.broker_name}"})

    def _on_query_offset(self, cmd: Command, conn: Connection) -> Command:
        topic, queue_id = self._queue_arg(cmd)
        if self._refuses_master_only():
            return self._not_acting(cmd)
        offset = self.offsets.get(get_field(cmd, "group", str), topic, queue_id)
        if offset is None:
            return cmd.reply(RC.QUERY_NOT_FOUND, {"error": "no committed offset"})
        return cmd.reply(RC.SUCCESS, {"offset": offset})

    # -- consumer groups: every broker keeps its own member list (RocketMQ ConsumerManager) --
    def _group_arg(self, cmd: Command) -> str:
        group = get_field(cmd, "group", str)
        if not group:
            raise BadRequest("group must be non-empty")
        return group

    def _on_consumer_heartbeat(self, cmd: Command, conn: Connection) -> Command:
        self.consumers.heartbeat(self._group_arg(cmd), get_field(cmd, "client_id", str), conn)
        return cmd.reply(RC.SUCCESS)

    def _on_unregister_consumer(self, cmd: Command, conn: Connection) -> Command:
        self.consumers.unregister(self._group_arg(cmd), get_field(cmd, "client_id", str))
        return cmd.reply(RC.SUCCESS)

    def _on_consumer_list(self, cmd: Command, conn: Connection) -> Command:
        return cmd.reply(RC.SUCCESS, {"clients": self.consumers.members(self._group_arg(cmd))})

    def _on_create_topic(self, cmd: Command, conn: Connection) -> Command:
        topic = get_field(cmd, "topic", str)
        queues = get_field(cmd, "queues", int)
        if not valid_topic(topic) or not 0 < queues <= 1024:
            raise BadRequest("need a valid topic name and 1..1024 queues")
        if self.topics.create(topic, queues):
            self.log.info("created topic %s with %d queues", topic, queues)
            self.metadata_version.bump()
            self.registration_changed()
        return cmd.reply(RC.SUCCESS)

    def _on_get_all_metadata(self, cmd: Command, conn: Connection) -> Command:
        return cmd.reply(RC.SUCCESS, {"data_version": self.metadata_version.counter},
                         metadata_document(self.topics, self.offsets, self.metadata_version))

    def _on_status(self, cmd: Command, conn: Connection) -> Command:
        return cmd.reply(RC.SUCCESS, self.status())

    def status(self) -> dict[str, Any]:
        return {"role": "broker", "name": self.config.broker_name, "ready": self.ready,
                "cluster": self.config.cluster, "broker_name": self.config.broker_name,
                "broker_id": self.ha.broker_id, "ha_mode": self.config.ha_mode,
                "ha_role": self.ha.role.value, "is_leader": self.ha.role == Role.MASTER,
                "replicating": self.ha.replicating,
                "address": self.address,
                "max_offset": self.store.max_offset, "confirm_offset": self.ha.confirm_offset(),
                "flushed_offset": self.store.flushed_offset, "sync_count": self.store.sync_count,
                "registered": sorted(self.registered), "topics": dict(self.topics.topics),
                "acting_master": self.acting_master, "pre_online_done": self._pre_online_done,
                "metadata_version": self.metadata_version.counter, "ha": self.ha.status()}

    @property
    def ready(self) -> bool:
        return self._started and self.ha.ready and (not self._namesrv or bool(self.registered))

    # -- nameserver registration ----------------------------------------------------------
    def _registration_fields(self) -> dict[str, Any]:
        return {"cluster": self.config.cluster, "broker_name": self.config.broker_name,
                "addr": self.address, "ha_mode": self.config.ha_mode,
                "enable_acting_master": self.config.slave_acting_master, **self.ha.registration()}

    async def _registration_loop(self) -> None:
        """Full registration every register_interval_ms (or when something changed),
        a lightweight heartbeat every heartbeat_interval_ms in between."""
        next_full = 0.0
        while True:
            if not self.ha.registrable:  # fenced: out of the routes until it may serve again
                if self.registered:
                    await self._unregister()
                    self.registered.clear()
                next_full = 0.0
            elif self._register_now.is_set() or time.monotonic() >= next_full:
                self._register_now.clear()
                if await self._pre_online():
                    next_full = time.monotonic() + self.config.register_interval_ms / 1000
                    await asyncio.gather(*(self._register(c) for c in self._namesrv))
            else:
                await asyncio.gather(*(self._heartbeat(c) for c in self._namesrv))
            try:
                await asyncio.wait_for(self._register_now.wait(),
                                       self.config.heartbeat_interval_ms / 1000)
            except asyncio.TimeoutError:
                pass

    async def _register(self, client: RpcClient) -> None:
        topics = {t: {"queues": n, "perm": PERM_READ | PERM_WRITE} for t, n in self.topics.topics.items()}
        try:
            reply = await client.call(RequestCode.REGISTER_BROKER, self._registration_fields(),
                                      json.dumps({"topics": topics}).encode(), timeout=3.0)
        except RpcError as exc:
            self._lost_namesrv(client, str(exc))
            return
        if reply.code != RC.SUCCESS:
            self._lost_namesrv(client, f"registration refused: {reply.fields.get('error')}")
            return
        self._namesrv_knows_us(client, reply)

    def _namesrv_knows_us(self, client: RpcClient, reply: Command) -> None:
        """A successful registration or heartbeat: this nameserver routes to us again."""
        if client.address not in self.registered:
            self.log.info("registered with nameserver %s", client.address)
            self.registered.add(client.address)
        self._learn_group(reply.fields)
        self.ha.on_registered(reply.fields)

    def _learn_group(self, fields: dict[str, Any]) -> None:
        """The group's master (or acting master) from a nameserver answer or push."""
        master = fields.get("master_addr")
        self.master_addr = master if isinstance(master, str) and master else None
        acting = (self.config.slave_acting_master and self.ha.role is Role.SLAVE
                  and self.master_addr is None and fields.get("acting_master_addr") == self.address)
        if acting != self.acting_master:
            self.acting_master = acting
            self.log.info("%s as master of %s (RIP-32)", "acting" if acting else "no longer acting",
                          self.config.broker_name)

    def _on_namesrv_push(self, cmd: Command) -> None:
        if (cmd.code == RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE
                and cmd.fields.get("broker_name") == self.config.broker_name):
            self._learn_group(cmd.fields)

    async def _heartbeat(self, client: RpcClient) -> None:
        fields = {"broker_name": self.config.broker_name, "broker_id": self.ha.broker_id,
                  "addr": self.address}
        try:
            reply = await client.call(RequestCode.BROKER_HEARTBEAT, fields,
                                      timeout=self.config.heartbeat_timeout_ms / 1000)
        except RpcError as exc:
            self._lost_namesrv(client, str(exc))
            return
        if reply.code != RC.SUCCESS:  # the nameserver forgot us (restart or expiry)
            self._pre_online_done = False
            self.registration_changed()
        else:
            self._namesrv_knows_us(client, reply)

    def _lost_namesrv(self, client: RpcClient, why: str) -> None:
        if client.address in self.registered:
            self.log.warning("nameserver %s: %s", client.address, why)
            self.registered.discard(client.address)

    async def _unregister(self) -> None:
        fields = {"broker_name": self.config.broker_name, "broker_id": self.ha.broker_id,
                  "addr": self.address}
        for client in self._namesrv:
            try:
                await client.call(RequestCode.UNREGISTER_BROKER, fields, timeout=1.0)
            except RpcError:
                pass

    # -- metadata replication and RIP-32 pre-online -----------------------------------------
    def _peer(self, addr: str) -> RpcClient:
        if addr not in self._peers:
            self._peers[addr] = RpcClient(*split_address(addr, "peer broker"))
        return self._peers[addr]

    async def _metadata_sync_loop(self) -> None:
        """A slave copies the master's topics and consumer offsets (SlaveSynchronize)."""
        while True:
            await asyncio.sleep(self.config.metadata_sync_interval_ms / 1000)
            if self.ha.role is Role.SLAVE and self.master_addr and self.master_addr != self.address:
                await self._pull_metadata(self.master_addr)

    async def _pull_metadata(self, addr: str) -> bool:
        """Merge another broker's metadata document into ours; False if it did not answer."""
        try:
            reply = await self._peer(addr).call(RequestCode.GET_ALL_METADATA, {}, timeout=3.0)
        except RpcError as exc:
            self.log.debug("metadata from %s: %s", addr, exc)
            return False
        if reply.code != RC.SUCCESS:
            return False
        try:
            moved = merge_document(parse_document(reply.body, addr), self.topics, self.offsets)
        except ValueError as exc:
            self.log.warning("%s", exc)
            return False
        if moved:
            self.metadata_version.bump()
            self.log.info("copied %d consumer offsets from %s", moved, addr)
        return True

    async def _pre_online(self) -> bool:
        """RIP-32: a master that returns stays out of the routes until it has pulled the
        consumer offsets committed meanwhile to the slave acting for it."""
        if (self._pre_online_done or not self.config.slave_acting_master
                or self.ha.role is not Role.MASTER or not self._namesrv):
            return True
        members = await self._member_group()
        if members is None:
            return False
        acting, brokers = members
        if acting and acting != self.address and not await self._pull_metadata(acting):
            self.log.warning("pre-online: acting master %s did not answer; staying offline", acting)
            return False
        for addr in brokers:
            if addr not in (acting, self.address):
                await self._pull_metadata(addr)  # best effort: slaves hold synced copies
        self._pre_online_done = True
        self.log.info("pre-online done (acting master was %s); registering", acting or "none")
        return True

    async def _member_group(self) -> tuple[str | None, list[str]] | None:
        """(acting master addr, member addrs) from the first nameserver that answers."""
        for client in self._namesrv:
            try:
                reply = await client.call(RequestCode.GET_BROKER_MEMBER_GROUP,
                                          {"broker_name": self.config.broker_name}, timeout=3.0)
                brokers = json.loads(reply.body)["brokers"]
            except (RpcError, ValueError, KeyError, TypeError) as exc:
                self.log.debug("member group from %s: %s", client.address, exc)
                continue
            if reply.code == RC.SUCCESS and isinstance(brokers, dict):
                return reply.fields.get("acting_master_addr"), [str(a) for a in brokers.values()]
        return None

    async def _offset_flush_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.offset_flush_interval_ms / 1000)
            snapshot = self.offsets.snapshot()
            if snapshot is not None:
                try:
                    await asyncio.to_thread(self.offsets.write, snapshot)
                except OSError as exc:  # RocketMQ logs a failed persist and goes on
                    self.log.error("consumer offsets not persisted: %s", exc)


def _born_ts(cmd: Command) -> int:
    born = get_field(cmd, "born_ts", int, 0)
    if not 0 <= born < 2**63:
        raise BadRequest(f"born_ts {born} is out of range")
    return born


def _msg_id(value: str) -> str:
    if not value or len(value.encode()) > MAX_MSG_ID:
        raise BadRequest(f"message id must be 1..{MAX_MSG_ID} bytes")
    return value
