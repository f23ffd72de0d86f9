"""Checkers of RocketMQ's message types: `ordered`, `transactional` and `delayed`
(workloads/ordered.py, workloads/transactional.py, workloads/delayed.py;
docs/workloads.md names every anomaly).

ordered (orderly consumption, per sharding key):
- lost: an acknowledged message never processed (invalid);
- gap: an acknowledged message never processed though a later-sent message of
  its key was: consumption went past it (invalid);
- out_of_order: a key's message first processed after a later-sent message of
  the same key was first processed (both acknowledged) (invalid);
- concurrent_processing: a member began processing a message of a queue while
  another member was still processing one of the same queue (the processing
  intervals are the driver JVM's monotonic clock, one for every member) (invalid);
- unexpected: processed but never sent (invalid);
- duplicates: processed again (valid: RocketMQ's orderly consumer redelivers from
  the committed offset after a rebalance or failover), counted;
- unreached: an acknowledged message never processed on a queue no member ever
  processed up to its offset (the consumers stalled before it, or it is gone with
  the tail of the queue): counted, and a run otherwise valid is then unknown, not
  valid; a message counts as lost only once consumption went past its offset;
- a take (`consume`, `leave`) without an answer held messages the history lacks: a
  run whose only findings are lost or gap is then unknown, not invalid.

transactional (half messages, local transaction, check-back):
- lost_commit: a transaction the producer committed (or whose check-back
  committed it), acknowledged, never delivered (invalid);
- delivered_rollback: a message of a rolled-back transaction delivered (invalid);
- unresolved: an acknowledged transaction left unknown that no check-back ever
  asked about, and never delivered (invalid: the broker must ask back);
- delivered_unchecked: a transaction left unknown delivered though no check-back
  asked about it (invalid: the broker committed what nobody committed);
- unexpected: delivered but never sent (invalid);
- checked_after_end: check-backs of transactions the producer had ended
  (commit or rollback: its end-of-transaction request was lost), counted (valid);
- duplicates, recovered (an info send's committed message delivered), counted.

delayed (timer messages; loss and duplicates are the queue section's):
- early: a message a poll returned before its delivery time minus the tolerance
  (invalid); the poll's completion time on the control node's wall clock is the
  latest instant the message was seen, so an early one is early for sure;
- lateness: first delivery minus delivery time, quantiles (not judged).

Histories of these workloads are small: their rows are collected once and
checked in Python on the driver, as the group checker does.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable

from workloads.delayed import DELAY_TOLERANCE_MS

from .rows import Findings, RowsChecker
from .rows import json_value as _json

ORDERED_INVALID = {
    "lost": "acknowledged message(s) never processed (lost)",
    "gap": "acknowledged message(s) skipped: a later message of the key was processed (gap)",
    "out_of_order": "message(s) first processed after a later-sent message of their key (out_of_order)",
    "concurrent_processing": "message(s) processed while another member processed the same queue "
                             "(concurrent_processing)",
    "unexpected": "message(s) processed that were never sent (unexpected)"}
# What a take without an answer can explain: the messages it held are missing.
UNSEEN_BY_UNANSWERED = ("lost", "gap")
TRANSACTIONAL_INVALID = {
    "lost_commit": "committed transaction message(s) never delivered (lost_commit)",
    "delivered_rollback": "rolled-back transaction message(s) delivered (delivered_rollback)",
    "unresolved": "unknown transaction(s) never asked about by a check-back (unresolved)",
    "delivered_unchecked": "unknown transaction(s) delivered without a check-back (delivered_unchecked)",
    "unexpected": "message(s) delivered that were never sent (unexpected)"}
DELAYED_INVALID = {"early": "message(s) delivered before their delivery time minus the tolerance (early)"}


def _by_completion(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    ops = sorted(rows, key=lambda r: (r["complete_time"] is None, r["complete_time"] or 0, r["index"]))
    for op in ops:
        op["value"], op["invoke_value"] = _json(op["value"]), _json(op["invoke_value"])
    return ops


def _sends(ops: list[dict[str, Any]]) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """(every send's message by id, with its best outcome under `type`; id -> best outcome)."""
    rank = {"ok": 2, "info": 1, "fail": 0}
    messages: dict[str, dict[str, Any]] = {}
    best: dict[str, str] = {}
    for op in ops:
        if op["f"] != "send" or op["type"] not in rank:
            continue
        value = op["value"] if isinstance(op["value"], dict) else op["invoke_value"]
        if not isinstance(value, dict) or value.get("id") is None:
            continue
        msg_id = str(value["id"])
        if rank[op["type"]] >= rank.get(best.get(msg_id, "fail"), -1):
            best[msg_id] = op["type"]
            messages[msg_id] = dict(value, type=op["type"])
    return messages, best


# -- ordered -------------------------------------------------------------------------------

def check_ordered(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The ordered section of one run from its operations (see module docstring)."""
    found = Findings(ORDERED_INVALID)
    ops = _by_completion(rows)
    sent, best = _sends(ops)
    deliveries = [d for op in ops if op["f"] in ("consume", "leave") and op["type"] == "ok"
                  and isinstance(op["value"], dict) for d in op["value"].get("deliveries") or []
                  if isinstance(d, dict)]
    deliveries.sort(key=lambda d: (d.get("start_ns") or 0, d.get("end_ns") or 0))
    _concurrency(found, deliveries)
    firsts: dict[str, dict[str, Any]] = {}
    for d in deliveries:
        msg_id = str(d.get("id"))
        if msg_id not in sent:
            found.add("unexpected", {k: d.get(k) for k in ("id", "queue", "offset", "client")})
        elif msg_id in firsts:
            found.counts["duplicates"] += 1
        else:
            firsts[msg_id] = d
    acked = {i: m for i, m in sent.items() if best[i] == "ok"}
    _key_order(found, acked, firsts)
    read_up_to = _read_up_to(deliveries)
    found.counts["unreached"] = 0
    for msg_id, m in sorted(acked.items(), key=lambda kv: (kv[1].get("shard", 0), kv[1].get("seq", 0))):
        if msg_id in firsts:
            continue
        if _offset(m) is not None and _offset(m) > read_up_to.get(m.get("queue"), -1):
            found.counts["unreached"] += 1
            continue
        found.add("lost", {"id": m.get("id"), "shard": m.get("shard"), "seq": m.get("seq"),
                           "queue": m.get("queue"), "offset": m.get("offset")})
    found.counts["sent_ok"] = len(acked)
    found.counts["processed"] = len(deliveries)
    found.counts["keys"] = len({m.get("shard") for m in acked.values()})
    found.counts["takes_unanswered"] = sum(op["f"] in ("consume", "leave") and op["type"] == "info" for op in ops)
    section = found.section(("sent_ok", "processed", "keys", "duplicates", "unreached", "takes_unanswered"),
                            bool(deliveries), "no member processed any message")
    if found.counts["unreached"] and section["valid"] is True:
        section["valid"] = "unknown"
        section["reason"] = (f"{found.counts['unreached']} acknowledged message(s) past the last offset processed "
                             "on their queue (unreached): the consumers never got that far, lost or not")
    if found.counts["takes_unanswered"] and section["valid"] is False and not any(
            found.counts[k] for k in ORDERED_INVALID if k not in UNSEEN_BY_UNANSWERED):
        # A take that got no answer held processed messages the history does not have.
        section["valid"] = "unknown"
        section["reason"] = "lost or gap, but a take of processed messages got no answer: they may be what is missing"
    return section


def _offset(message: dict[str, Any]) -> int | None:
    offset = message.get("offset")
    return offset if isinstance(offset, int) and not isinstance(offset, bool) else None


def _read_up_to(deliveries: list[dict[str, Any]]) -> dict[Any, int]:
    """Per queue, the highest offset any member processed."""
    read: dict[Any, int] = {}
    for d in deliveries:
        if _offset(d) is not None:
            read[d.get("queue")] = max(read.get(d.get("queue"), -1), _offset(d))
    return read


def _key_order(found: Findings, acked: dict[str, dict[str, Any]], firsts: dict[str, dict[str, Any]]) -> None:
    """Per key, the acknowledged messages by send order (seq) against their first processing."""
    by_key: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for msg_id, m in acked.items():
        by_key[m.get("shard")].append(dict(m, first=firsts.get(msg_id)))
    for key, messages in by_key.items():
        messages.sort(key=lambda m: m.get("seq", 0))
        processed = [m for m in messages if m["first"] is not None]
        last_seq = max((m.get("seq", 0) for m in processed), default=-1)
        for m in messages:
            if m["first"] is None and m.get("seq", 0) < last_seq:
                found.add("gap", {"shard": key, "seq": m.get("seq"), "id": m.get("id"),
                                  "later_processed_seq": last_seq})
        latest = None
        for m in sorted(processed, key=lambda m: m["first"].get("start_ns") or 0):
            if latest is not None and m.get("seq", 0) < latest.get("seq", 0):
                found.add("out_of_order", {"shard": key, "seq": m.get("seq"), "id": m.get("id"),
                                           "after_seq": latest.get("seq"), "after_id": latest.get("id")})
            elif latest is None or m.get("seq", 0) > latest.get("seq", 0):
                latest = m


def _concurrency(found: Findings, deliveries: list[dict[str, Any]]) -> None:
    """Deliveries (sorted by start) of one queue whose processing overlaps another member's."""
    busy_until: dict[Any, dict[str, tuple[int, Any]]] = defaultdict(dict)   # queue -> client -> (end, id)
    for d in deliveries:
        queue, client, start = d.get("queue"), d.get("client"), d.get("start_ns")
        if start is None:
            continue
        for other, (end, other_id) in busy_until[queue].items():
            if other != client and end > start:
                found.add("concurrent_processing", {"queue": queue, "client": client, "id": d.get("id"),
                                                    "other_client": other, "other_id": other_id})
                break
        mine = busy_until[queue].get(client)
        end = d.get("end_ns") or start
        if mine is None or end > mine[0]:
            busy_until[queue][client] = (end, d.get("id"))


# -- transactional ---------------------------------------------------------------------------

def _delivered(ops: list[dict[str, Any]]) -> dict[str, int]:
    """Deliveries per message id: every ok poll's and audit read's items."""
    count: dict[str, int] = defaultdict(int)
    for op in ops:
        if op["f"] in ("poll", "audit") and op["type"] == "ok" and isinstance(op["value"], list):
            for item in op["value"]:
                if isinstance(item, dict) and item.get("id") is not None:
                    count[str(item["id"])] += op["f"] == "poll" or not count[str(item["id"])]
    return count


def fate(message: dict[str, Any]) -> str:
    """What the transaction ends as: the local answer, or for unknown the check-back's answer."""
    decision = message.get("decision")
    return str(message.get("resolution") if decision == "unknown" else decision)


def check_transactional(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The transactional section of one run from its operations (see module docstring)."""
    found = Findings(TRANSACTIONAL_INVALID)
    ops = _by_completion(rows)
    sent, best = _sends(ops)
    delivered = _delivered(ops)
    checked: dict[str, int] = defaultdict(int)
    for op in ops:
        if op["f"] == "tx-check" and op["type"] == "ok" and isinstance(op["value"], list):
            for check in op["value"]:
                key = str((check or {}).get("key") or "")
                checked[key[1:] if key.startswith("m") else key] += 1
    for msg_id, m in sorted(sent.items(), key=lambda kv: int(kv[0]) if kv[0].isdigit() else 0):
        example = {"id": m.get("id"), "decision": m.get("decision"), "resolution": m.get("resolution"),
                   "send": best[msg_id], "checks": checked.get(msg_id, 0)}
        got = delivered.get(msg_id, 0)
        found.counts[f"sent_{best[msg_id]}"] += 1
        if got > 1:
            found.counts["duplicates"] += got - 1
        if fate(m) == "rollback":
            if got:
                found.add("delivered_rollback", example)
            continue
        if m.get("decision") == "unknown" and got and not checked.get(msg_id):
            found.add("delivered_unchecked", example)
        if m.get("decision") != "unknown" and checked.get(msg_id):
            found.counts["checked_after_end"] += 1
        if best[msg_id] != "ok":
            found.counts["recovered"] += bool(got)
            continue
        if got:
            continue
        if m.get("decision") == "unknown" and not checked.get(msg_id):
            found.add("unresolved", example)
        else:
            found.add("lost_commit", example)
    for msg_id in delivered:
        if msg_id not in sent:
            found.add("unexpected", {"id": msg_id})
    found.counts["delivered"] = sum(delivered.values())
    found.counts["checks"] = sum(checked.values())
    by_decision: dict[str, int] = defaultdict(int)
    for msg_id, m in sent.items():
        if best[msg_id] == "ok":
            by_decision[str(m.get("decision"))] += 1
    return found.section(("sent_ok", "sent_info", "sent_fail", "delivered", "checks", "checked_after_end",
                          "duplicates", "recovered"), "ok" in best.values(),
                         "no transaction was acknowledged", acknowledged_by_decision=dict(by_decision))


# -- delayed -----------------------------------------------------------------------------------

def check_delayed(rows: Iterable[dict[str, Any]], tolerance_ms: int = DELAY_TOLERANCE_MS) -> dict[str, Any]:
    """The delayed section of one run from its operations (see module docstring)."""
    found = Findings(DELAYED_INVALID)
    ops = _by_completion(rows)
    sent, best = _sends(ops)
    first_seen: dict[str, int] = {}
    for op in ops:
        if op["f"] != "poll" or op["type"] != "ok" or not isinstance(op["value"], list):
            continue
        for item in op["value"]:
            if not isinstance(item, dict) or item.get("id") is None or item.get("seen_ms") is None:
                continue
            msg_id = str(item["id"])
            m = sent.get(msg_id)
            if m is None or m.get("deliver_ms") is None:
                continue
            if item["seen_ms"] < m["deliver_ms"] - tolerance_ms:
                found.add("early", {"id": m.get("id"), "deliver_ms": m["deliver_ms"], "seen_ms": item["seen_ms"],
                                    "early_ms": m["deliver_ms"] - item["seen_ms"], "delay_ms": m.get("delay_ms")})
            first_seen.setdefault(msg_id, item["seen_ms"] - m["deliver_ms"])
    late = sorted(first_seen.values())
    found.counts["timed"] = sum(1 for i, m in sent.items() if best[i] == "ok" and m.get("deliver_ms") is not None)
    found.counts["seen"] = len(late)
    lateness = {f"p{int(q * 100)}": late[min(len(late) - 1, int(q * len(late)))] for q in (0.5, 0.99)} if late else {}
    if late:
        lateness |= {"min": late[0], "max": late[-1]}
    return found.section(("timed", "seen"), bool(late), "no timer message was delivered",
                         tolerance_ms=tolerance_ms, lateness_ms=lateness)


class OrderedChecker(RowsChecker):
    """The `ordered` section of the ordered workload's runs."""

    name = workload = "ordered"
    check_rows = staticmethod(check_ordered)


class TransactionalChecker(RowsChecker):
    """The `transactional` section of the transactional workload's runs."""

    name = workload = "transactional"
    check_rows = staticmethod(check_transactional)


class DelayedChecker(RowsChecker):
    """The `delayed` section of the delayed workload's runs."""

    name = workload = "delayed"
    check_rows = staticmethod(check_delayed)
