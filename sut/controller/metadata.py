"""The controller's replicated metadata state machine (pure: no I/O, no clock).

Per broker group: the registered broker ids with their addresses and register
check codes, the master id, the master epoch, the SyncStateSet (SSS) and its
epoch. A request is first *checked* against the current state on the leader,
which yields a Decision: a response code, reply fields and the events that
would make it true. The events go through the Raft log; every controller
applies committed events in log order with `apply`, so all replicas hold the
same state. Checks never mutate state.

A request's check and its entry's apply are not atomic: a commit that timed
out (or whose requester went away) may still apply after later requests were
checked against state that lacked it. So the events that depend on the group's
epochs (AlterSyncStateSet, ElectMaster) carry the master epoch and SSS epoch
they were checked against, and `apply` skips them when the group has moved on
(it returns False). Of two requests checked against the same epochs, at most
one takes effect.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable

from sut.controller.election import CandidateInfo, elect_master
from sut.protocol import ResponseCode

FIRST_BROKER_ID = 1
NO_MASTER = -1

AlivePredicate = Callable[[str, int], bool]
InfoGetter = Callable[[str, int], CandidateInfo]


# --- events (what the Raft log carries) ---------------------------------------------------

@dataclass(frozen=True)
class ApplyBrokerId:
    cluster: str
    broker_name: str
    broker_id: int
    address: str
    check_code: str


@dataclass(frozen=True)
class UpdateBrokerAddress:
    broker_name: str
    broker_id: int
    address: str


@dataclass(frozen=True)
class AlterSyncStateSet:
    broker_name: str
    sync_state_set: tuple[int, ...]
    expect_master_epoch: int | None = None  # the epochs it was checked against;
    expect_sss_epoch: int | None = None     # None (old log entries): unconditional


@dataclass(frozen=True)
class ElectMaster:
    broker_name: str
    new_master: int | None  # None: the old master is gone and nobody qualified
    expect_master_epoch: int | None = None
    expect_sss_epoch: int | None = None


@dataclass(frozen=True)
class CleanBrokerData:
    broker_name: str
    broker_ids: tuple[int, ...] | None  # None: the whole group


Event = ApplyBrokerId | UpdateBrokerAddress | AlterSyncStateSet | ElectMaster | CleanBrokerData
EVENT_TYPES: dict[str, type] = {cls.__name__: cls for cls in
                                (ApplyBrokerId, UpdateBrokerAddress, AlterSyncStateSet,
                                 ElectMaster, CleanBrokerData)}


def event_to_dict(event: Event) -> dict[str, Any]:
    return {"type": type(event).__name__, **asdict(event)}


def event_from_dict(raw: dict[str, Any]) -> Event:
    """Inverse of event_to_dict; raises ValueError on anything else."""
    if not isinstance(raw, dict) or raw.get("type") not in EVENT_TYPES:
        raise ValueError(f"not a controller event: {raw!r}")
    values = {k: v for k, v in raw.items() if k != "type"}
    for key in ("sync_state_set", "broker_ids"):
        if isinstance(values.get(key), list):
            values[key] = tuple(values[key])
    try:
        return EVENT_TYPES[raw["type"]](**values)
    except TypeError as exc:
        raise ValueError(f"malformed {raw['type']} event: {exc}") from None


# --- state ----------------------------------------------------------------------------------

@dataclass
class BrokerGroup:
    """Replica info and sync-state info of one broker group (one brokerName)."""

    cluster: str
    broker_name: str
    addresses: dict[int, str] = field(default_factory=dict)
    check_codes: dict[int, str] = field(default_factory=dict)
    master_id: int | None = None
    master_epoch: int = 0
    sync_state_set: set[int] = field(default_factory=set)
    sss_epoch: int = 0

    def at_epochs(self, master_epoch: int | None, sss_epoch: int | None) -> bool:
        """Whether an event checked at these epochs still applies (None: unchecked)."""
        return ((master_epoch is None or master_epoch == self.master_epoch)
                and (sss_epoch is None or sss_epoch == self.sss_epoch))

    def epochs(self) -> tuple[int, int]:
        return self.master_epoch, self.sss_epoch

    @property
    def next_broker_id(self) -> int:
        return max(self.addresses, default=FIRST_BROKER_ID - 1) + 1

    def replica_info(self) -> dict[str, Any]:
        """What brokers learn from the controller (get replica info / register)."""
        master = self.master_id
        return {
            "master_id": NO_MASTER if master is None else master,
            "master_address": self.addresses.get(master, "") if master is not None else "",
            "master_epoch": self.master_epoch,
            "sss_epoch": self.sss_epoch,
            "sync_state_set": sorted(self.sync_state_set),
        }

    def to_dict(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "broker_name": self.broker_name,
                "addresses": {str(k): v for k, v in self.addresses.items()},
                "check_codes": {str(k): v for k, v in self.check_codes.items()},
                "master_id": self.master_id, "master_epoch": self.master_epoch,
                "sync_state_set": sorted(self.sync_state_set), "sss_epoch": self.sss_epoch}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "BrokerGroup":
        return cls(raw["cluster"], raw["broker_name"],
                   {int(k): v for k, v in raw["addresses"].items()},
                   {int(k): v for k, v in raw["check_codes"].items()},
                   raw["master_id"], raw["master_epoch"], set(raw["sync_state_set"]),
                   raw["sss_epoch"])


@dataclass
class Decision:
    """The outcome of checking one request: reply code/fields and events to commit."""

    code: ResponseCode
    fields: dict[str, Any] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    remark: str = ""

    @property
    def ok(self) -> bool:
        return self.code == ResponseCode.SUCCESS


def _reject(code: ResponseCode, remark: str, **fields: Any) -> Decision:
    return Decision(code, dict(fields), [], remark)


class ControllerMetadata:
    """All broker groups known to the controller group."""

    def __init__(self) -> None:
        self.groups: dict[str, BrokerGroup] = {}

    # ----- apply (every controller, committed order) -----

    def apply(self, event: Event) -> bool:
        """Apply a committed event; False if it was skipped as stale (see the module doc)."""
        handler = getattr(self, f"_apply_{type(event).__name__}")
        return handler(event) is not False

    def _apply_ApplyBrokerId(self, ev: ApplyBrokerId) -> None:
        group = self.groups.setdefault(ev.broker_name, BrokerGroup(ev.cluster, ev.broker_name))
        group.addresses[ev.broker_id] = ev.address
        group.check_codes[ev.broker_id] = ev.check_code

    def _apply_UpdateBrokerAddress(self, ev: UpdateBrokerAddress) -> None:
        group = self.groups.get(ev.broker_name)
        if group is not None and ev.broker_id in group.addresses:
            group.addresses[ev.broker_id] = ev.address

    def _apply_AlterSyncStateSet(self, ev: AlterSyncStateSet) -> bool:
        group = self.groups.get(ev.broker_name)
        if group is None or not group.at_epochs(ev.expect_master_epoch, ev.expect_sss_epoch):
            return False
        group.sync_state_set = set(ev.sync_state_set)
        group.sss_epoch += 1
        return True

    def _apply_ElectMaster(self, ev: ElectMaster) -> bool:
        group = self.groups.get(ev.broker_name)
        if group is None or not group.at_epochs(ev.expect_master_epoch, ev.expect_sss_epoch):
            return False
        group.master_id = ev.new_master
        group.master_epoch += 1
        if ev.new_master is not None:
            group.sync_state_set = {ev.new_master}
            group.sss_epoch += 1
        return True

    def _apply_CleanBrokerData(self, ev: CleanBrokerData) -> None:
        group = self.groups.get(ev.broker_name)
        if group is None:
            return
        ids = set(group.addresses) if ev.broker_ids is None else set(ev.broker_ids)
        for broker_id in ids:
            group.addresses.pop(broker_id, None)
            group.check_codes.pop(broker_id, None)
            group.sync_state_set.discard(broker_id)
        if group.master_id in ids:
            group.master_id = None
        if not group.addresses:
            del self.groups[ev.broker_name]

    # ----- checks (leader only, before commit) -----

    def get_next_broker_id(self, cluster: str, broker_name: str) -> Decision:
        group = self.groups.get(broker_name)
        next_id = group.next_broker_id if group else FIRST_BROKER_ID
        return Decision(ResponseCode.SUCCESS, {"next_broker_id": next_id})

    def apply_broker_id(self, cluster: str, broker_name: str, broker_id: int, address: str,
                        check_code: str) -> Decision:
        """Claim an id. Retrying with the same check code is idempotent; anyone else is refused."""
        group = self.groups.get(broker_name)
        expected = group.next_broker_id if group else FIRST_BROKER_ID
        if group is not None and broker_id in group.addresses:
            if group.check_codes.get(broker_id) == check_code:
                return Decision(ResponseCode.SUCCESS, {"broker_id": broker_id})
            return _reject(ResponseCode.CONTROLLER_BROKER_ID_INVALID,
                           f"broker id {broker_id} of {broker_name} belongs to another broker")
        if broker_id != expected:
            return _reject(ResponseCode.CONTROLLER_BROKER_ID_INVALID,
                           f"broker id {broker_id} of {broker_name} is not the next id {expected}")
        return Decision(ResponseCode.SUCCESS, {"broker_id": broker_id},
                        [ApplyBrokerId(cluster, broker_name, broker_id, address, check_code)])

    def register_broker(self, broker_name: str, broker_id: int, address: str,
                        is_alive: AlivePredicate) -> Decision:
        """A broker with an applied id (re)joins: record a new address, return the master."""
        group = self.groups.get(broker_name)
        if group is None or broker_id not in group.addresses:
            return _reject(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                           f"broker {broker_name}/{broker_id} has no applied id; apply for one first")
        events: list[Event] = []
        if group.addresses[broker_id] != address:
            events.append(UpdateBrokerAddress(broker_name, broker_id, address))
        info = group.replica_info()
        if group.master_id is not None and group.master_id != broker_id \
                and not is_alive(broker_name, group.master_id):
            info["master_address"] = ""  # a dead master's address is no use to a joiner
        return Decision(ResponseCode.SUCCESS, info, events)

    def get_replica_info(self, broker_name: str) -> Decision:
        group = self.groups.get(broker_name)
        if group is None:
            return _reject(ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST,
                           f"no metadata for broker group {broker_name}")
        return Decision(ResponseCode.SUCCESS, group.replica_info())

    def alter_sync_state_set(self, broker_name: str, master_id: int, master_epoch: int,
                             sss_epoch: int, new_sss: Iterable[int],
                             is_alive: AlivePredicate) -> Decision:
        """The master proposes a new SSS; fenced by master id, master epoch and SSS epoch."""
        group = self.groups.get(broker_name)
        new_set = set(new_sss)
        if group is None:
            return _reject(ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST,
                           f"no metadata for broker group {broker_name}")
        if group.master_id != master_id:
            return _reject(ResponseCode.CONTROLLER_FENCED_MASTER_ID,
                           f"{master_id} is not the master of {broker_name} "
                           f"(master is {group.master_id})")
        if group.master_epoch != master_epoch:
            return _reject(ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH,
                           f"master epoch {master_epoch} is stale (current {group.master_epoch})")
        if group.sss_epoch != sss_epoch:
            return _reject(ResponseCode.CONTROLLER_FENCED_SSS_EPOCH,
                           f"SyncStateSet epoch {sss_epoch} is stale (current {group.sss_epoch})")
        for member in sorted(new_set):
            if member not in group.addresses:
                return _reject(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                               f"SyncStateSet member {member} is not registered")
            if not is_alive(broker_name, member):
                return _reject(ResponseCode.CONTROLLER_BROKER_NOT_ALIVE,
                               f"SyncStateSet member {member} is not alive")
        if master_id not in new_set:
            return _reject(ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                           f"new SyncStateSet {sorted(new_set)} does not contain master {master_id}")
        return Decision(ResponseCode.SUCCESS,
                        {"sss_epoch": group.sss_epoch + 1, "sync_state_set": sorted(new_set)},
                        [AlterSyncStateSet(broker_name, tuple(sorted(new_set)), master_epoch, sss_epoch)])

    def elect_master(self, broker_name: str, broker_id: int | None, designate: bool,
                     is_alive: AlivePredicate, info: InfoGetter, unclean: bool) -> Decision:
        """Elect a master. broker_id None means the controller itself asks (master died)."""
        group = self.groups.get(broker_name)
        if group is None:
            return _reject(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                           f"broker group {broker_name} is not registered")
        if broker_id is not None and broker_id not in group.addresses:
            return _reject(ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                           f"broker {broker_name}/{broker_id} is not registered")
        new_master: int | None = None
        if group.master_epoch == 0 and broker_id is not None and not designate:
            new_master = broker_id  # the first election: the first broker that asks
        if new_master is None:
            new_master = elect_master(
                group.sync_state_set, group.addresses, group.master_id,
                broker_id if designate else None,
                lambda b: is_alive(broker_name, b), lambda b: info(broker_name, b), unclean)
        if new_master is not None and new_master == group.master_id:
            return Decision(ResponseCode.CONTROLLER_MASTER_STILL_EXISTS, group.replica_info(), [],
                            f"master {new_master} of {broker_name} is still alive")
        if new_master is not None:
            return Decision(ResponseCode.SUCCESS,
                            {"master_id": new_master,
                             "master_address": group.addresses[new_master],
                             "master_epoch": group.master_epoch + 1,
                             "sss_epoch": group.sss_epoch + 1,
                             "sync_state_set": [new_master]},
                            [ElectMaster(broker_name, new_master, *group.epochs())])
        if broker_id is None and group.master_id is not None:
            # The controller saw the master die and nobody can take over: record that the
            # group is masterless (a new epoch, so the old master is fenced if it returns).
            return Decision(ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE,
                            {"master_id": NO_MASTER, "master_epoch": group.master_epoch + 1},
                            [ElectMaster(broker_name, None, *group.epochs())],
                            f"master of {broker_name} is down and no replica can take over")
        if broker_id is None:
            return _reject(ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE,
                           f"{broker_name} still has no master: no eligible replica is alive")
        return _reject(ResponseCode.CONTROLLER_ELECT_MASTER_FAILED,
                       f"no eligible master for {broker_name}")

    def clean_broker_data(self, broker_name: str, broker_ids: Iterable[int] | None,
                          clean_living: bool, is_alive: AlivePredicate) -> Decision:
        """Forget brokers (all of the group if broker_ids is None); live ones only if forced."""
        group = self.groups.get(broker_name)
        if group is None:
            return _reject(ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                           f"no metadata for broker group {broker_name}")
        ids = None if broker_ids is None else tuple(sorted(set(broker_ids)))
        for broker_id in ids if ids is not None else sorted(group.addresses):
            if broker_id not in group.addresses:
                return _reject(ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                               f"broker {broker_name}/{broker_id} is not registered")
            if is_alive(broker_name, broker_id) and not clean_living:
                return _reject(ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                               f"broker {broker_name}/{broker_id} is alive; refusing to clean it")
        return Decision(ResponseCode.SUCCESS, {}, [CleanBrokerData(broker_name, ids)])

    def sync_state_data(self, broker_names: Iterable[str] | None = None) -> dict[str, Any]:
        names = sorted(self.groups) if broker_names is None else list(broker_names)
        return {name: self.groups[name].to_dict() for name in names if name in self.groups}

    # ----- snapshots -----

    def to_dict(self) -> dict[str, Any]:
        return {name: group.to_dict() for name, group in sorted(self.groups.items())}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "ControllerMetadata":
        meta = cls()
        meta.groups = {name: BrokerGroup.from_dict(g) for name, g in raw.items()}
        return meta
