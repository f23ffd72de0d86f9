"""Queue and log anomalies joined with the operations that show them.

The queue checker names each anomaly by message id or by (queue, offset); a
reader wants to know when the message was sent and acknowledged, by which
node, when it was consumed, and what the final log holds at its offset. This
module indexes the reconstructed history once (sends/appends, polls/reads,
the final audit) and gives, per anomaly, a table row and the history rows
(operations) where the anomaly is seen, for the tables of the run report and
the markers of the timeline.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from reports.history import NS, History

SENDS = ("send", "append")
CONSUMES = ("poll", "read")
AUDIT = "audit"
# Table columns, in the order a reader follows a message.
COLUMNS = ("id", "key", "queue", "offset", "sent_at_s", "acked_at_s", "acked_by", "consumed_at_s", "final_log")
COLUMN_TITLES = {"id": "id", "key": "key", "queue": "queue", "offset": "offset", "sent_at_s": "sent at (s)",
                 "acked_at_s": "acked at (s)", "acked_by": "node that acked", "consumed_at_s": "consumed at (s)",
                 "final_log": "final log at that offset"}
# What a category's count counts: messages (ids) or queue offsets.
COUNTS_OFFSETS = {"inconsistent_offsets", "poll_skip", "nonmonotonic_poll"}
WHERE = {
    "lost": "at its acknowledged send",
    "lost_after_consume": "at its acknowledged send",
    "duplicated": "at its acknowledged send",
    "recovered": "at its send",
    "unexpected": "at the poll that consumed it",
    "inconsistent_offsets": "at the operations that saw two different messages at one offset",
    "poll_skip": "at the poll (or read) that jumped over offsets",
    "nonmonotonic_poll": "at the poll that went back",
    "invariant_breach": "at the time the node reported it, in the lane of the operation closest to it",
}


def parse_value(value: Any) -> Any:
    """History values are stored as JSON text; anything else is kept as it is."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _item_id(item: Any) -> Any:
    if isinstance(item, dict):
        return item.get("id", item.get("value"))
    return item


def _items(value: Any) -> list[dict[str, Any]]:
    """The messages a poll, read or audit returned (a read returns one {offset, value})."""
    if isinstance(value, list):
        return [v for v in value if isinstance(v, dict)]
    if isinstance(value, dict) and "offset" in value and value.get("value") is not None:
        return [value]
    return []


def _id_key(value: Any) -> str:
    """Ids compare as text: the checker writes them as strings, the history as sent (17 or "17")."""
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return str(value)
    return json.dumps(value, sort_keys=True, default=str)


def distinct_offsets(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (queue, offset): the checker writes one per message seen there; a log
    run's stale reads (poll_skip with `read_at_s`) stay one row per read."""
    seen, out = set(), []
    for row in rows:
        where = (str(row.get("key")), str(row.get("offset")), _own_fields(row).get("read_at_s"))
        if where not in seen:
            seen.add(where)
            out.append(row)
    return out


def _seconds(ns: Any) -> float | None:
    return round(ns / NS, 3) if isinstance(ns, (int, float)) else None


@dataclass
class Index:
    """Where each message and each (queue, offset) shows in the history."""

    history: History
    send_ok: dict[str, int] = field(default_factory=dict)       # id -> row of its acknowledged send
    send_first: dict[str, int] = field(default_factory=dict)    # id -> row of its first send
    consumed: dict[str, int] = field(default_factory=dict)      # id -> row of the first poll that returned it
    place: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # id -> (queue, offset) acked or seen
    seen_at: dict[tuple[str, str], list[tuple[int, Any]]] = field(default_factory=dict)  # (queue, offset) -> (row, id)
    final_log: dict[tuple[str, str], Any] = field(default_factory=dict)
    empty_reads: dict[tuple[str, str], list[int]] = field(default_factory=dict)

    @classmethod
    def build(cls, history: History) -> "Index":
        index = cls(history)
        for i in range(len(history)):
            f = history.f[i]
            if f in SENDS:
                index._send(i)
            elif f in CONSUMES or f == AUDIT:
                index._consume(i, audit=f == AUDIT)
        return index

    def _send(self, i: int) -> None:
        h = self.history
        asked, answer = parse_value(h.invoke_value[i]), parse_value(h.value[i])
        ident = _id_key(_item_id(asked) if isinstance(asked, dict) else asked)
        self.send_first.setdefault(ident, i)
        if h.type[i] != "ok":
            return
        self.send_ok.setdefault(ident, i)
        if isinstance(answer, dict) and answer.get("offset") is not None:
            queue = answer.get("queue", h.key[i])
            self.place.setdefault(ident, (queue, answer["offset"]))
            self._saw(queue, answer["offset"], i, _item_id(asked) if isinstance(asked, dict) else asked)

    def _consume(self, i: int, audit: bool) -> None:
        h = self.history
        if h.type[i] != "ok":
            return
        answer = parse_value(h.value[i])
        items = _items(answer)
        if not items and not audit and isinstance(answer, dict) and answer.get("offset") is not None:
            self.empty_reads.setdefault(self._where(h.key[i], answer["offset"]), []).append(i)
        for item in items:
            ident = _id_key(_item_id(item))
            queue, offset = item.get("queue", h.key[i]), item.get("offset")
            if not audit:
                self.consumed.setdefault(ident, i)
            if offset is None:
                continue
            self.place.setdefault(ident, (queue, offset))
            self._saw(queue, offset, i, _item_id(item))
            if audit:
                self.final_log[self._where(queue, offset)] = _item_id(item)

    @staticmethod
    def _where(queue: Any, offset: Any) -> tuple[str, str]:
        return str(parse_value(queue)), str(offset)

    def _saw(self, queue: Any, offset: Any, row: int, ident: Any) -> None:
        self.seen_at.setdefault(self._where(queue, offset), []).append((row, ident))

    # -- per anomaly ------------------------------------------------------------------------
    def row(self, anomaly: dict[str, Any]) -> dict[str, Any]:
        """The table row of one checker row: the COLUMNS first, then the checker's own fields."""
        h = self.history
        ident = anomaly.get("id")
        key = _id_key(ident) if ident is not None else None
        queue, offset = anomaly.get("key"), anomaly.get("offset")
        if offset is None and key in self.place:
            queue, offset = self.place[key]
        sent, acked = self.send_first.get(key) if key else None, self.send_ok.get(key) if key else None
        consumed = self.consumed.get(key) if key else None
        final = self.final_log.get(self._where(queue, offset)) if offset is not None else None
        out = {"id": ident, "key": anomaly.get("key"), "queue": queue, "offset": offset,
               "sent_at_s": _seconds(h.invoke_time[sent]) if sent is not None else anomaly.get("first_send_s"),
               "acked_at_s": _seconds(h.complete_time[acked]) if acked is not None else None,
               "acked_by": h.node[acked] if acked is not None else None,
               "consumed_at_s": _seconds(h.complete_time[consumed]) if consumed is not None else None,
               "final_log": final if final is not None else ("nothing" if offset is not None else None)}
        out.update({k: v for k, v in _own_fields(anomaly).items() if k not in out and v is not None})
        if out["sent_at_s"] is not None:
            out.pop("first_send_s", None)
        return out

    def operations(self, category: str, anomaly: dict[str, Any]) -> list[int]:
        """History rows where the anomaly shows (see WHERE)."""
        ident = anomaly.get("id")
        key = _id_key(ident) if ident is not None else None
        if category in COUNTS_OFFSETS or (ident is None and anomaly.get("offset") is not None):
            return self._offset_operations(category, anomaly)
        if category == "unexpected":
            return [r for r in (self.consumed.get(key),) if r is not None]
        found = self.send_ok.get(key) if key else None
        if found is None and key:
            found = self.send_first.get(key)
        return [found] if found is not None else []

    def _offset_operations(self, category: str, anomaly: dict[str, Any]) -> list[int]:
        where = self._where(anomaly.get("key"), anomaly.get("offset"))
        seen = self.seen_at.get(where, [])
        if category == "inconsistent_offsets":
            firsts: dict[str, int] = {}
            for row, ident in seen:
                firsts.setdefault(_id_key(ident), row)
            return sorted(firsts.values())
        stale = self.empty_reads.get(where, [])
        if stale:
            # A log run's stale read: the read that found nothing, not a later read of that offset
            # that found the value.
            read_at = _own_fields(anomaly).get("read_at_s")
            at = [r for r in stale if isinstance(read_at, (int, float))
                  and abs(self.history.invoke_time[r] / NS - read_at) < 1e-6]
            return at or stale
        return [row for row, _ in seen if self.history.f[row] in CONSUMES][:1]


@dataclass
class Wanted:
    """The messages and offsets some anomalies name: picks, while streaming a history too
    big to hold, the operations an Index of those anomalies needs (`shows`)."""

    ids: set[str] = field(default_factory=set)
    offsets: set[tuple[str, str]] = field(default_factory=set)

    @classmethod
    def of(cls, rows: list[dict[str, Any]]) -> "Wanted":
        wanted = cls()
        for row in rows:
            if row.get("id") is not None:
                wanted.ids.add(_id_key(row["id"]))
            if row.get("offset") is not None:
                wanted.offsets.add(Index._where(row.get("key"), row["offset"]))
        return wanted

    def __bool__(self) -> bool:
        return bool(self.ids or self.offsets)

    def shows(self, h: History, i: int) -> bool:
        """Whether operation i sends, consumes or sees a wanted message or offset."""
        f = h.f[i]
        if f in SENDS:
            asked = parse_value(h.invoke_value[i])
            if _id_key(_item_id(asked) if isinstance(asked, dict) else asked) in self.ids:
                return True
            answer = parse_value(h.value[i]) if self.offsets and h.type[i] == "ok" else None
            return isinstance(answer, dict) and answer.get("offset") is not None and \
                Index._where(answer.get("queue", h.key[i]), answer["offset"]) in self.offsets
        if (f in CONSUMES or f == AUDIT) and h.type[i] == "ok":
            answer = parse_value(h.value[i])
            items = _items(answer)
            if not items and isinstance(answer, dict) and answer.get("offset") is not None:
                return Index._where(h.key[i], answer["offset"]) in self.offsets
            return any(_id_key(_item_id(item)) in self.ids or (item.get("offset") is not None and Index._where(
                item.get("queue", h.key[i]), item["offset"]) in self.offsets) for item in items)
        return False


def _own_fields(anomaly: dict[str, Any]) -> dict[str, Any]:
    """The checker's fields of a row, its JSON `detail` column spread out (ids, sources ...)."""
    fields = {k: v for k, v in anomaly.items() if k not in ("category", "detail")}
    detail = parse_value(anomaly.get("detail"))
    if isinstance(detail, dict):
        fields.update({k: v for k, v in detail.items() if k not in fields})
    return fields


def shown_columns(rows: list[dict[str, Any]]) -> list[str]:
    """Every one of COLUMNS (an empty cell says "never": e.g. a lost message's consumed at),
    then the checker's own fields that hold something; `key` only where it differs from the queue."""
    present = [c for c in dict.fromkeys(k for row in rows for k in row) if any(r.get(c) is not None for r in rows)]
    columns = list(COLUMNS) + [c for c in present if c not in COLUMNS]
    if "key" in columns and all(str(r.get("key")) == str(r.get("queue")) for r in rows):
        columns.remove("key")
    return columns


def category_title(category: str, count: int) -> str:
    """"lost: 362 messages" or "inconsistent offsets: 273 offsets"."""
    unit = "offset" if category in COUNTS_OFFSETS else "report" if category == "invariant_breach" else "message"
    return f"{category.replace('_', ' ')}: {count:,} {unit}{'' if count == 1 else 's'}"
