"""The `group` checker: a consumer group's deliveries and committed offsets.

From the group workload's history (workloads/group.py, docs/workloads.md):
a *hold* is one consumer's possession of one queue, from the rebalance that
gave it the queue (starting at the offset the broker returned) to the next
rebalance, kill or leave of that consumer. Per run:

- lost: an acknowledged send never delivered to the group (invalid);
- skip: an acknowledged message below an offset the broker gave a new holder
  as committed, never delivered (invalid);
- order: within one hold, polls that do not go on where the previous one
  ended, or deliveries not in queue-offset order (invalid);
- offset rollback: a hold starting below the highest offset the group had
  committed (acknowledged) on the queue before it began: `by_commit` when a
  later commit wrote the lower offset (a stale consumer committing what it
  held), `by_broker` when none did (the broker lost commits: a failover to a
  replica behind); counted, with the duplicates they cause (valid: RocketMQ
  consumes at least once);
- duplicates: deliveries of a message the group had already got, by cause:
  `offset_rollback` and `failover` (inside a rollback's range, by its kind),
  `rebalance` (a new holder starting at the last commit, below what the
  previous holder had delivered).

Group histories are small (a few consumers, short runs): their rows are
collected once and checked in Python on the driver.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable

from .rows import Findings, RowsChecker
from .rows import json_value as _json

# The invalid findings, each with the problem line a report shows ("<count> <what>").
INVALID = {"lost": "acknowledged message(s) never delivered to the group (lost)",
           "skip": "message(s) below an offset the broker gave as committed, never delivered (skip)",
           "order": "poll(s) within one consumer's hold of a queue not in offset order (order)"}


@dataclass
class _Hold:
    client: str
    queue: int
    start: int          # the offset the broker gave
    began: int          # ns: the rebalance's completion
    next: int | None = None
    rollback: str | None = None   # "failover" or "offset_rollback" when it started rolled back
    rolled_from: int = 0


COUNTED = ("sent_ok", "delivered", "lost", "skip", "order", "offset_rollback", "offset_rollback_by_commit",
           "offset_rollback_by_broker", "duplicates", "duplicates_rebalance", "duplicates_failover",
           "duplicates_offset_rollback", "holds", "rebalances", "commits")


def check_rows(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The group section of one run from its operations (index, process, f, key, type,
    invoke_time, complete_time, invoke_value, value), in completion order."""
    found = Findings(INVALID)
    ops = sorted(rows, key=lambda r: (r["complete_time"] is None, r["complete_time"] or 0, r["index"]))
    sent: dict[str, tuple[int, int]] = {}            # id -> (queue, offset) of ok sends
    delivered: dict[str, int] = defaultdict(int)
    delivered_offsets: dict[int, set[int]] = defaultdict(set)
    acked_commits: dict[int, list[tuple[int, int]]] = defaultdict(list)   # queue -> (complete ns, offset)
    any_commits: dict[int, list[tuple[int, int]]] = defaultdict(list)     # queue -> (invoke ns, offset)
    holds: dict[str, dict[int, _Hold]] = defaultdict(dict)   # client id -> queue -> hold
    given_starts: dict[int, int] = defaultdict(int)            # queue -> highest start the broker gave

    for op in ops:
        f, kind = op["f"], op["type"]
        value = _json(op["value"])
        client = str((_json(op["invoke_value"]) or {}).get("client") if f != "rebalance" else (value or {}).get("client"))
        if f == "send" and kind == "ok" and isinstance(value, dict):
            sent[str(value.get("id"))] = (int(value.get("queue", op["key"] or 0)), int(value.get("offset", -1)))
        elif f == "commit" and kind in ("ok", "info") and isinstance(value, dict):
            found.counts["commits"] += kind == "ok"
            for q, off in (value.get("offsets") or {}).items():
                any_commits[int(q)].append((op["invoke_time"], int(off)))
                if kind == "ok":
                    acked_commits[int(q)].append((op["complete_time"], int(off)))
        elif f in ("kill", "leave"):
            holds.pop(client, None)
        elif f == "rebalance" and kind == "ok" and isinstance(value, dict):
            found.counts["rebalances"] += 1
            _rebalance(found, holds, client, value, op, acked_commits, any_commits, given_starts)
        elif f == "poll" and kind == "ok" and isinstance(value, list):
            _poll(found, holds.get(client, {}).get(int(op["key"])), op, value, delivered, delivered_offsets)

    found.counts["sent_ok"] = len(sent)
    found.counts["delivered"] = sum(delivered.values())
    for msg_id, (queue, offset) in sorted(sent.items()):
        if delivered.get(msg_id):
            continue
        found.add("lost", {"id": msg_id, "queue": queue, "offset": offset})
        if 0 <= offset < given_starts.get(queue, 0):
            found.add("skip", {"id": msg_id, "queue": queue, "offset": offset,
                               "below_committed": given_starts[queue]})
    return found.section(COUNTED, found.counts["holds"] > 0, "no consumer ever held a queue: nothing was consumed")


def _rebalance(found: Findings, holds: dict[str, dict[int, _Hold]], client: str, value: dict[str, Any],
               op: dict[str, Any], acked: dict[int, list[tuple[int, int]]], written: dict[int, list[tuple[int, int]]],
               given_starts: dict[int, int]) -> None:
    mine = holds.setdefault(client, {})
    held = {int(q) for q in value.get("held", [])}
    for q in list(mine):
        if q not in held:
            del mine[q]
    for q_text, start in (value.get("gained") or {}).items():
        q, start = int(q_text), int(start)
        found.counts["holds"] += 1
        hold = _Hold(str(value.get("client")), q, start, op["complete_time"] or 0, next=start)
        given_starts[q] = max(given_starts[q], start)
        before = [off for t, off in acked[q] if t is not None and t <= op["invoke_time"]]
        top = max(before, default=None)
        if top is not None and start < top:
            later_low = any(t >= _acked_time(acked[q], top) and off <= start for t, off in written[q])
            hold.rollback, hold.rolled_from = ("offset_rollback" if later_low else "failover"), top
            found.add("offset_rollback", {"queue": q, "client": hold.client, "from": top, "to": start})
            found.counts["offset_rollback_by_commit" if later_low else "offset_rollback_by_broker"] += 1
        mine[q] = hold


def _acked_time(acked: list[tuple[int, int]], offset: int) -> int:
    return min(t for t, off in acked if off == offset)


def _poll(found: Findings, hold: _Hold | None, op: dict[str, Any], items: list[Any],
          delivered: dict[str, int], delivered_offsets: dict[int, set[int]]) -> None:
    asked = (_json(op["invoke_value"]) or {}).get("offset")
    if hold is not None and asked is not None and hold.next is not None and asked != hold.next:
        found.add("order", {"queue": hold.queue, "client": hold.client, "expected": hold.next, "polled": asked})
    last = None
    for item in items:
        if not isinstance(item, dict):
            continue
        msg_id, offset = str(item.get("id")), item.get("offset")
        queue = int(item.get("queue", op["key"] or 0))
        if last is not None and offset is not None and offset <= last:
            found.add("order", {"queue": queue, "offset": offset, "after": last})
        last = offset if offset is not None else last
        if delivered[msg_id]:
            cause = "rebalance"
            if hold is not None and hold.rollback and offset is not None and offset < hold.rolled_from:
                cause = hold.rollback
            found.counts["duplicates"] += 1
            found.add(f"duplicates_{cause}", {"id": msg_id, "queue": queue, "offset": offset})
        delivered[msg_id] += 1
        if offset is not None:
            delivered_offsets[queue].add(offset)
    if hold is not None and last is not None:
        hold.next = last + 1


class GroupChecker(RowsChecker):
    """The `group` section of the group workload's runs."""

    name = workload = "group"
    check_rows = staticmethod(check_rows)
