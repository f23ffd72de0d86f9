"""State-triggered nemeses: faults fired by the cluster's own state, not by a clock.

A triggered fault's window does not start the fault: it *arms* it. From the
window's start the runner watches the samples of the cluster's state (the same
samples harness/cluster_state.py writes to cluster.jsonl, delivered through a
`StateFeed`) and fires the fault at the first sample whose state meets the
trigger; the fault stays on until the window ends. A trigger that never holds
before the window ends never fires, and the run records that.

The instant it fired is recorded (nemesis.jsonl and the window's `fired_at` in
schedule.yaml); a replay of that schedule fires at that offset without watching
(`fired_at: never` replays as no fault), so a replay hits the same point of the
run. The targets are read from the state at the instant of firing: the master
of the first broker group (by name) that meets the trigger, and so on.

The conditions and the target choice are pure functions of two consecutive
samples (`prev`, `cur`), unit-tested without a cluster.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import Field

import nuclei
from faults.apply import Record, apply_all, undo_all
from faults.context import Applied, FaultContext, FaultError
from faults.crash import CrashFault
from faults.options import Duration
from faults.partition import PartitionFault
from faults.registry import register

State = Mapping[str, Any]


# -- reading a state sample (cluster.jsonl's shape, sut/cluster_state.py) ------------------

def groups(state: State | None) -> list[tuple[str, Mapping[str, Any]]]:
    """The broker groups of a sample, by name; none for a failed sample."""
    found = (state or {}).get("groups") or {}
    return sorted((name, group) for name, group in found.items() if isinstance(group, Mapping))


def master_of(state: State | None, name: str) -> str | None:
    group = dict(groups(state)).get(name) or {}
    return group.get("master")


def sync_state_set(state: State | None, name: str) -> frozenset[str] | None:
    group = dict(groups(state)).get(name) or {}
    members = group.get("sync_state_set")
    return frozenset(members) if isinstance(members, list) else None


def controller_leader(state: State | None) -> str | None:
    controller = (state or {}).get("controller")
    return controller.get("leader") if isinstance(controller, Mapping) else None


def live_slaves(state: State | None, name: str) -> list[str]:
    """The group's members up as slaves (or followers), those in the SyncStateSet first."""
    group = dict(groups(state)).get(name) or {}
    master = group.get("master")
    members = group.get("members") or {}
    up = sorted(node for node, role in members.items() if node != master and role in ("slave", "follower"))
    in_set = sync_state_set(state, name) or frozenset()
    return [node for node in up if node in in_set] + [node for node in up if node not in in_set]


# -- the triggers --------------------------------------------------------------------------

@dataclass(frozen=True)
class Firing:
    """What a trigger found: the group, its master, and the nodes the fault hits."""

    group: str
    master: str
    nodes: tuple[str, ...]
    facts: dict[str, Any] = field(default_factory=dict)


def _master_and_controller_leader(prev: State | None, cur: State, name: str) -> bool:
    return master_of(cur, name) is not None and controller_leader(cur) is not None


def _master_with_slave(prev: State | None, cur: State, name: str) -> bool:
    return master_of(cur, name) is not None and bool(live_slaves(cur, name))


def _sss_grown(prev: State | None, cur: State, name: str) -> bool:
    """The same master's SyncStateSet has more members than one sample ago."""
    before, after = sync_state_set(prev, name), sync_state_set(cur, name)
    master = master_of(cur, name)
    return (master is not None and master == master_of(prev, name) and before is not None
            and after is not None and before < after)


def _sss_master_alone(prev: State | None, cur: State, name: str) -> bool:
    master = master_of(cur, name)
    return master is not None and sync_state_set(cur, name) == frozenset({master})


@dataclass(frozen=True)
class Trigger:
    """A named condition on two consecutive samples, per broker group."""

    name: str
    description: str
    condition: Callable[[State | None, State, str], bool]

    def holds(self, prev: State | None, cur: State, name: str) -> bool:
        return self.condition(prev, cur, name)

    def find(self, prev: State | None, cur: State) -> str | None:
        """The first group (by name) whose state meets the trigger, else None."""
        for name, _ in groups(cur):
            if self.holds(prev, cur, name):
                return name
        return None


TRIGGERS: dict[str, Trigger] = {t.name: t for t in (
    Trigger("master-and-controller-leader", "a broker master and a controller leader are both known",
            _master_and_controller_leader),
    Trigger("master-with-slave", "a broker master has a slave up", _master_with_slave),
    Trigger("sss-grown", "the master's SyncStateSet gained a member since the previous sample", _sss_grown),
    Trigger("sss-master-alone", "the master's SyncStateSet is the master alone", _sss_master_alone),
)}


# -- the feed of samples -------------------------------------------------------------------

class StateFeed:
    """The cluster-state samples as they are taken, for triggers to wait on.

    The recorder pushes every sample (also the unchanged ones); a waiter sees
    each pair of consecutive samples once, from the pair current when it arms.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._prev: dict[str, Any] | None = None
        self._cur: dict[str, Any] | None = None
        self._count = 0

    def push(self, time_ns: int, state: dict[str, Any]) -> None:
        with self._cond:
            self._prev, self._cur = self._cur, state
            self._count += 1
            self._cond.notify_all()

    def latest(self) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        with self._cond:
            return self._prev, self._cur

    def wait_for(self, trigger: Trigger, deadline: float | None,
                 stop: threading.Event | None = None) -> tuple[str, dict[str, Any]] | None:
        """(group, the sample) at the first sample meeting `trigger`, or None when
        `deadline` (time.monotonic) passes or `stop` is set first."""
        seen = -1
        while True:
            with self._cond:
                if self._count == seen or self._cur is None:
                    left = None if deadline is None else deadline - time.monotonic()
                    self._cond.wait(0.1 if left is None else max(0.0, min(0.1, left)))
                if self._count != seen and self._cur is not None:
                    seen = self._count
                    group = trigger.find(self._prev, self._cur)
                    if group is not None:
                        return group, self._cur
            if (stop is not None and stop.is_set()) or (deadline is not None and time.monotonic() >= deadline):
                return None


# -- the nemeses ---------------------------------------------------------------------------

class TriggeredFault:
    """A fault armed by its window and fired by `trigger`; `fire` hits the firing's nodes.

    `start(ctx)` (a replay, or a direct use) fires at once on the latest sample,
    whether or not the trigger holds in it: a replay fires at the recorded instant.
    """

    trigger_name = ""
    description = ""

    def __init__(self) -> None:
        self.trigger = TRIGGERS[self.trigger_name]
        self._inner: Any = None

    def targets(self, state: State, group: str, ctx: FaultContext) -> Firing | None:
        """The nodes to hit in `group` (None when the state names no master there)."""
        master = master_of(state, group)
        return None if master is None else Firing(group, master, (master,))

    def start(self, ctx: FaultContext) -> Applied:
        prev, cur = ctx.states.latest() if ctx.states is not None else (None, None)
        if cur is None:
            return Applied(targets=[], details={"note": "no cluster state sampled yet"})
        group = self.trigger.find(prev, cur)
        held = group is not None
        for name, _ in ([(group, None)] if held else groups(cur)):
            firing = self.targets(cur, name, ctx)
            if firing is not None:
                applied = self.fire(ctx, firing)
                applied.details.setdefault("trigger_held", held)
                return applied
        return Applied(targets=[], details={"note": "no master in the cluster state"})

    def fire(self, ctx: FaultContext, firing: Firing) -> Applied:
        raise NotImplementedError

    def stop(self, ctx: FaultContext, handle: Applied) -> None:
        if self._inner is not None:
            self._inner.stop(ctx, handle)
        else:
            undo_all(ctx, handle.actions)


def _details(firing: Firing) -> dict[str, Any]:
    return {"group": firing.group, "master": firing.master, **firing.facts}


def brokers(*nodes: str) -> dict[str, set[str]]:
    """The broker role on each of `nodes` (for signal_roles)."""
    return {node: {"broker"} for node in nodes}


def kill_roles(ctx: FaultContext, what: str, roles: Mapping[str, set[str]], firing: Firing) -> Applied:
    """kill -9, at one instant, the processes of the given roles on each node (restarted at stop)."""
    return signal_roles(ctx, what, roles, {}, firing)


class MasterControllerKill(TriggeredFault):
    """kill -9 the master broker and the controller leader at one instant."""

    name = "master-controller-kill"
    trigger_name = "master-and-controller-leader"
    description = ("when a master and a controller leader are known, kill -9 both at one instant "
                   "(one node when they share it); restart them at stop")

    def targets(self, state: State, group: str, ctx: FaultContext) -> Firing | None:
        master, leader = master_of(state, group), controller_leader(state)
        if master is None or leader is None:
            return None
        return Firing(group, master, tuple(dict.fromkeys((master, leader))), {"controller_leader": leader})

    def fire(self, ctx: FaultContext, firing: Firing) -> Applied:
        roles = {firing.master: {"broker"}}
        roles.setdefault(firing.facts["controller_leader"], set()).add("controller")
        return kill_roles(ctx, f"{self.name} on {', '.join(firing.nodes)}", roles, firing)


class GroupControllerKill(MasterControllerKill):
    """kill -9 every broker of the master's group and the controller leader at one instant:
    whichever broker comes back first is elected, so a restarted node becomes master at once."""

    name = "group-controller-kill"
    description = ("when a master and a controller leader are known, kill -9 every broker of the "
                   "master's group and the controller leader at one instant; restart them at stop")

    def targets(self, state: State, group: str, ctx: FaultContext) -> Firing | None:
        firing = super().targets(state, group, ctx)
        if firing is None:
            return None
        slaves = live_slaves(state, group)
        return Firing(group, firing.master, tuple(dict.fromkeys((*firing.nodes, *slaves))),
                      {**firing.facts, "slaves": slaves})

    def fire(self, ctx: FaultContext, firing: Firing) -> Applied:
        roles = brokers(firing.master, *firing.facts["slaves"])
        roles.setdefault(firing.facts["controller_leader"], set()).add("controller")
        return kill_roles(ctx, f"{self.name} on {', '.join(firing.nodes)}", roles, firing)


class MasterKillSlavesPause(GroupControllerKill):
    """SIGSTOP the group's slaves, then `kill_after` seconds later kill -9 the master's broker and
    the controller leader at one instant; at stop, restart the killed processes and resume the
    slaves only once the old master reports itself master again (or after `master_wait` s).

    With its slaves paused the master keeps appending messages it cannot confirm, so its
    commitlog runs past its confirm offset and its consume queues stop at it when it dies
    (kill_after below the SyncStateSet shrink time, haMaxTimeSlaveNotCatchup). A killed broker's
    controller connections close at once, so the controllers drop it; the
    surviving ones are still followers then and elect nobody. A paused slave sends no
    heartbeats and is dropped once its heartbeat times out (3 s with `timing: fast`), before
    the survivors have a new leader (about 7 s): with no broker of the group alive, that leader
    elects nobody and keeps naming the old master with its whole SyncStateSet. The old master,
    restarted, is therefore master again at once with slaves it cannot reach yet, and the
    paused slaves, resumed, follow it within about a second, without a JVM start.

    With `rekill_after`, the old master, once back, serves that many seconds with its slaves
    still paused (consumers read from it) and is then killed again; the slaves are resumed
    and its restart waits until another broker is elected, or the controllers' SyncStateSet
    is the old master alone (nobody else is electable), at most `master_wait` s. What it
    appended past its confirm offset is then lost when a slave is elected (RocketMQ 5.1.0
    elects the restarted old master anew with a set of itself alone: nobody else is)."""

    name = "master-controller-kill-slaves-pause"
    description = ("when a master and a controller leader are known, SIGSTOP the group's slaves, "
                   "kill_after s later (default 3) kill -9 the master's broker and the controller "
                   "leader; at stop restart the killed processes and resume the slaves once the old "
                   "master reports itself master again (at most master_wait s, default 120); "
                   "with rekill_after, kill the old master's broker again that many seconds after "
                   "it is back, resume the slaves and restart it once another broker is elected")

    def __init__(self, kill_after: Duration = 3.0, master_wait: Duration = 120.0,
                 rekill_after: Duration | None = None) -> None:
        super().__init__()
        self.kill_after, self.master_wait, self.rekill_after = kill_after, master_wait, rekill_after

    def fire(self, ctx: FaultContext, firing: Firing) -> Applied:
        kills = brokers(firing.master)
        kills.setdefault(firing.facts["controller_leader"], set()).add("controller")
        pauses = brokers(*firing.facts["slaves"])
        paused = signal_roles(ctx, f"{self.name}: pause {', '.join(pauses)}", {}, pauses, firing)
        try:
            time.sleep(self.kill_after)
            killed = signal_roles(ctx, f"{self.name}: kill on {', '.join(kills)}", kills, {}, firing)
        except BaseException:
            undo_all(ctx, paused.actions)
            raise
        return Applied(targets=list(firing.nodes), actions=[*paused.actions, *killed.actions],
                       details={**killed.details, "kill_after_s": self.kill_after,
                                "processes": paused.details["processes"] + killed.details["processes"]})

    def stop(self, ctx: FaultContext, handle: Applied) -> None:
        kills = [a for a in handle.actions if a[0].action == "kill"]
        pauses = [a for a in handle.actions if a[0].action != "kill"]
        undo_all(ctx, kills)
        group, master = handle.details.get("group"), handle.details.get("master")
        if not (pauses and ctx.states is not None and group and master):
            undo_all(ctx, pauses)
            return
        wait_in_group(ctx, group, lambda cur: master_of(cur, group) == master, self.master_wait)
        if self.rekill_after is None:
            undo_all(ctx, pauses)
            return
        time.sleep(self.rekill_after)
        again = signal_roles(ctx, f"{self.name}: kill {master} again", {master: {"broker"}}, {},
                             Firing(group, master, (master,)))
        try:
            undo_all(ctx, pauses)
            # another broker is master, or nobody else is electable
            wait_in_group(ctx, group, lambda cur: master_of(cur, group) not in (None, master)
                          or sync_state_set(cur, group) == frozenset({master}), self.master_wait)
        finally:
            undo_all(ctx, again.actions)

def wait_in_group(ctx: FaultContext, group: str, holds: Callable[[State], bool], seconds: float) -> State | None:
    """The first cluster-state sample (within `seconds`) where `holds` for `group`, else None:
    the steps of a multi-step triggered fault wait on the same feed as its trigger."""
    step = Trigger("step", "a step of a triggered fault", lambda prev, cur, found: found == group and holds(cur))
    found = ctx.states.wait_for(step, time.monotonic() + seconds)
    return None if found is None else found[1]


def signal_roles(ctx: FaultContext, what: str, kills: Mapping[str, set[str]],
                 pauses: Mapping[str, set[str]], firing: Firing) -> Applied:
    """kill -9 the processes of the roles in `kills` and SIGSTOP those in `pauses`, per node, at
    one instant (killed ones restarted, paused ones resumed, on undo)."""
    nodes = dict.fromkeys([*kills, *pauses])
    work = {node: [(p, "kill" if getattr(p, "role", "") in kills.get(node, ()) else "pause")
                   for p in ctx.processes(node)
                   if getattr(p, "role", "") in kills.get(node, set()) | pauses.get(node, set())]
            for node in nodes}

    def job(node: str):
        def run(record: Record) -> None:
            for proc, how in work[node]:
                try:
                    entries = (nuclei.kill(ctx.pool, ctx.journal, proc, signal="KILL") if how == "kill"
                               else nuclei.pause(ctx.pool, ctx.journal, proc))
                    for entry in entries:
                        record(entry, proc)
                except nuclei.ProcessNotRunning:
                    pass
        return run

    actions = apply_all(ctx, what, {node: job(node) for node in work})
    done = sorted(f"{a.entry.node}/{a.entry.params.get('name')}" + (" (paused)" if a.entry.action == "pause" else "")
                  for a in actions)
    return Applied(targets=list(firing.nodes), actions=actions, details={**_details(firing), "processes": done})


class MasterSlaveIsolate(TriggeredFault):
    """Cut the master and one slave (seeded choice, SyncStateSet members first) off from the rest."""

    name = "master-slave-isolate"
    trigger_name = "master-with-slave"
    min_nodes = 2
    description = ("when a master has a slave up, partition the master and one of its slaves "
                   "(a SyncStateSet member if any) away from every other node; heal at stop")

    def targets(self, state: State, group: str, ctx: FaultContext) -> Firing | None:
        master, slaves = master_of(state, group), live_slaves(state, group)
        if master is None or not slaves:
            return None
        in_set = [s for s in slaves if s in (sync_state_set(state, group) or ())]
        slave = ctx.rng.choice(in_set or slaves)
        return Firing(group, master, (master, slave), {"slave": slave})

    def fire(self, ctx: FaultContext, firing: Firing) -> Applied:
        self._inner = PartitionFault("fixed", targets=firing.nodes)
        applied = self._inner.start(ctx)
        applied.details.update(_details(firing))
        return applied


# RocketMQ's default listenPort (clients), haListenPort (a slave's connection to its master) and
# controller listen port (the brokers' requests to the controllers).
CLIENT_PORT, HA_PORT, CONTROLLER_PORT = 10911, 10912, 9878
TcpPort = Annotated[int, Field(ge=1, le=65535, description="a TCP port in [1, 65535]")]


class CutsAndKills(TriggeredFault):
    """A multi-step triggered fault of TCP port cuts and kills around a master and one of its
    live slaves (`chosen` names it in the firing's facts; a SyncStateSet member first): the
    cuts are held until stop, and healed there before the killed processes restart."""

    chosen = "slave"

    def targets(self, state: State, group: str, ctx: FaultContext) -> Firing | None:
        master, slaves = master_of(state, group), live_slaves(state, group)
        if master is None or not slaves:
            return None
        return Firing(group, master, (master, *slaves), {self.chosen: slaves[0], "slaves": slaves})

    def _cut(self, ctx: FaultContext, what: str, cuts: dict[str, tuple[list[str], dict[str, Any]]]) -> list[Any]:
        """Port cuts, one per node: (peer addresses, nuclei.drop's port options)."""
        def job(node: str):
            peers, how = cuts[node]
            return lambda record: record(nuclei.drop(ctx.pool, ctx.journal, node, peers, **how), None)
        return apply_all(ctx, f"{self.name}: {what}", {node: job(node) for node in cuts})

    def stop(self, ctx: FaultContext, handle: Applied) -> None:
        cut = [a for a in handle.actions if a.entry.action == "drop"]
        undo_all(ctx, cut)  # healed first, so restarted brokers reach the master elected meanwhile
        undo_all(ctx, [a for a in handle.actions if a.entry.action != "drop"])

    def _applied(self, firing: Firing, held: list[Any], steps: dict[str, Any], stopped: str | None) -> Applied:
        details = {**_details(firing), **steps, "processes": sorted(
            f"{a.entry.node}/{a.entry.params.get('name', a.entry.action)}" for a in held)}
        if stopped:
            details["stopped_early"] = stopped
        return Applied(targets=list(firing.nodes), actions=held, details=details)

    @staticmethod
    def _undo(ctx: FaultContext, held: list[Any], which: Callable[[Any], bool]) -> list[Any]:
        """Undo the held actions `which` picks now; the rest stay held for stop."""
        undo_all(ctx, [a for a in held if which(a)])
        return [a for a in held if not which(a)]


class OldMasterServesAlone(CutsAndKills):
    """Make a restarted old master the only broker its group's consumers can read from,
    before it truncates its log to the master elected while it was down.

    Cut one slave (the keeper, a SyncStateSet member first) from the master's HA port and
    SIGSTOP the others, so the master appends what it cannot confirm: a paused slave would
    still take the master's stream into its socket buffer and catch up when resumed, a cut
    one keeps its connection (no shrink) and gets nothing. `kill_after` seconds later kill -9
    the master's broker and the other slaves': the keeper is elected without the tail. Once
    it is master, cut the clients from it (TCP to its `client_port`: no consumer reads past the
    old master's offsets there) and the old master's node from its HA port (`ha_port`), and
    restart the old master: it follows the keeper but cannot reach it, so it keeps its log.
    Once the name server routes it as a slave, kill -9 the keeper: the old master is then
    the group's only broker and its consumers read from it, what it rebuilt at recovery
    included. At stop the cut is healed and the killed brokers restarted; the keeper is
    elected again and the old master truncates its tail when it follows (RocketMQ's #6609).
    Each wait is at most `wait` seconds; a step whose state never comes ends the firing there.
    """

    name = "old-master-serves-alone"
    trigger_name = "master-with-slave"
    chosen = "keeper"
    description = ("when a master has a slave up, cut one slave (the keeper) from the master's "
                   "ha_port (default 10912) and SIGSTOP the others; kill_after s later (default 3) "
                   "kill -9 the master's broker and the other slaves' and wait for the keeper to be "
                   "master; cut the clients from its client_port (default 10911) and the old "
                   "master's node from its ha_port (default 10912), restart the old master and, once it "
                   "is routed as a slave, kill -9 the new "
                   "master's broker: consumers read from the old master alone; at stop heal the cut "
                   "and restart the killed brokers (each wait at most wait s, default 120)")

    def __init__(self, kill_after: Duration = 3.0, wait: Duration = 120.0, ha_port: TcpPort = HA_PORT,
                 client_port: TcpPort = CLIENT_PORT) -> None:
        super().__init__()
        self.kill_after, self.wait = kill_after, wait
        self.ha_port, self.client_port = ha_port, client_port

    def fire(self, ctx: FaultContext, firing: Firing) -> Applied:
        group, old, keeper = firing.group, firing.master, firing.facts["keeper"]
        held: list[Any] = []
        steps: dict[str, Any] = {}
        try:
            others = [s for s in firing.facts["slaves"] if s != keeper]
            held += self._cut(ctx, f"cut {keeper} from {old}:{self.ha_port}",
                              {keeper: ([ctx.address(old)], {"port": self.ha_port})})
            held += signal_roles(ctx, f"{self.name}: pause {others}", {}, brokers(*others), firing).actions
            time.sleep(self.kill_after)
            held += signal_roles(ctx, f"{self.name}: kill {old} and {others or 'no other slave'}",
                                 brokers(old, *others), {}, firing).actions
            new = wait_in_group(ctx, group, lambda cur: master_of(cur, group) not in (None, old), self.wait)
            if new is None:
                return self._applied(firing, held, steps, "no other broker became master")
            steps["new_master"] = new_master = master_of(new, group)
            held += self._cut(ctx, f"cut the clients from {new_master}:{self.client_port} and {old} from "
                                   f"{new_master}:{self.ha_port}", {
                old: ([ctx.address(new_master)], {"port": self.ha_port}),
                new_master: ([nuclei.net.control_address(ctx.pool, new_master)],
                             {"port": self.client_port, "inbound": True})})
            held = self._undo(ctx, held, lambda a: a.entry.node == old and a.entry.action == "kill")
            if wait_in_group(ctx, group, lambda cur: (dict(groups(cur)).get(group) or {}).get(
                    "members", {}).get(old) == "slave", self.wait) is None:
                return self._applied(firing, held, steps, f"{old} was never routed as a slave")
            held += signal_roles(ctx, f"{self.name}: kill {new_master}", brokers(new_master), {}, firing).actions
        except BaseException:
            undo_all(ctx, held)
            raise
        return self._applied(firing, held, steps, None)

class SssGrowthUnheard(CutsAndKills):
    """Lose the master with a slave the controllers have just added to its SyncStateSet while
    the master, not having heard their answer, still acknowledges without that slave.

    kill -9 the other slaves' brokers and cut one slave (the lagger) from the master's HA port
    until the controllers' SyncStateSet is the master alone. Heal the cut and, the moment the
    lagger's HA connection is back (before its handshake ends), drop the controllers' answers
    at the master's node (segments with data from their `controller_port`: the master's
    requests and heartbeats still arrive). The lagger catches up, the master reports the grown
    set, the controllers apply it, and their answer never arrives. Once the controllers' set
    holds the lagger, cut it again and `lag` seconds later kill -9 the master's broker: the
    lagger is the only electable member and lacks what the master acknowledged in those
    seconds, unless the master counted the set it reported (RocketMQ's #5663).

    The master's RPCs to the controllers time out while their answers are dropped (3 s) and
    RocketMQ then closes the connection, which the controllers take for the master leaving:
    that too elects the lagger once it is in the set, and nobody useful before it, so the
    answers are dropped only from the lagger's reconnection on (a cut slave retries every
    5 s). At stop the cuts are healed and the killed brokers restarted. Each wait is at most
    `wait` seconds; a state that never comes ends the firing there.
    """

    name = "sss-growth-unheard"
    trigger_name = "master-with-slave"
    chosen = "lagger"
    description = ("when a master has a slave up, kill -9 its other slaves' brokers and cut one slave (the "
                   "lagger) from the master's ha_port (default 10912) until the controllers' SyncStateSet "
                   "is the master alone; heal the cut and, once the lagger has reconnected, drop the "
                   "controllers' answers at the master's node (data from their controller_port, default "
                   "9878; its requests still arrive); once the controllers add the lagger back, cut it "
                   "again and lag s later (default 3) kill -9 the master's broker; at stop heal the cuts "
                   "and restart the killed brokers (each wait at most wait s, default 60)")

    def __init__(self, lag: Duration = 3.0, wait: Duration = 60.0, ha_port: TcpPort = HA_PORT,
                 controller_port: TcpPort = CONTROLLER_PORT) -> None:
        super().__init__()
        self.lag, self.wait = lag, wait
        self.ha_port, self.controller_port = ha_port, controller_port

    def fire(self, ctx: FaultContext, firing: Firing) -> Applied:
        group, master, lagger = firing.group, firing.master, firing.facts["lagger"]
        others = [s for s in firing.facts["slaves"] if s != lagger]
        alone = lambda cur: master_of(cur, group) == master and sync_state_set(cur, group) == {master}  # noqa: E731
        added = lambda cur: master_of(cur, group) == master and lagger in (sync_state_set(cur, group) or ())  # noqa: E731
        lag_cut = (f"cut {lagger} from {master}:{self.ha_port}", {lagger: ([ctx.address(master)], {"port": self.ha_port})})
        held: list[Any] = []
        steps: dict[str, Any] = {}
        try:
            if others:
                held += signal_roles(ctx, f"{self.name}: kill {others}", brokers(*others), {}, firing).actions
            held += self._cut(ctx, *lag_cut)
            if wait_in_group(ctx, group, alone, self.wait) is None:
                return self._applied(firing, held, steps, f"the SyncStateSet never shrank to {master} alone")
            before = nuclei.net.connections(ctx.pool, master, self.ha_port)
            held = self._undo(ctx, held, lambda a: a.entry.node == lagger and a.entry.action == "drop")
            if not self._reconnected(ctx, master, ctx.address(lagger), before):
                return self._applied(firing, held, steps, f"{lagger} never reconnected to {master}:{self.ha_port}")
            held += self._cut(ctx, f"drop the controllers' answers to {master}", {
                master: (self._controllers(ctx), {"port": self.controller_port, "answers": True})})
            if wait_in_group(ctx, group, added, self.wait) is None:
                return self._applied(firing, held, steps, f"the controllers never added {lagger} back")
            held += self._cut(ctx, *lag_cut)
            time.sleep(self.lag)
            held += signal_roles(ctx, f"{self.name}: kill {master}", brokers(master), {}, firing).actions
            new = wait_in_group(ctx, group, lambda cur: master_of(cur, group) not in (None, master), self.wait)
            steps["new_master"] = master_of(new, group) if new is not None else None
        except BaseException:
            undo_all(ctx, held)
            raise
        return self._applied(firing, held, steps, None)

    def _reconnected(self, ctx: FaultContext, master: str, address: str, before: set[tuple[str, int]]) -> bool:
        """Whether `address` opens a new connection to the master's HA port within `wait` s."""
        deadline = time.monotonic() + self.wait
        while time.monotonic() < deadline:
            if any(peer == address for peer, _ in nuclei.net.connections(ctx.pool, master, self.ha_port) - before):
                return True
            time.sleep(0.05)
        return False

    @staticmethod
    def _controllers(ctx: FaultContext) -> list[str]:
        """The addresses of the nodes running a controller (every node when none is known)."""
        nodes = [n for n in ctx.names if any(getattr(p, "role", "") == "controller" for p in ctx.processes(n))]
        return [ctx.address(n) for n in nodes or ctx.names]


class SssGrownMasterKill(TriggeredFault):
    """kill -9 the master's broker right after its SyncStateSet gained a member."""

    name = "sss-grown-master-kill"
    trigger_name = "sss-grown"
    description = ("when the master's SyncStateSet has just gained a member, kill -9 the master's "
                   "broker process; restart it at stop")

    def fire(self, ctx: FaultContext, firing: Firing) -> Applied:
        return kill_roles(ctx, f"{self.name} on {firing.master}", {firing.master: {"broker"}}, firing)


class SlavesKill(TriggeredFault):
    """kill -9 every slave broker of the master's group: its SyncStateSet shrinks to the master."""

    name = "slaves-kill"
    trigger_name = "master-with-slave"
    description = ("when a master has a slave up, kill -9 the broker process of every slave of its "
                   "group at one instant; restart them at stop")

    def targets(self, state: State, group: str, ctx: FaultContext) -> Firing | None:
        master, slaves = master_of(state, group), live_slaves(state, group)
        if master is None or not slaves:
            return None
        return Firing(group, master, tuple(slaves), {"slaves": list(slaves)})

    def fire(self, ctx: FaultContext, firing: Firing) -> Applied:
        return kill_roles(ctx, f"{self.name} on {', '.join(firing.nodes)}",
                          brokers(*firing.nodes), firing)


class SssAloneMasterCrash(TriggeredFault):
    """Machine crash of the master's node while its SyncStateSet is the master alone."""

    name = "sss-alone-master-crash"
    trigger_name = "sss-master-alone"
    needs_crash_fs = True
    description = ("when the master's SyncStateSet is the master alone, crash the master's machine "
                   "(kill -9 everything there, drop unsynced writes); restart at stop")

    def fire(self, ctx: FaultContext, firing: Firing) -> Applied:
        self._inner = CrashFault("fixed", targets=(firing.master,))
        applied = self._inner.start(ctx)
        applied.details.update(_details(firing))
        return applied


TRIGGERED = (MasterControllerKill, GroupControllerKill, MasterKillSlavesPause, OldMasterServesAlone, SssGrowthUnheard,
             MasterSlaveIsolate,
             SssGrownMasterKill, SlavesKill, SssAloneMasterCrash)
for _cls in TRIGGERED:
    register(_cls, origin="builtin")


def trigger_of(nemesis: Any) -> Trigger | None:
    """The trigger a nemesis waits for (None for a clock-scheduled one)."""
    trigger = getattr(nemesis, "trigger", None)
    return trigger if isinstance(trigger, Trigger) else None


NEVER = "never"  # schedule.yaml's fired_at for a trigger that never fired


def fire_on(ctx: FaultContext, nemesis: TriggeredFault, deadline: float | None,
            stop: threading.Event) -> tuple[Applied, float] | None:
    """Wait for the nemesis's trigger until `deadline` (time.monotonic) or `stop`, and
    fire it on the sample that met it: (what it did, the time.monotonic instant it
    fired). None when it never fired."""
    if ctx.states is None:
        raise FaultError(f"fault {nemesis.name}: no cluster-state samples to trigger on")
    found = ctx.states.wait_for(nemesis.trigger, deadline, stop)
    if found is None:
        return None
    instant = time.monotonic()
    group, sample = found
    firing = nemesis.targets(sample, group, ctx)
    if firing is None:  # the condition holds but names nobody to hit: fire on the latest state
        return nemesis.start(ctx), instant
    applied = nemesis.fire(ctx, firing)
    applied.details.setdefault("trigger_held", True)
    return applied, instant


__all__ = ["Firing", "NEVER", "StateFeed", "TRIGGERS", "Trigger", "TriggeredFault", "fire_on", "trigger_of"]
