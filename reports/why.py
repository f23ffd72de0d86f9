"""Why a run failed, in words: the facts behind a lost acknowledged write.

A table of lost messages says *what* was lost. A reader who must learn *why*
needs three facts per lost write: which node acknowledged it, during which
fault window, and what the cluster said about itself at that instant (who
claimed master, at which epoch or Raft term, with which SyncStateSet). This
module groups the lost writes by window and acknowledging node and looks up
the cluster state (cluster.jsonl) at each acknowledgement; run.html.j2 only
renders the result. Pure functions of results.json rows, the fault windows
and the cluster states, so they are unit-tested without a run.
"""
from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

NS = 1_000_000_000
LOST_CATEGORIES = ("lost", "lost_after_consume")
MASTER_ROLES = ("master", "leader")
STATES_SHOWN = 3   # distinct cluster states described per finding, most frequent first


@dataclass(frozen=True)
class GroupState:
    """One broker group as cluster.jsonl saw it at one instant."""

    group: str
    masters: tuple[str, ...]          # every member that said it was master / leader
    master: str | None                # the master the group reports (its epoch / term is this one's)
    epoch: int | None
    term: int | None
    sync_state_set: tuple[str, ...] | None
    roles: tuple[tuple[str, str], ...]   # (node, role) of every member

    def role_of(self, node: str | None) -> str | None:
        return dict(self.roles).get(node) if node else None

    def text(self) -> str:
        rank = f" at epoch {self.epoch}" if self.epoch is not None else (
            f" at term {self.term}" if self.term is not None else "")
        if len(self.masters) > 1:
            both = "both" if len(self.masters) == 2 else "all"
            reported = f"; the group reports {self.master}{rank}" if self.master and rank else ""
            said = f"{_and(self.masters)} {both} claimed master at once (split brain{reported})"
        elif self.masters:
            said = f"{self.masters[0]} was master{rank}"
        else:
            said = "no node was master"
        if self.sync_state_set is not None:
            said += f", SyncStateSet {{{', '.join(self.sync_state_set)}}}"
        return f"{self.group}: {said}"


@dataclass
class StateCount:
    states: tuple[GroupState, ...]
    acker_roles: tuple[str, ...]
    count: int

    def text(self, node: str | None) -> str:
        if not self.states:
            return "no cluster state was recorded"
        text = "; ".join(s.text() for s in self.states)
        claimed = any(node in s.masters for s in self.states)
        if node and self.acker_roles and not claimed:
            text += f"; {node} itself was {_and(self.acker_roles)}"
        return text


@dataclass
class Finding:
    """The lost writes one node acknowledged in one window (or outside every window)."""

    window: dict[str, Any] | None
    node: str | None
    count: int
    first_s: float | None
    last_s: float | None
    first_row: int                      # position of the first of them in the checker's lost list
    category: str
    states: list[StateCount] = field(default_factory=list)
    other_states: int = 0               # acks in states beyond STATES_SHOWN

    @property
    def where(self) -> str:
        return where_text(self.window)

    @property
    def node_text(self) -> str:
        return self.node or "an unknown node (no acknowledging operation in the history)"

    @property
    def targeted(self) -> bool:
        targets = (self.window or {}).get("targets")
        return bool(self.node) and isinstance(targets, list) and self.node in map(str, targets)

    def sentence(self) -> str:
        noun = "message" if self.count == 1 else "messages"
        span = ""
        if self.first_s is not None:
            span = (f" at {self.first_s:.2f} s" if self.last_s == self.first_s
                    else f" between {self.first_s:.2f} and {self.last_s:.2f} s")
        text = f"{self.count} acknowledged {noun} lost that {self.node_text} acknowledged {self.where}{span}"
        if self.targeted:
            text += f"; {self.node} was a target of that fault"
        return text + "."


def where_text(window: dict[str, Any] | None) -> str:
    if window is None:
        return "outside every fault window"
    targets = window.get("targets")
    on = f" on {', '.join(map(str, targets))}" if isinstance(targets, list) and targets else ""
    start, stop = window.get("start_s"), window.get("stop_s")
    times = (f", {start:.2f}–{stop:.2f} s" if isinstance(start, (int, float)) and isinstance(stop, (int, float))
             else (f", from {start:.2f} s" if isinstance(start, (int, float)) else ""))
    return f"during window #{window.get('id')} ({window.get('fault')}{on}{times})"


def _and(items: Iterable[str]) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def group_states(line: dict[str, Any]) -> tuple[GroupState, ...]:
    """The groups of one cluster.jsonl line."""
    out = []
    for group, view in sorted((line.get("groups") or {}).items()):
        if not isinstance(view, dict):
            continue
        members = {str(n): str(r) for n, r in (view.get("members") or {}).items()}
        masters = tuple(sorted(n for n, r in members.items() if r in MASTER_ROLES))
        if not masters and view.get("master"):
            masters = (str(view["master"]),)
        sss = view.get("sync_state_set")
        out.append(GroupState(str(group), masters, str(view["master"]) if view.get("master") else None,
                              view.get("epoch"), view.get("term"),
                              tuple(map(str, sss)) if isinstance(sss, list) else None, tuple(sorted(members.items()))))
    return tuple(out)


class Timeline:
    """Cluster states by time, for looking up the state in force at an instant."""

    def __init__(self, states: list[dict[str, Any]]):
        lines = sorted((s for s in states if isinstance(s.get("time"), int) and "error" not in s),
                       key=lambda s: s["time"])
        self.times = [s["time"] for s in lines]
        self.states = [group_states(s) for s in lines]

    def at(self, seconds: float) -> tuple[GroupState, ...] | None:
        """The last state recorded at or before `seconds`; None before the first."""
        k = bisect.bisect_right(self.times, round(seconds * NS)) - 1
        return self.states[k] if k >= 0 else None


def window_of(seconds: float | None, windows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The fault window an acknowledgement at `seconds` fell in; None outside every window."""
    if seconds is None:
        return None
    for window in windows:
        start, stop = window.get("start_s"), window.get("stop_s")
        if isinstance(start, (int, float)) and start <= seconds and (
                not isinstance(stop, (int, float)) or seconds <= stop):
            return window
    return None


def findings(lost: dict[str, list[dict[str, Any]]], windows: list[dict[str, Any]],
             states: list[dict[str, Any]]) -> list[Finding]:
    """Per lost category, fault window and acknowledging node: the lost writes and the
    cluster states at their acknowledgements. `lost` holds the rows of anomalies.Index.row
    per category (acked_at_s, acked_by). Ordered by the first acknowledgement."""
    timeline = Timeline(states)
    grouped: dict[tuple[str, Any, Any], list[tuple[int, dict[str, Any]]]] = {}
    for category in LOST_CATEGORIES:
        for position, row in enumerate(lost.get(category) or []):
            at = row.get("acked_at_s") if isinstance(row.get("acked_at_s"), (int, float)) else None
            window = window_of(at, windows)
            key = (category, window.get("id") if window else None, row.get("acked_by"))
            grouped.setdefault(key, []).append((position, row))
    by_id = {w.get("id"): w for w in windows}
    out = []
    for (category, window_id, node), rows in grouped.items():
        times = [r["acked_at_s"] for _, r in rows if isinstance(r.get("acked_at_s"), (int, float))]
        counted: Counter = Counter()
        for t in times:
            seen = timeline.at(t)
            if seen is None:
                continue
            roles = tuple(sorted({r for s in seen if (r := s.role_of(node))}))
            counted[(seen, roles)] += 1
        common = counted.most_common()
        finding = Finding(by_id.get(window_id) if window_id is not None else None, node, len(rows),
                          min(times) if times else None, max(times) if times else None, rows[0][0], category,
                          [StateCount(s, roles, n) for (s, roles), n in common[:STATES_SHOWN]],
                          sum(n for _, n in common[STATES_SHOWN:]))
        out.append(finding)
    return sorted(out, key=lambda f: (f.first_s is None, f.first_s or 0.0))


def lost_by_window(found: list[Finding]) -> dict[Any, int]:
    """Window id -> acknowledged writes lost that were acknowledged during that window."""
    out: dict[Any, int] = {}
    for finding in found:
        if finding.window is not None:
            out[finding.window.get("id")] = out.get(finding.window.get("id"), 0) + finding.count
    return out


def summary(found: list[Finding]) -> str:
    """One sentence over every finding: how many, acknowledged by whom, in which window."""
    total = sum(f.count for f in found)
    if not total:
        return ""
    parts = [f"{f.count} by {f.node or 'an unknown node'} "
             + (f"in window #{f.window.get('id')} ({f.window.get('fault')})" if f.window else "outside the windows")
             for f in found]
    noun = "write was" if total == 1 else "writes were"
    return f"{total} acknowledged {noun} lost: {_and(parts)}."


def split_brains(states: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Spans when a group had more than one member claiming master: group, nodes, from, to (s)."""
    spans: list[dict[str, Any]] = []
    open_: dict[str, dict[str, Any]] = {}
    timeline = Timeline(states)
    for time, seen in zip(timeline.times, timeline.states):
        now = {s.group: s.masters for s in seen if len(s.masters) > 1}
        for group in list(open_):
            if open_[group]["nodes"] != list(now.get(group, ())):
                open_.pop(group)["stop_s"] = time / NS
        for group, masters in now.items():
            if group not in open_:
                open_[group] = dict(group=group, nodes=list(masters), start_s=time / NS, stop_s=None)
                spans.append(open_[group])
    return spans
