"""The SUT's view of itself at one instant: who leads each broker group and the controllers.

Built only from what each process reports about itself (PROCESS_STATUS), never
guessed from the workload, so that a recorder sampling it can place every change
of master, epoch or term, SyncStateSet and controller leader on a run's
timeline. The returned dict is the contract of a deployer's `cluster_state()`
(docs/history-format.md, "cluster.jsonl"); a deployer of another system under
test returns the same shape from that system's own admin API:

    {"groups": {<broker group>: {
         "master": <node> | None,        # the member that says it is master / Raft leader
         "epoch": <int> | None,          # controller mode: the master's epoch
         "term": <int> | None,           # DLedger mode: the leader's Raft term
         "sync_state_set": [<node>, ...] | None,   # controller mode, as the master reports it
         "members": {<node>: <role>}}},  # master | slave | leader | follower | candidate | down
     "controller": {"leader": <node> | None, "term": <int> | None,
                    "members": {<node>: <role>}} | None,   # None without controllers
     "nodes": {<node>: {"reachable": <bool>, "down": [<process>, ...]}}}

A node is reachable when at least one of its processes answered; `down` names
the processes on it that did not answer within the timeout.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from sut import admin


@dataclass(frozen=True)
class Probe:
    """One process to ask: where it runs and what it is."""

    node: str
    role: str      # namesrv | broker | controller
    name: str
    address: str
    group: str = ""  # a broker's group (broker_name) as configured


async def gather_statuses(probes: list[Probe], timeout: float) -> list[dict[str, Any] | None]:
    """Every probe's PROCESS_STATUS at once (None where it did not answer)."""
    return list(await asyncio.gather(*(admin.process_status(p.address, timeout=timeout) for p in probes)))


def summarize(probes: list[Probe], statuses: list[dict[str, Any] | None],
              broker_nodes: dict[tuple[str, int], str] | None = None) -> dict[str, Any]:
    """The documented state dict from one round of statuses.

    `broker_nodes` maps (group, broker id) to a node; it is updated from the
    brokers that answered, so a SyncStateSet naming a broker that is down now
    still shows its node when it was seen before.
    """
    ids = broker_nodes if broker_nodes is not None else {}
    answered = list(zip(probes, statuses))
    for probe, status in answered:
        ident = _broker_id(status) if probe.role == "broker" else None
        if ident is not None:
            ids[(_group(probe, status), ident)] = probe.node
    return {"groups": _groups(answered, ids), "controller": _controllers(answered),
            "nodes": _nodes(answered)}


def _group(probe: Probe, status: dict[str, Any] | None) -> str:
    return str((status or {}).get("broker_name") or probe.group or probe.name)


def _broker_id(status: dict[str, Any] | None) -> int | None:
    """The id a SyncStateSet uses: the controller's id in controller mode, else the configured one."""
    if not status:
        return None
    ident = (status.get("ha") or {}).get("controller_broker_id", status.get("broker_id"))
    return int(ident) if isinstance(ident, int) and not isinstance(ident, bool) else None


def _broker_view(status: dict[str, Any] | None) -> tuple[str, int | None, int | None]:
    """(role, epoch, term) as one broker reports them."""
    if status is None:
        return "down", None, None
    ha = status.get("ha") or {}
    raft = ha.get("raft")
    if isinstance(raft, dict):  # DLedger: the commitlog is a Raft log
        return str(raft.get("role") or "follower"), None, raft.get("term")
    role = "master" if status.get("is_leader") else "slave"
    return role, ha.get("master_epoch"), None


def _groups(answered: list[tuple[Probe, dict[str, Any] | None]],
            ids: dict[tuple[str, int], str]) -> dict[str, Any]:
    groups: dict[str, dict[str, Any]] = {}
    best: dict[str, tuple[int, int]] = {}
    for probe, status in answered:
        if probe.role != "broker":
            continue
        name = _group(probe, status)
        group = groups.setdefault(name, {"master": None, "epoch": None, "term": None,
                                         "sync_state_set": None, "members": {}})
        role, epoch, term = _broker_view(status)
        group["members"][probe.node] = role
        if role not in ("master", "leader"):
            continue
        # Two claimants (an old master cut off): the higher epoch or term is the group's.
        rank = (epoch or 0, term or 0)
        if name in best and best[name] >= rank:
            continue
        best[name] = rank
        group.update(master=probe.node, epoch=epoch, term=term,
                     sync_state_set=_sync_state_set(name, status, ids))
    return dict(sorted(groups.items()))


def _sync_state_set(group: str, status: dict[str, Any], ids: dict[tuple[str, int], str]) -> list[str] | None:
    members = (status.get("ha") or {}).get("sync_state_set")
    if members is None:
        return None
    return sorted(ids.get((group, int(b)), f"broker {b}") for b in members)


def _controllers(answered: list[tuple[Probe, dict[str, Any] | None]]) -> dict[str, Any] | None:
    controllers = [(p, s) for p, s in answered if p.role == "controller"]
    if not controllers:
        return None
    members = {p.node: (str(s.get("raft_role") or "follower") if s else "down") for p, s in controllers}
    leaders = [(s.get("term") or 0, p.node) for p, s in controllers if s and s.get("is_leader")]
    term, leader = max(leaders) if leaders else (None, None)
    if term is None:
        terms = [s.get("term") for _, s in controllers if s and s.get("term") is not None]
        term = max(terms) if terms else None
    return {"leader": leader, "term": term, "members": members}


def _nodes(answered: list[tuple[Probe, dict[str, Any] | None]]) -> dict[str, Any]:
    nodes: dict[str, dict[str, Any]] = {}
    for probe, status in answered:
        entry = nodes.setdefault(probe.node, {"reachable": False, "down": []})
        if status is None:
            entry["down"].append(probe.name)
        else:
            entry["reachable"] = True
    return dict(sorted(nodes.items()))
