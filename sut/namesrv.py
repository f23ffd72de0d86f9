"""The nameserver: broker registry, topic routes and broker liveness.

Like RocketMQ's RouteInfoManager: brokers register (full data) periodically
and send lightweight heartbeats in between; a broker silent for
broker_timeout_ms is removed by a scan every scan_interval_ms. Queue data of
a topic comes only from the group's master (brokerId 0) registration and
stays while any broker of the group is alive, so with a dead master the
route still lists the group with only its slaves: clients can read but not
write. Nameservers keep no state on disk and do not talk to each other.

RIP-32 (slave acting master): when a group whose brokers enable it has no
master, the route presents its live slave with the smallest broker id as
id 0 without write permission (producers go to other groups; consumers keep
reading and committing offsets there). Registration and heartbeat answers
name that acting master, and a change is pushed at once to the group's
brokers (NOTIFY_MIN_BROKER_ID_CHANGE); GET_BROKER_MEMBER_GROUP lists a group's
live members for a returning master's pre-online.
"""
from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

from sut.config import parse
from sut.process import Service, StartupError
from sut.protocol import (
    FLAG_ONEWAY, MAX_FRAME_BYTES, BadRequest, Command, Connection, RequestCode, ResponseCode,
    RpcServer, get_field,
)

RC = ResponseCode
MASTER_ID = 0
PERM_WRITE = 2


@dataclass
class NameServerConfig:
    """A nameserver's JSON config (RocketMQ names in brackets)."""

    data_dir: str
    host: str = "127.0.0.1"
    port: int = 9876                        # [listenPort]
    scan_interval_ms: int = 5000            # [scanNotActiveBrokerInterval]
    broker_timeout_ms: int = 10000          # [brokerNotActiveTimeoutMillis] (RIP-32)
    max_frame_bytes: int = MAX_FRAME_BYTES
    # A controller embedded in this process (RocketMQ: enableControllerInNamesrv); its
    # settings are sut.controller.server.ControllerSettings.
    controller: dict[str, Any] | None = None
    controller_port: int = 9878             # [controllerListenPort]
    controller_raft_port: int = 9880

    def validate(self) -> str | None:
        if self.scan_interval_ms <= 0 or self.broker_timeout_ms <= 0:
            return "scan_interval_ms and broker_timeout_ms must be positive"
        return None


def create(raw: dict[str, Any], source: str) -> "NameServer":
    config = parse(NameServerConfig, raw, f"config {source}")
    if config.controller is not None:
        from sut.controller.server import check_embedded
        check_embedded(config.controller, config.host, config.controller_port,
                       config.controller_raft_port, f"config {source}: controller")
    return NameServer(config)


@dataclass
class LiveBroker:
    cluster: str
    broker_name: str
    broker_id: int
    addr: str
    ha_addr: str | None
    role: str
    ha_mode: str
    last_seen: float = field(default_factory=time.monotonic)
    epoch: int = 0  # controller mode: the master epoch (RocketMQ's stateVersion)
    acting_master: bool = False  # [enableSlaveActingMaster] of this broker (RIP-32)


class RouteTable:
    """The registry itself: pure bookkeeping, no I/O (unit-testable)."""

    def __init__(self) -> None:
        self.groups: dict[str, dict[int, str]] = {}           # broker name -> id -> addr
        self.clusters: dict[str, str] = {}                    # broker name -> cluster
        self.live: dict[str, LiveBroker] = {}                 # addr -> info
        self.topic_queues: dict[str, dict[str, dict[str, int]]] = {}  # topic -> name -> queue data
        self._route_cache: dict[str, bytes | None] = {}  # every change of the tables clears it

    def register(self, info: LiveBroker, topics: dict[str, dict[str, int]]) -> bool:
        """Record a registration; False (nothing changed) for a stale master.

        Controller mode: a broker claiming id 0 with an older master epoch than
        the live master holding it is a deposed master and is ignored.
        """
        holder = self.live.get(self.groups.get(info.broker_name, {}).get(info.broker_id, ""))
        if (info.broker_id == MASTER_ID and holder is not None and holder.addr != info.addr
                and holder.epoch > info.epoch):
            return False
        self._route_cache.clear()
        group = self.groups.setdefault(info.broker_name, {})
        self.clusters[info.broker_name] = info.cluster
        for bid, addr in list(group.items()):  # same address under another id: a role change
            if addr == info.addr and bid != info.broker_id:
                del group[bid]
        old = group.get(info.broker_id)
        if old is not None and old != info.addr:
            self.live.pop(old, None)  # another broker took this id (restart elsewhere)
        group[info.broker_id] = info.addr
        self.live[info.addr] = info
        if info.broker_id == MASTER_ID:
            for topic, data in topics.items():
                self.topic_queues.setdefault(topic, {})[info.broker_name] = data
        return True

    def heartbeat(self, addr: str, broker_name: str, broker_id: int) -> bool:
        info = self.live.get(addr)
        if info is None or info.broker_name != broker_name or info.broker_id != broker_id:
            return False
        info.last_seen = time.monotonic()
        return True

    def remove(self, addr: str) -> LiveBroker | None:
        info = self.live.pop(addr, None)
        if info is None:
            return None
        self._route_cache.clear()
        group = self.groups.get(info.broker_name, {})
        for bid, a in list(group.items()):
            if a == addr:
                del group[bid]
        if not group:
            self.groups.pop(info.broker_name, None)
            self.clusters.pop(info.broker_name, None)
            for topic in list(self.topic_queues):
                self.topic_queues[topic].pop(info.broker_name, None)
                if not self.topic_queues[topic]:
                    del self.topic_queues[topic]
        return info

    def expired(self, timeout: float) -> list[str]:
        now = time.monotonic()
        return [addr for addr, info in self.live.items() if now - info.last_seen > timeout]

    def route_json(self, topic: str) -> bytes | None:
        """The route as sent to clients, cached until the registry changes (clients ask often)."""
        if topic not in self._route_cache:
            route = self.route(topic)
            self._route_cache[topic] = None if route is None else json.dumps(route).encode()
        return self._route_cache[topic]

    def route(self, topic: str) -> dict[str, Any] | None:
        queues = self.topic_queues.get(topic)
        if not queues:
            return None
        names = sorted(n for n in queues if self.groups.get(n))
        if not names:
            return None
        return {"topic": topic,
                "queues": [{"broker_name": n, "read_queues": queues[n]["queues"],
                            "write_queues": queues[n]["queues"], "perm": self._perm(n, queues[n])}
                           for n in names],
                "brokers": [{"broker_name": n, "cluster": self.clusters.get(n, ""),
                             "addrs": {str(i): a for i, a in sorted(self.route_ids(n).items())}}
                            for n in names]}

    def acting_master(self, broker_name: str) -> tuple[int, str] | None:
        """RIP-32: the (id, addr) of the slave acting as master of a masterless group."""
        group = self.groups.get(broker_name, {})
        if not group or MASTER_ID in group:
            return None
        if not any(self.live[a].acting_master for a in group.values() if a in self.live):
            return None
        broker_id = min(group)
        return broker_id, group[broker_id]

    def route_ids(self, broker_name: str) -> dict[int, str]:
        """The group's id -> addr as clients see it: an acting master shows as id 0."""
        group = dict(self.groups.get(broker_name, {}))
        acting = self.acting_master(broker_name)
        if acting is not None:
            group[MASTER_ID] = group.pop(acting[0])
        return group

    def _perm(self, broker_name: str, data: dict[str, int]) -> int:
        perm = data.get("perm", 6)
        return perm & ~PERM_WRITE if self.acting_master(broker_name) is not None else perm

    def master_of(self, broker_name: str) -> LiveBroker | None:
        addr = self.groups.get(broker_name, {}).get(MASTER_ID)
        return self.live.get(addr) if addr else None

    def cluster_info(self) -> dict[str, Any]:
        now = time.monotonic()
        return {"brokers": {n: {"cluster": self.clusters.get(n, ""),
                                "addrs": {str(i): a for i, a in sorted(g.items())}}
                            for n, g in sorted(self.groups.items())},
                "live": {a: {"broker_name": i.broker_name, "broker_id": i.broker_id, "role": i.role,
                             "ha_addr": i.ha_addr, "ha_mode": i.ha_mode,
                             "silent_ms": int((now - i.last_seen) * 1000)}
                         for a, i in sorted(self.live.items())},
                "topics": {t: sorted(q) for t, q in sorted(self.topic_queues.items())}}


class NameServer(Service):
    role = "namesrv"

    def __init__(self, config: NameServerConfig) -> None:
        super().__init__(config.data_dir)
        self.config = config
        self.table = RouteTable()
        self._conns: dict[str, Connection] = {}        # broker addr -> its latest connection
        self._acting: dict[str, str | None] = {}       # broker name -> acting master addr
        self._pushes: set[asyncio.Task] = set()
        self.controller: Any = None  # an embedded sut.controller.server.Controller
        self.server = RpcServer(config.host, config.port, self.handle, self.log,
                                max_frame=config.max_frame_bytes)
        self._handlers = {
            RequestCode.REGISTER_BROKER: self._on_register,
            RequestCode.UNREGISTER_BROKER: self._on_unregister,
            RequestCode.BROKER_HEARTBEAT: self._on_heartbeat,
            RequestCode.GET_ROUTE: self._on_route,
            RequestCode.GET_CLUSTER_INFO: self._on_cluster_info,
            RequestCode.GET_BROKER_MEMBER_GROUP: self._on_member_group,
            RequestCode.PROCESS_STATUS: self._on_status,
        }

    async def start(self) -> None:
        try:
            await self.server.start()
        except OSError as exc:
            raise StartupError(f"cannot listen on {self.config.host}:{self.config.port}: "
                               f"{exc.strerror or exc}") from None
        self.spawn(self._scan_loop(), "scan-brokers")
        self.log.info("nameserver serving on %s:%d", self.config.host, self.config.port)
        if self.config.controller is not None:
            from sut.controller.server import embedded
            c = self.config
            self.controller = embedded(c.controller, c.host, c.controller_port,
                                       c.controller_raft_port, c.data_dir, self.log, "controller")
            await self.controller.start()

    async def stop(self) -> None:
        await self.server.close()
        await self.cancel_tasks()
        if self.controller is not None:
            await self.controller.stop()

    def handle(self, cmd: Command, conn: Connection) -> Command:
        """Every nameserver request is answered inline (no awaiting anywhere)."""
        handler = self._handlers.get(cmd.code)
        if handler is None:
            return cmd.reply(RC.REQUEST_CODE_NOT_SUPPORTED, {"error": f"unknown request code {cmd.code}"})
        if cmd.code in (RequestCode.REGISTER_BROKER, RequestCode.BROKER_HEARTBEAT):
            addr = cmd.fields.get("addr")
            if isinstance(addr, str):
                self._conns[addr] = conn
        reply = handler(cmd)
        self._notify_acting_changes()
        return reply

    def _notify_acting_changes(self) -> None:
        """Push the group's master fields to its brokers when its acting master changed."""
        for name in set(self._acting) | set(self.table.groups):
            acting = self.table.acting_master(name)
            addr = acting[1] if acting else None
            if self._acting.get(name) == addr:
                continue
            self._acting[name] = addr
            if addr is not None:
                self.log.info("group %s has no master: %s acts as master (read-only)", name, addr)
            fields = {"broker_name": name, **self._master_fields(name)}
            for member in self.table.groups.get(name, {}).values():
                conn = self._conns.get(member)
                if conn is not None:
                    task = asyncio.get_running_loop().create_task(self._push(conn, fields))
                    self._pushes.add(task)  # keep a reference until it is sent
                    task.add_done_callback(self._pushes.discard)

    async def _push(self, conn: Connection, fields: dict[str, Any]) -> None:
        try:
            await conn.send(Command(RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE, fields,
                                    flags=FLAG_ONEWAY))
        except (ConnectionError, OSError):
            pass  # the member learns it from its next heartbeat answer

    def _on_register(self, cmd: Command) -> Command:
        info = LiveBroker(cluster=get_field(cmd, "cluster", str),
                          broker_name=get_field(cmd, "broker_name", str),
                          broker_id=get_field(cmd, "broker_id", int),
                          addr=get_field(cmd, "addr", str),
                          ha_addr=get_field(cmd, "ha_addr", str, None),
                          role=get_field(cmd, "role", str, ""),
                          ha_mode=get_field(cmd, "ha_mode", str, ""),
                          epoch=get_field(cmd, "epoch", int, 0),
                          acting_master=get_field(cmd, "enable_acting_master", bool, False))
        topics = _topics_body(cmd.body)
        known = info.addr in self.table.live
        if not self.table.register(info, topics):
            return cmd.reply(RC.SERVICE_NOT_AVAILABLE,
                             {"error": f"stale master: epoch {info.epoch} is older than the "
                                       f"live master's"})
        if not known:
            self.log.info("broker %s id %d registered from %s (%s)", info.broker_name, info.broker_id,
                          info.addr, info.role)
        return cmd.reply(RC.SUCCESS, self._master_fields(info.broker_name))

    def _master_fields(self, broker_name: str) -> dict[str, Any]:
        """What registration and heartbeat answers tell a broker about its group's master."""
        master = self.table.master_of(broker_name)
        if master is not None:
            return {"master_addr": master.addr, "master_ha_addr": master.ha_addr}
        acting = self.table.acting_master(broker_name)
        if acting is not None:
            return {"acting_master_id": acting[0], "acting_master_addr": acting[1]}
        return {}

    def _on_member_group(self, cmd: Command) -> Command:
        name = get_field(cmd, "broker_name", str)
        members = {str(i): a for i, a in sorted(self.table.groups.get(name, {}).items())}
        return cmd.reply(RC.SUCCESS, self._master_fields(name),
                         json.dumps({"broker_name": name, "brokers": members}).encode())

    def _on_unregister(self, cmd: Command) -> Command:
        addr = get_field(cmd, "addr", str)
        if self.table.remove(addr) is not None:
            self.log.info("broker %s unregistered", addr)
        return cmd.reply(RC.SUCCESS)

    def _on_heartbeat(self, cmd: Command) -> Command:
        broker_name = get_field(cmd, "broker_name", str)
        if self.table.heartbeat(get_field(cmd, "addr", str), broker_name, get_field(cmd, "broker_id", int)):
            return cmd.reply(RC.SUCCESS, self._master_fields(broker_name))
        return cmd.reply(RC.QUERY_NOT_FOUND, {"error": "not registered; register first"})

    def _on_route(self, cmd: Command) -> Command:
        topic = get_field(cmd, "topic", str)
        body = self.table.route_json(topic)
        if body is None:
            return cmd.reply(RC.TOPIC_NOT_EXIST, {"error": f"no route for topic {topic}"})
        return cmd.reply(RC.SUCCESS, {}, body)

    def _on_cluster_info(self, cmd: Command) -> Command:
        return cmd.reply(RC.SUCCESS, {}, json.dumps(self.table.cluster_info()).encode())

    def _on_status(self, cmd: Command) -> Command:
        return cmd.reply(RC.SUCCESS, {"role": "namesrv", "name": f"{self.config.host}:{self.config.port}",
                                      "ready": True, "is_leader": False, "brokers": len(self.table.live)})

    async def _scan_loop(self) -> None:
        timeout = self.config.broker_timeout_ms / 1000
        while True:
            await asyncio.sleep(self.config.scan_interval_ms / 1000)
            for addr in self.table.expired(timeout):
                info = self.table.remove(addr)
                if info is not None:
                    self._conns.pop(addr, None)
                    self.log.warning("broker %s id %d at %s expired (no heartbeat for %.1fs)",
                                     info.broker_name, info.broker_id, addr, timeout)
            self._notify_acting_changes()


def _topics_body(body: bytes) -> dict[str, dict[str, int]]:
    if not body:
        return {}
    try:
        topics = json.loads(body)["topics"]
    except (ValueError, KeyError, TypeError) as exc:
        raise BadRequest(f"registration body is not {{\"topics\": {{...}}}}: {exc}") from None
    if not isinstance(topics, dict) or not all(
            isinstance(v, dict) and isinstance(v.get("queues"), int) for v in topics.values()):
        raise BadRequest("registration topics must map names to {\"queues\": int, \"perm\": int}")
    return topics
