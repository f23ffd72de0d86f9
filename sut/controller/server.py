"""The controller: Raft-replicated metadata, broker liveness, elections.

Only the Raft leader serves ("active controller"), and only once its own empty
entry of the new term is applied (everything committed before is then in the
state machine); others answer CONTROLLER_NOT_LEADER with the leader's address.
A write request is checked against the state, its events are proposed as one
Raft entry, and the answer goes out after that entry is applied. Requests are
serialised by one lock, as RocketMQ's single-threaded event scheduler, so each
check sees the effect of every earlier request that is known to have
committed. A commit that timed out (or whose requester went away) may still
apply later, after requests checked without it: its epoch-dependent events
carry the epochs they were checked against and are skipped at apply time when
the group moved on, and a request whose events were skipped is answered as
fenced (metadata.py), never as a success.

Heartbeats are accepted by every controller (brokers send them to all), so a
new leader already knows who is alive. Liveness is per controller, not
replicated. Only the leader acts on a death: re-elect if it was a master, and
every scan interval re-elect for groups whose master is gone.

A controller runs as its own process (`python -m sut controller`, the
ControllerProcess below) or embedded in a nameserver process, as RocketMQ
allows; both wrap the same Controller.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable

from sut.config import ConfigError, parse, split_address
from sut.controller.client import decode_ids, encode_ids
from sut.controller.liveness import BrokerLiveInfo, BrokerLiveness
from sut.controller.metadata import ControllerMetadata, Decision, event_from_dict, event_to_dict
from sut.process import Service, StartupError
from sut.protocol import (
    FLAG_ONEWAY, BadRequest, Command, Connection, RequestCode, ResponseCode, RpcServer, get_field,
)
from sut.raft.config import RaftConfig, RaftConfigError
from sut.raft.errors import NotLeader, ProposalDropped, RaftError
from sut.raft.log import Entry
from sut.raft.node import RaftNode
from sut.waiting import cancel_and_wait

RC = ResponseCode
Handler = Callable[[Command, Connection], Awaitable[Command | None]]


@dataclass(kw_only=True)
class ControllerSettings:
    """What every controller of a group shares (RocketMQ names in brackets).

    `controller_addrs` and `raft_addrs` list every controller in the same
    order; a controller finds itself in them by its own host and ports, and
    its Raft node id is its position ("c0", "c1", ...).
    """

    controller_addrs: list[str]              # request address of every controller
    raft_addrs: list[str]                    # Raft address of every controller, same order
    raft_timing: Any = "default"             # preset name or object (see sut.raft.config)
    broker_heartbeat_timeout_ms: int = 10000  # [controllerHeartBeatTimeoutMills], if a heartbeat has none
    scan_interval_ms: int = 5000             # [scanNotActiveBrokerInterval], also the re-election scan
    enable_unclean_election: bool = False    # [enableElectUncleanMaster]
    elect_master_retries: int = 3
    notify_role_change: bool = True          # [notifyBrokerRoleChanged]
    raft_sync_flush: bool = False            # fsync the Raft log per batch (survives a machine crash)

    def validate(self) -> str | None:
        if not self.controller_addrs or len(self.controller_addrs) != len(self.raft_addrs):
            return "controller_addrs and raft_addrs must list the same controllers, in one order"
        if len(set(self.controller_addrs)) != len(self.controller_addrs):
            return "controller_addrs has duplicates"
        for i, addr in enumerate(self.controller_addrs + self.raft_addrs):
            try:
                split_address(addr, f"controller address #{i}")
            except ConfigError as exc:
                return str(exc)
        if self.broker_heartbeat_timeout_ms <= 0 or self.scan_interval_ms <= 0:
            return "broker_heartbeat_timeout_ms and scan_interval_ms must be positive"
        if self.elect_master_retries < 1:
            return "elect_master_retries must be at least 1"
        return None

    def node_ids(self) -> list[str]:
        return [f"c{i}" for i in range(len(self.controller_addrs))]

    def identify(self, host: str, port: int, raft_port: int, where: str) -> str:
        """This controller's node id, found by its own address (ConfigError if absent)."""
        me = f"{host}:{port}"
        if me not in self.controller_addrs:
            raise ConfigError(f"{where}: this controller's address {me} is not in "
                              f"controller_addrs {self.controller_addrs}")
        index = self.controller_addrs.index(me)
        if split_address(self.raft_addrs[index], where)[1] != raft_port:
            raise ConfigError(f"{where}: raft_addrs[{index}] is {self.raft_addrs[index]} but this "
                              f"controller's raft port is {raft_port}")
        return self.node_ids()[index]

    def raft_config(self, node_id: str, data_dir: str, where: str) -> RaftConfig:
        try:
            return RaftConfig.from_dict({"node_id": node_id,
                                         "peers": dict(zip(self.node_ids(), self.raft_addrs)),
                                         "data_dir": data_dir, "timing": self.raft_timing,
                                         "sync_flush": self.raft_sync_flush}, where)
        except RaftConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None


@dataclass(kw_only=True)
class ControllerConfig(ControllerSettings):
    """A standalone controller process's JSON config."""

    data_dir: str
    host: str = "127.0.0.1"
    port: int = 9878                         # [controllerListenPort]
    raft_port: int = 9880                    # Raft (DLedger) port among the controllers


def _wire_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """Decision fields -> header scalars (id sets become '1,2,3')."""
    return {key: encode_ids(value) if isinstance(value, (list, set, tuple, frozenset)) else value
            for key, value in fields.items()}


class Controller:
    """One controller: Raft member + request server + liveness + election triggers."""

    def __init__(self, settings: ControllerSettings, host: str, port: int, raft_port: int,
                 data_dir: str | os.PathLike, log: logging.Logger | None = None,
                 where: str = "controller") -> None:
        self.settings = settings
        self.node_id = settings.identify(host, port, raft_port, where)
        self.address = f"{host}:{port}"
        self.log = log or logging.getLogger(f"sut.controller.{self.node_id}")
        self.metadata = ControllerMetadata()
        self.liveness = BrokerLiveness(settings.broker_heartbeat_timeout_ms / 1000)
        raft_dir = os.path.join(data_dir, "controller")
        self.raft = RaftNode(settings.raft_config(self.node_id, raft_dir, where), self._apply,
                             self.log)
        self.server = RpcServer(host, port, self._dispatch, self.log,
                                on_close=self._on_connection_closed)
        self._lock = asyncio.Lock()
        self._connections: dict[int, Connection] = {}
        self._tasks: list[asyncio.Task] = []
        self._elections: set[asyncio.Task] = set()  # started by connection closes
        self._addresses = dict(zip(settings.node_ids(), settings.controller_addrs))
        self._handlers: dict[int, Handler] = {
            RequestCode.PROCESS_STATUS: self._on_process_status,
            RequestCode.CONTROLLER_BROKER_HEARTBEAT: self._on_heartbeat,
            RequestCode.CONTROLLER_GET_METADATA: self._on_get_metadata,
            RequestCode.CONTROLLER_GET_NEXT_BROKER_ID: self._leader_only(self._on_next_broker_id),
            RequestCode.CONTROLLER_APPLY_BROKER_ID: self._leader_only(self._on_apply_broker_id),
            RequestCode.CONTROLLER_REGISTER_BROKER: self._leader_only(self._on_register),
            RequestCode.CONTROLLER_UPDATE_BROKER_ADDRESS: self._leader_only(self._on_register),
            RequestCode.CONTROLLER_GET_REPLICA_INFO: self._leader_only(self._on_replica_info),
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA: self._leader_only(self._on_sync_state_data),
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET: self._leader_only(self._on_alter_sss),
            RequestCode.CONTROLLER_ELECT_MASTER: self._leader_only(self._on_elect_master),
            RequestCode.CONTROLLER_CLEAN_BROKER_DATA: self._leader_only(self._on_clean),
        }

    # ----- lifecycle -----

    async def start(self) -> None:
        await self.raft.start()
        try:
            await self.server.start()
        except OSError as exc:
            await self.raft.stop()
            raise StartupError(f"controller cannot listen on {self.address}: "
                               f"{exc.strerror or exc}") from None
        self._tasks.append(asyncio.create_task(self._scan_loop(), name="controller-scan"))
        self.log.info("controller %s serving on %s (raft %s)", self.node_id, self.address,
                      self.raft.config.peers[self.node_id])

    async def stop(self) -> None:
        await cancel_and_wait([*self._tasks, *self._elections])
        await self.server.close()
        await self.raft.stop()

    @property
    def is_active(self) -> bool:
        """The active controller: Raft leader with its term's empty entry applied."""
        return self.raft.is_ready

    # ----- the replicated state machine -----

    def _apply(self, entry: Entry) -> bool:
        """Apply one committed Raft entry (a JSON list of events) on this controller.

        Returns whether every event took effect (False: skipped as stale)."""
        try:
            events = [event_from_dict(raw) for raw in json.loads(entry.data)]
        except (ValueError, TypeError) as exc:
            self.log.error("skipping malformed controller log entry %d: %s", entry.index, exc)
            return False
        applied = [self.metadata.apply(event) for event in events]
        if not all(applied):
            self.log.info("controller log entry %d was stale when applied; skipped %s",
                          entry.index, [type(e).__name__ for e, ok in zip(events, applied) if not ok])
        return all(applied)

    async def _commit(self, check: Callable[[], Decision],
                      stale: ResponseCode = RC.CONTROLLER_FENCED_SSS_EPOCH) -> Decision:
        """Check a request against the state and commit its events; serialised.

        If the events were skipped at apply time (an earlier, uncertain commit
        changed the group first), the answer is `stale`, not the check's."""
        async with self._lock:
            if not self.is_active:
                raise NotLeader("not the active controller", self.raft.leader_id)
            decision = check()
            if decision.events:
                payload = json.dumps([event_to_dict(e) for e in decision.events]).encode()
                applied = await self.raft.propose(payload)
                if applied.result is False:
                    return Decision(stale, {}, [], "the group changed before this request's "
                                                   "entry was applied; read the replica info again")
            return decision

    def _is_alive(self, broker_name: str, broker_id: int) -> bool:
        return self.liveness.is_alive(broker_name, broker_id)

    # ----- request dispatch -----

    async def _dispatch(self, cmd: Command, conn: Connection) -> Command | None:
        handler = self._handlers.get(cmd.code)
        if handler is None:
            return cmd.reply(RC.REQUEST_CODE_NOT_SUPPORTED,
                             {"error": f"request code {cmd.code} is not served by a controller"})
        try:
            return await handler(cmd, conn)
        except BadRequest as exc:
            self.log.error("bad request code %s from %s: %s", cmd.code, conn.peer, exc)
            return cmd.reply(RC.BAD_REQUEST, {"error": f"bad request: {exc}"})
        except (NotLeader, ProposalDropped):
            return self._not_leader(cmd)
        except RaftError as exc:  # e.g. commit timeout: the change may or may not happen
            return cmd.reply(RC.SYSTEM_ERROR, {"error": f"not committed in time: {exc}"})

    def _leader_address(self) -> str:
        return self._addresses.get(self.raft.leader_id or "", "")

    def _not_leader(self, cmd: Command) -> Command:
        return cmd.reply(RC.CONTROLLER_NOT_LEADER,
                         {"error": f"controller {self.node_id} is not the active controller",
                          "leader_id": self.raft.leader_id or "",
                          "leader_address": self._leader_address()})

    def _leader_only(self, handler: Handler) -> Handler:
        async def wrapped(cmd: Command, conn: Connection) -> Command | None:
            if not self.is_active:
                return self._not_leader(cmd)
            return await handler(cmd, conn)
        return wrapped

    @staticmethod
    def _answer(cmd: Command, decision: Decision) -> Command:
        fields = _wire_fields(decision.fields)
        if decision.remark:
            fields["error" if not decision.ok else "remark"] = decision.remark
        return cmd.reply(decision.code, fields)

    # ----- handlers -----

    def status(self) -> dict[str, Any]:
        raft = self.raft.status()
        return {"role": "controller", "name": self.address, "node_id": self.node_id,
                "ready": bool(raft["leader"]), "is_leader": self.is_active,
                "raft_role": raft["role"], "term": raft["term"],
                "leader_id": raft["leader"] or "", "leader_address": self._leader_address(),
                "applied_index": raft["applied_index"]}

    async def _on_process_status(self, cmd: Command, conn: Connection) -> Command:
        return cmd.reply(RC.SUCCESS, self.status())

    async def _on_heartbeat(self, cmd: Command, conn: Connection) -> Command | None:
        timeout_ms = get_field(cmd, "timeout_ms", int, 0)
        self.liveness.heartbeat(
            get_field(cmd, "cluster", str), get_field(cmd, "broker_name", str),
            get_field(cmd, "broker_id", int), get_field(cmd, "address", str),
            timeout_s=timeout_ms / 1000 if timeout_ms > 0 else None,
            epoch=get_field(cmd, "epoch", int, 0), max_offset=get_field(cmd, "max_offset", int, 0),
            confirm_offset=get_field(cmd, "confirm_offset", int, 0),
            priority=get_field(cmd, "priority", int, 0), connection_id=conn.id)
        self._connections[conn.id] = conn
        if cmd.flags & FLAG_ONEWAY:
            return None
        return cmd.reply(RC.SUCCESS, {"controller_id": self.node_id})

    async def _on_get_metadata(self, cmd: Command, conn: Connection) -> Command:
        body = json.dumps({"groups": self.metadata.to_dict(),
                           "alive": sorted([e.broker_name, e.broker_id]
                                           for e in self.liveness.alive())}).encode()
        return cmd.reply(RC.SUCCESS, self.status(), body)

    async def _on_next_broker_id(self, cmd: Command, conn: Connection) -> Command:
        return self._answer(cmd, self.metadata.get_next_broker_id(
            get_field(cmd, "cluster", str), get_field(cmd, "broker_name", str)))

    async def _on_apply_broker_id(self, cmd: Command, conn: Connection) -> Command:
        args = (get_field(cmd, "cluster", str), get_field(cmd, "broker_name", str),
                get_field(cmd, "broker_id", int), get_field(cmd, "address", str),
                get_field(cmd, "check_code", str))
        return self._answer(cmd, await self._commit(lambda: self.metadata.apply_broker_id(*args)))

    async def _on_register(self, cmd: Command, conn: Connection) -> Command:
        name, broker_id = get_field(cmd, "broker_name", str), get_field(cmd, "broker_id", int)
        address = get_field(cmd, "address", str)
        return self._answer(cmd, await self._commit(
            lambda: self.metadata.register_broker(name, broker_id, address, self._is_alive)))

    async def _on_replica_info(self, cmd: Command, conn: Connection) -> Command:
        return self._answer(cmd, self.metadata.get_replica_info(get_field(cmd, "broker_name", str)))

    async def _on_sync_state_data(self, cmd: Command, conn: Connection) -> Command:
        names = get_field(cmd, "broker_names", str, "")
        data = self.metadata.sync_state_data(names.split(",") if names else None)
        return cmd.reply(RC.SUCCESS, {}, json.dumps(data).encode())

    async def _on_alter_sss(self, cmd: Command, conn: Connection) -> Command:
        name = get_field(cmd, "broker_name", str)
        args = (get_field(cmd, "master_id", int), get_field(cmd, "master_epoch", int),
                get_field(cmd, "sss_epoch", int),
                decode_ids(cmd.fields.get("sync_state_set")))
        return self._answer(cmd, await self._commit(
            lambda: self.metadata.alter_sync_state_set(name, *args, self._is_alive)))

    async def _on_elect_master(self, cmd: Command, conn: Connection) -> Command:
        name = get_field(cmd, "broker_name", str)
        broker_id = get_field(cmd, "broker_id", int, -1)
        designate = get_field(cmd, "designate", bool, False)
        return self._answer(cmd, await self._elect(name, None if broker_id < 0 else broker_id,
                                                   designate))

    async def _on_clean(self, cmd: Command, conn: Connection) -> Command:
        name = get_field(cmd, "broker_name", str)
        ids_text = get_field(cmd, "broker_ids", str, "")
        ids = decode_ids(ids_text) if ids_text else None
        living = get_field(cmd, "clean_living", bool, False)
        return self._answer(cmd, await self._commit(
            lambda: self.metadata.clean_broker_data(name, ids, living, self._is_alive)))

    # ----- elections and liveness -----

    async def _elect(self, broker_name: str, broker_id: int | None, designate: bool) -> Decision:
        decision = await self._commit(lambda: self.metadata.elect_master(
            broker_name, broker_id, designate, self._is_alive, self.liveness.info,
            self.settings.enable_unclean_election), stale=RC.CONTROLLER_ELECT_MASTER_FAILED)
        if decision.events:
            self.log.info("group %s: %s (master %s, epoch %s)", broker_name,
                          decision.remark or "elected", decision.fields.get("master_id"),
                          decision.fields.get("master_epoch"))
            await self._notify_role_change(broker_name)
        return decision

    async def _notify_role_change(self, broker_name: str) -> None:
        """Push the group's new replica info to its brokers that heartbeat to us."""
        group = self.metadata.groups.get(broker_name)
        if not self.settings.notify_role_change or group is None:
            return
        fields = _wire_fields({"broker_name": broker_name, **group.replica_info()})
        for broker_id in sorted(group.addresses):
            entry = self.liveness.get(broker_name, broker_id)
            conn = self._connections.get(entry.connection_id) if entry else None
            if conn is None:
                continue
            try:
                await conn.send(Command(RequestCode.CONTROLLER_NOTIFY_ROLE_CHANGE, fields,
                                        flags=FLAG_ONEWAY))
            except (ConnectionError, OSError):
                pass

    def _on_connection_closed(self, conn: Connection) -> None:
        self._connections.pop(conn.id, None)
        dead = self.liveness.connection_closed(conn.id)
        if dead:
            task = asyncio.get_running_loop().create_task(
                self._brokers_died(dead, "its connection closed"))
            self._elections.add(task)
            task.add_done_callback(self._elections.discard)

    async def _brokers_died(self, dead: list[BrokerLiveInfo], why: str) -> None:
        for entry in dead:
            self.log.info("broker %s/%d (%s) is inactive: %s", entry.broker_name,
                          entry.broker_id, entry.address, why)
        if not self.is_active:
            return
        for name in sorted({e.broker_name for e in dead}):
            group = self.metadata.groups.get(name)
            if group is not None and any(e.broker_id == group.master_id
                                         for e in dead if e.broker_name == name):
                await self._elect_with_retries(name)

    async def _elect_with_retries(self, broker_name: str) -> None:
        """The controller's own election for a group whose master died (up to N tries)."""
        for attempt in range(1, self.settings.elect_master_retries + 1):
            try:
                decision = await self._elect(broker_name, None, False)
            except RaftError as exc:
                self.log.warning("election for %s, try %d: %s", broker_name, attempt, exc)
                if not self.raft.is_leader:
                    return
                await asyncio.sleep(0.1 * attempt)
                continue
            if decision.code != RC.CONTROLLER_ELECT_MASTER_FAILED:
                return

    async def _scan_loop(self) -> None:
        interval = self.settings.scan_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                dead = self.liveness.expire()
                if dead:
                    await self._brokers_died(dead, "no heartbeat within its timeout")
                if self.is_active:
                    await self._reelect_masterless()
            except Exception:
                self.log.exception("controller scan failed")

    async def _reelect_masterless(self) -> None:
        """Covers deaths this controller missed (e.g. it became leader afterwards)."""
        for name, group in sorted(self.metadata.groups.items()):
            master_alive = group.master_id is not None and self._is_alive(name, group.master_id)
            anyone_alive = any(self._is_alive(name, b) for b in group.addresses)
            if not master_alive and anyone_alive:
                await self._elect_with_retries(name)


class ControllerProcess(Service):
    """`python -m sut controller --config FILE`: one Controller as a process."""

    role = "controller"

    def __init__(self, config: ControllerConfig, where: str) -> None:
        super().__init__(Path(config.data_dir))
        self.config = config
        self.where = where
        self.controller: Controller | None = None

    async def start(self) -> None:
        # Built here, not in create(): the Raft log is opened only once the
        # runner holds the data directory's lock.
        c = self.config
        self.controller = Controller(c, c.host, c.port, c.raft_port, c.data_dir, self.log, self.where)
        await self.controller.start()

    async def stop(self) -> None:
        if self.controller is not None:
            await self.controller.stop()


def create(raw: dict[str, Any], source: str) -> ControllerProcess:
    """Factory for `python -m sut controller`: every setting is checked before starting."""
    where = f"config {source}"
    config = parse(ControllerConfig, raw, where)
    node_id = config.identify(config.host, config.port, config.raft_port, where)
    config.raft_config(node_id, config.data_dir, where)  # a bad raft_timing fails here
    return ControllerProcess(config, where)


def check_embedded(raw: dict[str, Any], host: str, port: int, raft_port: int, where: str) -> None:
    """ConfigError if a process's embedded-controller settings are wrong (before starting)."""
    settings = parse(ControllerSettings, raw, where)
    settings.raft_config(settings.identify(host, port, raft_port, where), ".", where)


def embedded(raw: dict[str, Any], host: str, port: int, raft_port: int, data_dir: str | os.PathLike,
             log: logging.Logger, where: str) -> Controller:
    """A Controller inside another process (a nameserver with `controller` settings)."""
    settings = parse(ControllerSettings, raw, where)
    return Controller(settings, host, port, raft_port, data_dir, log, where)
