"""figure-8-partition: the Raft paper's figure 8 played against the current leader.

A prior-term entry counted committed by replicas alone (no entry of the new
leader's own term) can be overwritten by a later leader (Raft 5.4.2). Random
partitions almost never line up the four steps that needs, so this nemesis
drives them, each step waiting until the election it needs has happened:

1. the leader L and the nameserver's node S are cut off from the other
   members: clients still reach L through S, so L appends entries X that reach
   at most S (not committed); the others elect M, which gets no client (it
   cannot register with the nameserver) and so appends nothing;
2. M joins S alone: M registers, clients send to it and it appends entries Y of
   its newer term that reach at most S, until its leadership lapses (`lease`
   seconds: the SUT's election timeout, 0.6 s at `timing: fast`); L joins the
   remaining members, a majority whose logs are all behind L's (only L can
   gather their votes), is elected and replicates X to them;
3. L joins S alone: L registers and consumers read X until its leadership
   lapses (`lease` seconds again); M joins the remaining members, who hold X
   but not L's newer entries: M's newest entry (Y) is of a newer term than X,
   so only M can gather their votes; it is elected and overwrites X with Y;
4. L alone is cut off until the window ends, so M's side takes client writes
   of M's term before L can come back and win with its log.

A correct Raft (a new leader commits an entry of its own term first) stays
consistent: in step 2 L's no-op commits X, and in step 3 the members then
refuse M. A step whose election does not come within `step_timeout` seconds
ends the sequence where it is (the partition stays until the window ends).
When the leader is on the nameserver's node, step 0 first pauses (SIGSTOP)
the brokers there until another member is elected, resumes them, waits
`lease` seconds (the new leader registers) and starts over from that leader.
A pause, not a partition: a node cut off alone moves its term up with every
vote round and, at the heal, would force an election it may win, putting
the leader back on the nameserver's node; a paused node keeps its old term
and follows the new leader. Needs at least five members (with three, the
nameserver's node is always one of the two sides); the nameserver's node is
found from the SUT's processes.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

import nuclei
from faults import grudge as shapes
from faults.apply import Record, apply_all, undo_all
from faults.context import Applied, FaultContext
from faults.options import Duration
from faults.registry import register
from faults.targets import TargetError

log = logging.getLogger(__name__)

MIN_MEMBERS = 5


class Figure8Partition:
    """Drive the figure-8 sequence of partitions in a background thread; stop heals."""

    name = "figure-8-partition"
    description = ("the Raft paper's figure 8 against the current leader: old leader's tail "
                   "replicated by a later leader, then overwritten (needs 5 members)")
    min_nodes = MIN_MEMBERS

    def __init__(self, step_timeout: Duration = 4.0, lease: Duration = 0.7, poll: Duration = 0.05) -> None:
        self.step_timeout = step_timeout
        self.lease = lease
        self.poll = poll
        self._stopped = threading.Event()
        self._worker: threading.Thread | None = None

    def start(self, ctx: FaultContext) -> Applied:
        members = ctx.candidates()
        if len(members) < MIN_MEMBERS:
            raise TargetError(f"{self.name} needs at least {MIN_MEMBERS} members, there are {len(members)}")
        namesrv = next((node for node in ctx.names
                        if any(getattr(p, "role", "") == "namesrv" for p in ctx.processes(node))), None)
        if namesrv is None:
            raise TargetError(f"{self.name} needs a nameserver process to steer clients by; the SUT has none")
        leader = ctx.find_leader()
        handle = Applied(targets=[], details={"namesrv_node": namesrv, "steps": []})
        if leader is None:
            handle.details["note"] = "no leader found"
            return handle
        handle.targets = [leader]
        if leader == namesrv:
            handle.actions = apply_all(ctx, f"{self.name} step 0", {namesrv: self._pause_brokers(ctx, namesrv)})
            handle.details["steps"].append("0: the leader on the nameserver's node paused")
        else:
            self._switch(ctx, handle, self._step1(members, namesrv, leader), "1: leader and nameserver cut off")
        self._worker = threading.Thread(target=self._play, args=(ctx, handle, members, namesrv, leader),
                                        name=self.name, daemon=True)
        self._worker.start()
        return handle

    @staticmethod
    def _step1(members: Sequence[str], namesrv: str, leader: str) -> shapes.Grudge:
        nodes = list(dict.fromkeys([*members, namesrv]))
        return shapes.from_components([[leader, namesrv], [n for n in nodes if n not in (leader, namesrv)]])

    def _play(self, ctx: FaultContext, handle: Applied, members: Sequence[str], namesrv: str, old: str) -> None:
        nodes = list(dict.fromkeys([*members, namesrv]))
        try:
            if old == namesrv:
                # Step 0 paused the brokers of the nameserver's node: start over from the leader
                # the others elect, once it had the whole cluster for a lease (it registers with
                # the nameserver, so clients reach it when step 1 cuts it off with S).
                moved = self._await_leader(ctx, [n for n in members if n != namesrv])
                if moved is None:
                    return
                old = moved
                self._switch(ctx, handle, {}, f"0: {old} elected, the paused brokers resumed")
                if self._stopped.wait(self.lease):
                    return
                self._switch(ctx, handle, self._step1(members, namesrv, old), f"1: {old} and nameserver cut off")
            others = [n for n in members if n not in (old, namesrv)]
            new = self._await_leader(ctx, others)
            if new is None:
                return
            rest = [n for n in others if n != new]
            self._switch(ctx, handle, shapes.from_components([[new, namesrv], [old, *rest]]),
                         f"2: {new} with the nameserver, {old} with {', '.join(rest)}")
            if not self._leader_and_lease(ctx, old):
                return
            self._switch(ctx, handle, shapes.from_components([[old, namesrv], [new, *rest]]),
                         f"3: {old} with the nameserver, {new} with {', '.join(rest)}")
            if not self._leader_and_lease(ctx, new):
                return
            self._switch(ctx, handle, shapes.isolate(old, nodes), f"4: {old} cut off")
        except Exception as error:  # noqa: BLE001 - the window's stop (or the final heal) undoes it
            log.warning("%s: sequence ended: %s", self.name, error)

    @staticmethod
    def _pause_brokers(ctx: FaultContext, node: str) -> Callable[[Record], None]:
        """An apply_all job that SIGSTOPs the brokers of `node` (its nameserver runs on)."""
        def run(record: Record) -> None:
            for proc in ctx.target_processes(node, "broker"):
                for entry in nuclei.pause(ctx.pool, ctx.journal, proc):
                    record(entry, proc)
        return run

    def _leader_and_lease(self, ctx: FaultContext, node: str) -> bool:
        """Wait until `node` leads and the leader cut off by the step just taken has had
        `lease` seconds to lapse; False when the step timed out or the fault stopped."""
        lease_end = time.monotonic() + self.lease
        return (self._await_leader(ctx, [node]) is not None
                and not self._stopped.wait(max(0.0, lease_end - time.monotonic())))

    def _await_leader(self, ctx: FaultContext, among: Sequence[str]) -> str | None:
        """The leader once it is one of `among`; None when the step timed out or the fault stopped."""
        deadline = time.monotonic() + self.step_timeout
        while not self._stopped.is_set() and time.monotonic() < deadline:
            leader = ctx.leader(ctx.leader_role())
            if leader in among:
                return leader
            self._stopped.wait(self.poll)
        return None

    def _switch(self, ctx: FaultContext, handle: Applied, grudge: shapes.Grudge, step: str) -> None:
        """Put the new grudge on, then take the previous one off (never a moment fully healed);
        handle.grudge is what the window's stop event records."""
        def job(node: str):
            peers = [ctx.address(other) for other in sorted(grudge[node])]

            def run(record: Record) -> None:
                record(nuclei.drop(ctx.pool, ctx.journal, node, peers), None)
            return run

        previous = handle.actions
        handle.actions = apply_all(ctx, f"{self.name} step {step[0]}",
                                   {node: job(node) for node in grudge if grudge[node]})
        undo_all(ctx, previous)
        handle.grudge = shapes.to_json(grudge)
        handle.details["steps"].append(step)  # recorded in the start event: step 1 only
        log.info("%s: step %s", self.name, step)

    def stop(self, ctx: FaultContext, handle: Applied) -> None:
        self._stopped.set()
        if self._worker is not None:
            self._worker.join()  # its current step finishes, so its rules are all in handle.actions
        undo_all(ctx, handle.actions)


register(Figure8Partition, origin="builtin")
