"""Convert between our raw history (docs/history-format.md) and Jepsen's EDN history.

A Jepsen history is a vector (or list) of op maps with keyword keys:
`{:process 0, :type :invoke, :f :read, :value nil, :time 123, :index 0}`.
Mapping:
- `:type`, `:f` and a process of `:nemesis` are keywords in EDN, strings here.
- Reading EDN into plain data is the linearizability checker's reader
  (checkers.knossos.edn): keywords become their names (`:error :not-held` ->
  "not-held"), sets and vectors become lists, map keys become strings.
- Map keys go back to EDN as keywords when they are valid keyword names, and
  every op gets an `:index` (its position), as Jepsen's checkers expect.
- Only the fields of our schema are kept on import; an op without `:time`
  gets one synthesized from its position (1 ms apart, after the last known
  time), so "ordered by time" keeps the file's order.
Hence our JSON -> EDN -> JSON is the identity, and EDN -> JSON -> EDN is stable
after the first import.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

import edn_format
from edn_format import Keyword

from checkers.knossos.edn import read_edn
from checkers.knossos.history import HistoryError
from checkers.routes import infer_workload, route

if TYPE_CHECKING:
    from harness.store import RunDir, Store

SCHEMA_FIELDS = ("process", "type", "f", "key", "value", "time", "node", "error")
_KEYWORD_FIELDS = ("type", "f")
# Conservative: a name that reads back as the same string (no namespace '/',
# nothing that starts like a number).
_KEYWORD_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_?!*+<>=.-]*$")
# Jepsen nemesis ops that end a fault; any other nemesis op starts one.
_JEPSEN_STOPS = {"stop", "recover", "heal", "resume", "repair", "restart"}
IMPORTED_FAULT = "jepsen-nemesis"
SYNTHETIC_TIME_STEP_NS = 1_000_000
MAX_TIME_NS = 2**63         # times are signed 64-bit nanoseconds, as in Jepsen
MAX_DEPTH = 64              # op map itself included; Jepsen values are a few levels deep


class EdnError(ValueError):
    """A file that is not a Jepsen EDN history: says which file and what is wrong."""


# -- EDN -> our events ---------------------------------------------------------------

def op_from_edn(op: dict[str, Any], where: str) -> dict[str, Any]:
    """One op map (already plain data) as an event with exactly our schema's fields."""
    ev = {name: op.get(name) for name in SCHEMA_FIELDS}
    if ev["type"] is None or ev["process"] is None:
        raise EdnError(f"{where}: op has no :type or :process")
    if ev["type"] not in ("invoke", "ok", "fail", "info"):
        raise EdnError(f"{where}: unknown :type {ev['type']!r}")
    if not (isinstance(ev["process"], int) or ev["process"] == "nemesis"):
        raise EdnError(f"{where}: :process must be an integer or :nemesis, got {ev['process']!r}")
    if ev["f"] is None:
        raise EdnError(f"{where}: op has no :f")
    ev["f"] = str(ev["f"])
    if ev["time"] is not None:
        ev["time"] = _time_ns(ev["time"], where)
    _check_depth(op, where)
    if ev["error"] is not None and not isinstance(ev["error"], str):
        ev["error"] = json.dumps(ev["error"])
    return ev


def _time_ns(value: Any, where: str) -> int:
    """An op's :time as integer nanoseconds: a finite number that fits our 64-bit times."""
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or not math.isfinite(value) or abs(value) >= MAX_TIME_NS):
        raise EdnError(f"{where}: :time must be a number of nanoseconds below {MAX_TIME_NS:.3g}, "
                       f"got {value!r:.60}")
    return int(value)


def _check_depth(value: Any, where: str) -> None:
    """Refuse values nested deeper than MAX_DEPTH: writing them would exhaust the stack."""
    todo = [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if depth > MAX_DEPTH:
            raise EdnError(f"{where}: values nested more than {MAX_DEPTH} levels deep")
        if isinstance(item, dict):
            todo.extend((child, depth + 1) for child in (*item.keys(), *item.values()))
        elif isinstance(item, (list, tuple, set, frozenset)):
            todo.extend((child, depth + 1) for child in item)


def parse_history(text: str, source: str = "<edn>") -> list[dict[str, Any]]:
    """Parse a Jepsen EDN history (a vector, a list, or bare op maps one after another)."""
    try:
        ops = read_edn(text, source)
    except HistoryError as exc:
        raise EdnError(str(exc)) from None
    except RecursionError:
        raise EdnError(f"{source}: not valid EDN: nested too deeply") from None
    events = [op_from_edn(op, f"{source}: op {i}") for i, op in enumerate(ops)]
    _fill_times(events)
    return [nemesis_from_jepsen(ev) if ev["process"] == "nemesis" else ev for ev in events]


def nemesis_from_jepsen(ev: dict[str, Any]) -> dict[str, Any]:
    """A Jepsen nemesis op in our nemesis.jsonl form (value.phase start/stop).

    Ours (exported earlier) pass unchanged. Jepsen's carry the fault in `f`
    (`:start`/`:stop`, or pairs like `:kill`/`:recover`): they all become one
    fault, "jepsen-nemesis", so a stop closes the oldest open start, with the
    original op name and value kept in the event's value.
    """
    value = ev["value"]
    if isinstance(value, dict) and value.get("phase") in ("start", "stop"):
        return ev
    phase = "stop" if ev["f"] in _JEPSEN_STOPS else "start"
    return dict(ev, f=IMPORTED_FAULT, value={"phase": phase, "targets": [], "grudge": None,
                                             "jepsen_f": ev["f"], "jepsen_value": value})


def _fill_times(events: list[dict[str, Any]]) -> None:
    last = 0
    for ev in events:
        if ev["time"] is None:
            ev["time"] = last + SYNTHETIC_TIME_STEP_NS
        last = ev["time"]


def load_history(path: Path) -> list[dict[str, Any]]:
    """Read an EDN history file as our events (EdnError names the file)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise EdnError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise EdnError(f"{path}: not a UTF-8 text file") from None
    return parse_history(text, str(path))


# -- plain values -> EDN -------------------------------------------------------------

def to_edn(value: Any) -> Any:
    """An EDN-ready copy of a JSON value: dict keys become keywords when they can."""
    if isinstance(value, dict):
        return {(Keyword(k) if isinstance(k, str) and _KEYWORD_NAME.match(k) else k): to_edn(v)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_edn(v) for v in value]
    return value


def op_to_edn(ev: dict[str, Any], index: int) -> dict[Any, Any]:
    """One event as a Jepsen op map; nil fields are left out, :index added."""
    op: dict[Any, Any] = {}
    for name in SCHEMA_FIELDS:
        v = ev.get(name)
        if name in _KEYWORD_FIELDS and isinstance(v, str):
            op[Keyword(name)] = Keyword(v)
        elif name == "process" and v == "nemesis":
            op[Keyword(name)] = Keyword("nemesis")
        elif v is not None or name == "value":
            op[Keyword(name)] = to_edn(v)
    op[Keyword("index")] = index
    return op


def dumps_history(events: Iterable[dict[str, Any]]) -> str:
    """A Jepsen EDN history: a vector with one op map per line."""
    lines = [edn_format.dumps(op_to_edn(ev, i)) for i, ev in enumerate(events)]
    return "[" + "\n ".join(lines) + "]\n"


# -- files: a run directory <-> an EDN file ------------------------------------------

def guess_workload(events: Iterable[dict[str, Any]]) -> str | None:
    """The workload whose operations these are (the checkers' rule), or None."""
    return infer_workload(ev["f"] for ev in events if ev["process"] != "nemesis")


def run_events(run_dir: Path) -> list[dict[str, Any]]:
    """Client and nemesis events of a run, merged in time order (stable)."""
    from workloads.history import read_events, read_history
    events = read_history(run_dir)
    nemesis = run_dir / "nemesis.jsonl"
    if nemesis.is_file():
        events += read_events(nemesis)
    events.sort(key=lambda ev: ev.get("time") or 0)
    return events


def export_run(run_dir: Path, out: Path) -> int:
    """Write a run's history as Jepsen EDN; returns the number of ops written."""
    events = run_events(Path(run_dir))
    Path(out).write_text(dumps_history(events), encoding="utf-8")
    return len(events)


def import_history(edn_path: Path, store: "Store", workload: str | None = None,
                   events: list[dict[str, Any]] | None = None) -> "RunDir":
    """Make a run directory (a one-run campaign) from a Jepsen EDN history.

    Client ops go to history/imported.jsonl, nemesis ops to nemesis.jsonl, and
    run.json records the source and which workload's checks apply (guessed
    from the operation names unless given), so the checkers treat it like
    any recorded run. `events`: the file as load_history read it already.
    """
    from harness.store import slug, write_json
    from records import CampaignJson, CheckInputs, RunJson
    from workloads.history import EventLog
    events = load_history(Path(edn_path)) if events is None else events
    workload = workload or guess_workload(events)
    known = route(workload)
    campaign = store.new_campaign()
    run = store.new_run(campaign, f"import-{slug(Path(edn_path).stem)}")
    with EventLog(run.history_dir / "imported.jsonl") as client_log, \
            EventLog(run.nemesis_file) as nemesis_log:
        for ev in events:
            (nemesis_log if ev["process"] == "nemesis" else client_log).write(ev)
    write_json(run.run_json, RunJson(
        kind="import", run_id=run.run_id, campaign_id=campaign, workload=workload,
        checks=CheckInputs(workload=workload), source=str(Path(edn_path).resolve()),
        model=known.model if known else None, ops=len(events)).as_json())
    write_json(store.campaign_dir(campaign) / "campaign.json",
               CampaignJson(campaign_id=campaign, kind="import", runs=[run.run_id]).as_json())
    return run
