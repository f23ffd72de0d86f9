"""The broker side of Controller mode: the `controller` HA strategy (RocketMQ's
ReplicasManager + AutoSwitchHAService).

Life of a broker:
1. Fenced (sends get SERVICE_NOT_AVAILABLE, not in the nameservers) until it
   has an id, registered with the controller, sent a heartbeat and learned
   its role. The id is applied for once and kept in the identity file.
2. Heartbeats (epoch, max offset, confirm offset, priority) go to every
   controller every second; replica info is re-read every 5 s, and the active
   controller pushes role changes at once. A higher master epoch means change
   role; no master means ask for an election.
3. Master: record (epoch, log end) in the epoch file, accept slaves, keep the
   SyncStateSet (SSS) true: shrink members that fall behind or disconnect,
   expand slaves that caught up, each change through the controller (fenced
   by master id, master epoch and SSS epoch); while a change is pending the
   union of old and new set counts. The confirm offset is the lowest ack of
   the SSS slaves (it does not move while an SSS slave is disconnected);
   consumers see nothing beyond it.
4. Slave: follow the master (replication.SlaveSide), truncating to the
   consistent point first; learn the confirm offset from the transfers.

Ack policy of a send on the master: with all_ack_in_sync_state_set, wait
until the confirm offset covers the message (every SSS member has it);
otherwise wait for in_sync_replicas copies counting the master. Either wait
ends after slave_timeout_ms with FLUSH_SLAVE_TIMEOUT (indeterminate). With
fewer than min_in_sync_replicas in the SSS the send is refused before it is
appended (a definite failure).
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from sut import bugs
from sut.config import ConfigError, split_address
from sut.controller.client import ControllerClient, ControllerUnavailable, decode_ids, encode_ids
from sut.controller.epochs import EpochFile, EpochFileError
from sut.controller.identity import BrokerIdentity, IdentityError, IdentityStore
from sut.controller.metadata import NO_MASTER
from sut.controller.replication import LinkTiming, MasterSide, SlaveLink, SlaveSide
from sut.ha.base import HAStrategy, PutResult, Role, status_after_append
from sut.invariants import InvariantLog
from sut.message import Message
from sut.process import StartupError
from sut.protocol import Command, RequestCode, ResponseCode

RC = ResponseCode
# Alter-SSS answers after which the proposal certainly did not and will not commit
# (checked and refused). Anything else but SUCCESS leaves the outcome uncertain.
DEFINITE_REFUSALS = {RC.CONTROLLER_BROKER_NOT_ALIVE, RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                     RC.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                     RC.CONTROLLER_BROKER_METADATA_NOT_EXIST}


@dataclass
class ControllerHASettings:
    """The broker config's `ha` object in controller mode (RocketMQ names in brackets)."""

    controller_addrs: list[str] = field(default_factory=list)  # [controllerAddr]
    heartbeat_interval_ms: int = 1000            # [controllerHeartBeatInterval]
    heartbeat_timeout_ms: int = 10000            # [controllerHeartBeatTimeoutMills]
    sync_replica_info_interval_ms: int = 5000    # [syncBrokerMetadataPeriod]
    check_sync_state_set_interval_ms: int = 5000  # [checkSyncStateSetPeriod]
    ha_max_time_slave_not_catchup_ms: int = 15000  # [haMaxTimeSlaveNotCatchup]
    slave_timeout_ms: int = 3000                 # [slaveTimeout]
    all_ack_in_sync_state_set: bool = False      # [allAckInSyncStateSet]
    in_sync_replicas: int = 1                    # [inSyncReplicas], the master counts
    min_in_sync_replicas: int = 1                # [minInSyncReplicas]
    async_learner: bool = False                  # [asyncLearner]: replicate, never join the SSS
    election_priority: int = 0                   # [brokerElectionPriority], lower is preferred
    ha_heartbeat_interval_ms: int = 5000         # [haSendHeartbeatInterval]
    ha_housekeeping_ms: int = 20000              # [haHousekeepingInterval]
    ha_reconnect_interval_ms: int = 1000         # slave's pause before reconnecting
    transfer_batch_bytes: int = 32 * 1024        # [haTransferBatchSize]
    controller_timeout_ms: int = 3000            # one controller request, retries included

    def validate(self) -> str | None:
        if not self.controller_addrs:
            return "controller_addrs must list the controllers"
        for i, addr in enumerate(self.controller_addrs):
            try:
                split_address(addr, f"controller_addrs[{i}]")
            except ConfigError as exc:
                return str(exc)
        if self.in_sync_replicas < 1 or self.min_in_sync_replicas < 1:
            return "in_sync_replicas and min_in_sync_replicas must be at least 1"
        timings = [v for k, v in vars(self).items() if k.endswith("_ms")]
        if min(timings) <= 0 or self.transfer_batch_bytes <= 0:
            return "intervals, timeouts and sizes must be positive"
        return None

    def link_timing(self) -> LinkTiming:
        return LinkTiming(self.ha_heartbeat_interval_ms / 1000, self.ha_housekeeping_ms / 1000,
                          self.transfer_batch_bytes, self.ha_reconnect_interval_ms / 1000)


@dataclass
class _Waiter:
    done: Callable[[], bool]
    future: asyncio.Future


class ControllerHA(HAStrategy):
    mode = "controller"
    settings_class = ControllerHASettings

    def __init__(self, broker: Any, settings: ControllerHASettings) -> None:
        super().__init__(broker, settings)
        cfg = broker.config
        self.identity = IdentityStore(broker.data_dir, cfg.cluster, cfg.broker_name)
        self.invariants = InvariantLog(broker.data_dir, cfg.broker_name, self.log)
        self.learner = settings.async_learner
        self.controller = ControllerClient(settings.controller_addrs,
                                           settings.controller_timeout_ms / 1000,
                                           on_push=self._on_push)
        self.epochs: EpochFile | None = None
        self.controller_id: int | None = None
        self._role = Role.SLAVE
        self.role_known = False
        self.heartbeat_sent = False
        self.master_epoch = 0
        self.master_id: int | None = None
        self.master_addr = ""
        self.sss: set[int] = set()
        self.sss_epoch = 0
        self.pending_sss: set[int] | None = None   # union of unsettled proposals
        self._proposed: set[int] | None = None     # the latest proposal
        self._sss_uncertain = False                 # a proposal may still commit
        self._alter_queued = False
        self._confirm = 0
        self._caught_up: dict[int, float] = {}
        self._waiters: list[_Waiter] = []
        self._role_lock = asyncio.Lock()
        self._alter_lock = asyncio.Lock()
        self.master_side: MasterSide | None = None
        self.slave_side: SlaveSide | None = None
        self.role_changes: list[dict[str, Any]] = []
        self._background: set[asyncio.Task] = set()

    # ----- HAStrategy -----

    @classmethod
    def check_config(cls, broker_config: Any, settings: ControllerHASettings) -> str | None:
        if broker_config.ha_port == broker_config.port:
            return "ha_port must differ from port"
        return None

    @property
    def broker_id(self) -> int:
        """The id in the nameservers: 0 for the master, else the controller-assigned id."""
        if self._role is Role.MASTER:
            return 0
        return self.controller_id if self.controller_id is not None else -1

    @property
    def role(self) -> Role:
        return self._role

    @property
    def ready(self) -> bool:
        return self.role_known and self.heartbeat_sent

    @property
    def replicating(self) -> bool:
        """A master serves; a slave once its link to the master passed the handshake."""
        if self._role is Role.MASTER:
            return self.ready
        return self.ready and self.slave_side is not None and self.slave_side.connected

    @property
    def registrable(self) -> bool:
        """Stay out of the nameservers while fenced (RocketMQ: an isolated broker)."""
        return self.ready

    def registration(self) -> dict[str, Any]:
        return {"broker_id": self.broker_id, "role": self._role.value,
                "ha_addr": self.broker.ha_address, "epoch": self.master_epoch}

    def confirm_offset(self) -> int:
        return min(self._confirm, self.store.max_offset)

    async def start(self) -> None:
        try:
            self.epochs = EpochFile(self.broker.data_dir / "epochs.json")
            self.identity.load_final()
            self.identity.load_pending()
        except (EpochFileError, IdentityError) as exc:
            raise StartupError(str(exc)) from None
        last = self.epochs.last()
        if last is not None and last.start_offset > self.store.max_offset:
            # a crash between cutting the log and cutting the epoch file
            self.epochs.truncate_from_offset(self.store.max_offset + 1)
        cfg = self.broker.config
        self.master_side = MasterSide(cfg.host, cfg.ha_port, self.store, self.epochs,
                                      self.settings.link_timing(), self, self.log)
        try:
            await self.master_side.start()
        except OSError as exc:
            raise StartupError(f"cannot listen on HA port {cfg.host}:{cfg.ha_port}: "
                               f"{exc.strerror or exc}") from None
        self.broker.spawn(self._join(), "controller-join")

    async def stop(self) -> None:
        for task in list(self._background):
            task.cancel()
        if self.slave_side is not None:
            await self.slave_side.stop()
        if self.master_side is not None:
            await self.master_side.stop()
        self._fail_waiters()
        await self.controller.close()

    # ----- sending -----

    def effective_sss(self) -> set[int]:
        """The SSS that counts for acks: the union while a change is pending."""
        return self.sss | (self.pending_sss or set())

    async def put(self, messages: list[Message]) -> PutResult:
        if not self.ready:
            return PutResult.rejected(RC.SERVICE_NOT_AVAILABLE, "broker is fenced")
        if self._role is not Role.MASTER:
            return PutResult.rejected(RC.NOT_MASTER, f"this broker is a slave of {self.master_id}")
        in_sync = len(self.effective_sss())
        if in_sync < self.settings.min_in_sync_replicas:
            return PutResult.rejected(RC.SERVICE_NOT_AVAILABLE,
                                      f"in-sync replicas not enough: {in_sync} < "
                                      f"{self.settings.min_in_sync_replicas}")
        appended = self.store.append(messages)
        self._update_confirm()
        end = appended.end
        # Flushed first: with SYNC_FLUSH the confirm offset (what consumers see) waits for the disk.
        flushed = await self.store.wait_flushed(end)
        self._update_confirm()
        ok = await self._replicated(end)
        return PutResult(status_after_append(flushed, ok), appended,
                         extra={"master_epoch": self.master_epoch})

    async def _replicated(self, end: int) -> bool | None:
        """Wait until enough replicas hold everything below `end` (None: no wait asked)."""
        if bugs.on("ack-without-sync-state-set"):
            return None
        if self.settings.all_ack_in_sync_state_set:
            return await self._wait(lambda: self.confirm_offset() >= end)
        if self.settings.in_sync_replicas > 1:
            need = self.settings.in_sync_replicas
            return await self._wait(lambda: self._copies(end) >= need)
        return None

    def _copies(self, end: int) -> int:
        links = self.master_side.links.values() if self.master_side else []
        return 1 + sum(1 for link in links if not link.learner and link.ack >= end)

    async def _wait(self, done: Callable[[], bool]) -> bool:
        if done():
            return True
        waiter = _Waiter(done, asyncio.get_running_loop().create_future())
        self._waiters.append(waiter)
        try:
            return await asyncio.wait_for(asyncio.shield(waiter.future),
                                          self.settings.slave_timeout_ms / 1000)
        except asyncio.TimeoutError:
            return False
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def _wake(self) -> None:
        for waiter in list(self._waiters):
            if not waiter.future.done() and (self._role is not Role.MASTER or waiter.done()):
                waiter.future.set_result(self._role is Role.MASTER)

    def _fail_waiters(self) -> None:
        for waiter in self._waiters:
            if not waiter.future.done():
                waiter.future.set_result(False)

    # ----- confirm offset -----

    def _compute_confirm(self) -> int:
        """min(durable end, acks of the SSS slaves); unchanged while one is disconnected."""
        value = self.store.durable_end
        links = self.master_side.links if self.master_side else {}
        for member in self.effective_sss() - {self.controller_id}:
            link = links.get(member)
            if link is None or not link.reported:
                return self._confirm
            value = min(value, link.ack)
        return value

    def _update_confirm(self) -> None:
        if self._role is Role.MASTER and self.role_known:
            new = min(max(self._confirm, self._compute_confirm()), self.store.max_offset)
            if new != self._confirm:
                self._confirm = new
                self.store.notify_new_data()  # wake pushers (new confirm) and long polls
        self._wake()

    # ----- MasterHooks / SlaveHooks (called by replication) -----

    def serving_as_master(self) -> bool:
        return self._role is Role.MASTER and self.role_known

    def expected_master_epoch(self) -> int:
        return self.master_epoch

    def current_master_epoch(self) -> int:
        return self.master_epoch

    def on_ack(self, link: SlaveLink) -> None:
        if link.caught_up_at:
            self._caught_up[link.broker_id] = max(self._caught_up.get(link.broker_id, 0.0),
                                                  link.caught_up_at)
        self._update_confirm()
        self._maybe_expand(link)

    def on_link_closed(self, link: SlaveLink) -> None:
        if self._role is Role.MASTER and link.broker_id in self._local_sss():
            self._schedule_alter(f"the link of slave {link.broker_id} closed")
        self._update_confirm()

    def on_confirm(self, confirm_offset: int) -> None:
        if self._role is Role.SLAVE and confirm_offset != self._confirm:
            grew = confirm_offset > self._confirm
            self._confirm = confirm_offset
            if grew:
                self.store.notify_new_data()

    # ----- SyncStateSet maintenance (master) -----

    def _local_sss(self) -> set[int]:
        """The set the master is moving to: its latest proposal, else the known SSS."""
        return set(self._proposed if self._proposed is not None else self.sss)

    def _catching_up(self, link: SlaveLink) -> bool:
        """A slave that may join the SSS: it has everything confirmed in this epoch."""
        last = self.epochs.last()
        epoch_start = last.start_offset if last else 0
        return (not link.learner and link.reported and link.ack >= self.confirm_offset()
                and link.ack >= epoch_start)

    def _desired_sss(self, judge_lag: bool) -> set[int]:
        """What the SSS should be now, from the live links (computed under the alter lock).

        Members stay while linked and (if `judge_lag`) caught up within
        haMaxTimeSlaveNotCatchup; linked slaves that caught up recently join."""
        links = self.master_side.links if self.master_side else {}
        keep = {self.controller_id}
        for member in self._local_sss() - {self.controller_id}:
            if member in links and (not judge_lag or self._fresh(member)):
                keep.add(member)
        keep |= {b for b, link in links.items()
                 if b not in keep and self._fresh(b) and self._catching_up(link)}
        return keep

    def _fresh(self, broker_id: int) -> bool:
        """The slave had everything the master had within haMaxTimeSlaveNotCatchup."""
        limit = self.settings.ha_max_time_slave_not_catchup_ms / 1000
        return time.monotonic() - self._caught_up.get(broker_id, 0.0) <= limit

    def _maybe_expand(self, link: SlaveLink) -> None:
        if (self._role is Role.MASTER and link.broker_id not in self._local_sss()
                and self._fresh(link.broker_id) and self._catching_up(link)):
            self._schedule_alter(f"slave {link.broker_id} caught up")

    def _schedule_alter(self, why: str) -> None:
        if not self._alter_queued:  # one queued alter recomputes everything when it runs
            self._alter_queued = True
            self._background_task(self._alter(why))

    async def _check_sss_loop(self) -> None:
        interval = self.settings.check_sync_state_set_interval_ms / 1000
        limit = self.settings.ha_max_time_slave_not_catchup_ms / 1000
        last = time.monotonic()
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            # After this process was suspended every slave looks stale only because we
            # were not running: judge lag again once acks had a round to arrive.
            resumed = now - last > interval + limit
            last = now
            if self._role is Role.MASTER and self.role_known:
                await self._alter("periodic check" if not resumed else
                                  "periodic check after a pause (lag not judged)",
                                  judge_lag=not resumed)

    async def _alter(self, why: str, judge_lag: bool = True) -> None:
        """Move the SSS towards what the links say, through the controller.

        While an outcome is uncertain (no answer, a fence, a commit that timed
        out) acks count the union of the known set and every set proposed
        since; it is dropped only when the real set is known (a success, or the
        replica info at a newer SSS epoch)."""
        self._alter_queued = False
        async with self._alter_lock:
            if self._role is not Role.MASTER or not self.role_known:
                return
            new_set = self._desired_sss(judge_lag)
            if new_set == self._local_sss() and self.pending_sss is None:
                return
            epoch, sss_epoch = self.master_epoch, self.sss_epoch
            self._proposed = new_set
            self.pending_sss = (self.pending_sss or set()) | new_set
            if bugs.on("sync-state-set-shrink-before-commit"):
                self.sss = self.pending_sss = set(new_set)   # as if the controller had agreed
            self._update_confirm()
            try:
                reply = await self.controller.call(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, {
                    "broker_name": self.broker.config.broker_name, "master_id": self.controller_id,
                    "master_epoch": epoch, "sss_epoch": sss_epoch,
                    "sync_state_set": encode_ids(new_set)})
            except ControllerUnavailable as exc:
                self.log.warning("SyncStateSet change to %s (%s) uncertain: %s", sorted(new_set),
                                 why, exc)
                return  # keep the union; the next check retries
            if self.master_epoch != epoch or self._role is not Role.MASTER:
                return  # the role changed meanwhile
            self._on_alter_reply(reply, new_set, why)
            self._update_confirm()

    def _on_alter_reply(self, reply: Command, new_set: set[int], why: str) -> None:
        if reply.code == RC.SUCCESS:
            if reply.fields["sss_epoch"] > self.sss_epoch:
                self._adopt_sss(decode_ids(reply.fields.get("sync_state_set")),
                                reply.fields["sss_epoch"])
            self.log.info("SyncStateSet is now %s (epoch %d): %s", sorted(self.sss),
                          self.sss_epoch, why)
            return
        error = reply.fields.get("error", reply.code)
        self._proposed = None
        if reply.code in DEFINITE_REFUSALS and not self._sss_uncertain:
            self.pending_sss = None
            self.log.warning("controller refused SyncStateSet %s: %s", sorted(new_set), error)
            return
        # fenced, or a commit that may still happen: keep acking with the union
        self._sss_uncertain = True
        self.log.warning("SyncStateSet %s uncertain (%s); acking with %s until the controller's "
                         "set is known", sorted(new_set), error, sorted(self.effective_sss()))
        self._background_task(self._sync_replica_info())

    def _adopt_sss(self, sss: set[int], sss_epoch: int) -> None:
        """The controller's real set is known: every earlier proposal is settled."""
        self.sss, self.sss_epoch = sss, sss_epoch
        self.pending_sss, self._proposed, self._sss_uncertain = None, None, False

    # ----- joining the controller group -----

    async def _join(self) -> None:
        """Get an id, register, heartbeat, learn the role; then keep in touch."""
        pause = self.settings.heartbeat_interval_ms / 1000
        identity = None
        while identity is None:
            identity = await self._retrying(self._ensure_identity, "applying for a broker id")
            if identity is None:
                await asyncio.sleep(pause)
        self.controller_id = identity.broker_id
        self.log.info("controller-mode broker id is %d", self.controller_id)
        self.broker.spawn(self._heartbeat_loop(), "controller-heartbeat")
        while not await self._retrying(self._register, "registering with the controller"):
            await asyncio.sleep(pause)
        self.broker.spawn(self._sync_loop(), "controller-sync")
        self.broker.spawn(self._check_sss_loop(), "check-sync-state-set")

    async def _retrying(self, step: Callable[[], Any], what: str) -> Any:
        try:
            return await step()
        except ControllerUnavailable as exc:
            self.log.warning("%s: %s", what, exc)
            return None

    async def _ensure_identity(self) -> BrokerIdentity | None:
        final = self.identity.load_final()
        if final is not None:
            return final
        pending = self.identity.load_pending()
        cfg = self.broker.config
        group = {"cluster": cfg.cluster, "broker_name": cfg.broker_name}
        if pending is None:
            reply = await self.controller.call(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, group)
            if reply.code != RC.SUCCESS:
                self.log.warning("next broker id: %s", reply.fields.get("error", reply.code))
                return None
            pending = BrokerIdentity(cfg.cluster, cfg.broker_name, reply.fields["next_broker_id"],
                                     f"{self.broker.ha_address};{time.time_ns()}")
            self.identity.save_pending(pending)
        reply = await self.controller.call(RequestCode.CONTROLLER_APPLY_BROKER_ID, {
            **group, "broker_id": pending.broker_id, "address": self.broker.ha_address,
            "check_code": pending.check_code})
        if reply.code == RC.SUCCESS:
            self.identity.commit(pending)
            return pending
        self.log.warning("broker id %d refused (%s); applying again", pending.broker_id,
                         reply.fields.get("error", reply.code))
        if reply.code == RC.CONTROLLER_BROKER_ID_INVALID:
            self.identity.discard_pending()
        return None

    def _heartbeat_fields(self) -> dict[str, Any]:
        cfg = self.broker.config
        return {"cluster": cfg.cluster, "broker_name": cfg.broker_name,
                "broker_id": self.controller_id, "address": self.broker.ha_address,
                "epoch": self.epochs.last_epoch(), "max_offset": self.store.max_offset,
                "confirm_offset": self.confirm_offset(),
                "priority": self.settings.election_priority,
                "timeout_ms": self.settings.heartbeat_timeout_ms}

    async def _heartbeat_loop(self) -> None:
        interval = self.settings.heartbeat_interval_ms / 1000
        while True:
            started = time.monotonic()
            if await self.controller.heartbeat_all(self._heartbeat_fields()):
                self.heartbeat_sent = True
            await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))

    async def _register(self) -> bool:
        cfg = self.broker.config
        reply = await self.controller.call(RequestCode.CONTROLLER_REGISTER_BROKER, {
            "cluster": cfg.cluster, "broker_name": cfg.broker_name,
            "broker_id": self.controller_id, "address": self.broker.ha_address})
        if reply.code != RC.SUCCESS:
            self.log.error("controller refused the registration: %s",
                           reply.fields.get("error", reply.code))
            return False
        if await self.controller.heartbeat_all(self._heartbeat_fields()):
            self.heartbeat_sent = True
        await self._apply_replica_info(reply.fields, "registration")
        return True

    async def _sync_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.sync_replica_info_interval_ms / 1000)
            await self._sync_replica_info()

    async def _sync_replica_info(self) -> None:
        try:
            reply = await self.controller.call(RequestCode.CONTROLLER_GET_REPLICA_INFO,
                                               {"broker_name": self.broker.config.broker_name})
        except ControllerUnavailable as exc:
            self.log.debug("replica info: %s", exc)
            return
        if reply.code == RC.SUCCESS:
            await self._apply_replica_info(reply.fields, "periodic sync")

    def _on_push(self, cmd: Command) -> None:
        if cmd.code == RequestCode.CONTROLLER_NOTIFY_ROLE_CHANGE \
                and cmd.fields.get("broker_name") == self.broker.config.broker_name:
            self._background_task(self._apply_replica_info(cmd.fields, "role-change notification"))

    def _background_task(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background_done)

    def _background_done(self, task: asyncio.Task) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.log.error("controller-mode task failed", exc_info=task.exception())

    # ----- role changes -----

    async def _apply_replica_info(self, info: dict[str, Any], source: str) -> None:
        """Act on what the controller says about the group (any source, any order)."""
        if self.controller_id is None:
            return
        master_id = info.get("master_id", NO_MASTER)
        master_id = NO_MASTER if master_id is None else int(master_id)
        epoch = int(info.get("master_epoch", 0))
        address = info.get("master_address") or ""
        elect = False
        async with self._role_lock:
            # a fenced broker (role unknown) takes the same epoch again, never an older one
            newer = epoch > self.master_epoch or (not self.role_known and epoch >= self.master_epoch)
            if master_id != NO_MASTER and address and newer:
                if master_id == self.controller_id:
                    await self._become_master(epoch, int(info.get("sss_epoch", 0)),
                                              decode_ids(info.get("sync_state_set")), source)
                else:
                    await self._become_slave(master_id, address, epoch, source)
            elif master_id == self.controller_id and epoch == self.master_epoch \
                    and self._role is Role.MASTER and int(info.get("sss_epoch", 0)) > self.sss_epoch:
                self._adopt_sss(decode_ids(info.get("sync_state_set")), int(info["sss_epoch"]))
                self._update_confirm()
            elif master_id == NO_MASTER or not address:
                if epoch > self.master_epoch and self.role_known:
                    await self._fence(epoch, f"the controller knows no master at epoch {epoch}")
                elect = True
        if elect:
            await self._request_election()

    async def _request_election(self) -> None:
        try:
            reply = await self.controller.call(RequestCode.CONTROLLER_ELECT_MASTER, {
                "broker_name": self.broker.config.broker_name, "broker_id": self.controller_id})
        except ControllerUnavailable as exc:
            self.log.warning("asking for an election: %s", exc)
            return
        if reply.code in (RC.SUCCESS, RC.CONTROLLER_MASTER_STILL_EXISTS) \
                and reply.fields.get("master_address"):
            await self._apply_replica_info(reply.fields, "election")
        else:
            self.log.info("no master elected yet: %s", reply.fields.get("error", reply.code))

    def _record(self, role: str, epoch: int, source: str) -> None:
        self.role_changes.append({"role": role, "epoch": epoch, "source": source,
                                  "max_offset": self.store.max_offset, "time": time.time()})
        del self.role_changes[:-20]

    async def _become_master(self, epoch: int, sss_epoch: int, sss: set[int], source: str) -> None:
        if self.slave_side is not None:
            await self.slave_side.stop()
            self.slave_side = None
        self.master_side.drop_all(f"became master of epoch {epoch}")
        self.epochs.begin_master_epoch(epoch, self.store.max_offset)
        self._role, self.role_known = Role.MASTER, True
        self.master_epoch, self.master_id = epoch, self.controller_id
        self.master_addr = self.broker.ha_address
        self._adopt_sss(sss or {self.controller_id}, sss_epoch)
        now = time.monotonic()
        self._caught_up = {m: now for m in self.sss}
        self._update_confirm()
        self.log.info("became MASTER of epoch %d at offset %d (SSS %s, via %s)", epoch,
                      self.store.max_offset, sorted(self.sss), source)
        self._record("master", epoch, source)
        self.broker.registration_changed()

    async def _become_slave(self, master_id: int, address: str, epoch: int, source: str) -> None:
        self._step_down()
        if self.slave_side is not None:
            await self.slave_side.stop()
        self._role, self.role_known = Role.SLAVE, True
        self.master_epoch, self.master_id, self.master_addr = epoch, master_id, address
        self.slave_side = SlaveSide(address, self.store, self.epochs, self.settings.link_timing(),
                                    self, self.log)
        self.slave_side.start()
        self.log.info("became SLAVE of broker %d (%s) in epoch %d (via %s)", master_id, address,
                      epoch, source)
        self._record("slave", epoch, source)
        self.broker.registration_changed()

    def _step_down(self) -> None:
        was_master = self._role is Role.MASTER
        self._role = Role.SLAVE
        self._adopt_sss(set(), self.sss_epoch)
        self._fail_waiters()
        self.master_side.drop_all("no longer master")
        if was_master:
            self._confirm = min(self._confirm, self.store.max_offset)

    async def _fence(self, epoch: int, why: str) -> None:
        """Deposed without a successor: stop serving until the controller decides."""
        self._step_down()
        if self.slave_side is not None:
            await self.slave_side.stop()
            self.slave_side = None
        self.role_known = False
        self.master_epoch, self.master_id, self.master_addr = epoch, None, ""
        self.log.warning("fenced: %s", why)
        self._record("fenced", epoch, why)
        self.broker.registration_changed()

    # ----- observability -----

    def status(self) -> dict[str, Any]:
        links = self.master_side.links if self.master_side else {}
        return {"controller_broker_id": self.controller_id, "role_known": self.role_known,
                "master_epoch": self.master_epoch, "master_id": self.master_id,
                "master_ha_addr": self.master_addr, "sync_state_set": sorted(self.sss),
                "sss_epoch": self.sss_epoch,
                "pending_sss": None if self.pending_sss is None else sorted(self.pending_sss),
                "confirm_offset": self.confirm_offset(), "learner": self.learner,
                "epochs": [e.to_json() for e in self.epochs.entries] if self.epochs else [],
                "slaves": {str(b): {"ack": l.ack, "learner": l.learner} for b, l in links.items()},
                "slave_link": self.slave_side.status() if self.slave_side else None,
                "role_changes": self.role_changes[-5:]}

