"""The `invariants` section: the SUT's own reports of broken invariants, as anomalies.

Jepsen reads the nodes' logs for the same reason: a system under test often
knows better than any client that something went wrong. Two sources, both in
the node logs the run collected (nodes/<node>/<process>/):

- the model's invariant events (`invariants.jsonl`, one JSON object per
  breach: kind, node, time, details; written by sut/invariants.py). Each is
  a safety anomaly: the model writes one only where the protocol's safety is
  broken (a committed entry cut, a commit index going back, truncation below
  the confirm offset, two leaders in one term);
- the lines with which real RocketMQ and DLedger report a broken invariant of
  their own (PATTERNS; docs/invariants.md names the source file of each).

Every finding becomes an anomaly with its node, process, time (Unix seconds
and, when run.json tells the history's origin, seconds on the history's
clock), file, line number and line. A safety anomaly makes the section, and
so the run, invalid; the others are listed and leave it valid. A run without
collected node logs (an imported history) is not checked.
"""
from __future__ import annotations

import datetime as _dt
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from records import RunJson, read_model

from .context import CheckContext, RunFacts
from .registry import Sections
from .verdict import crashed

SECTION = "invariants"
MODEL_FILE = "invariants.jsonl"
EXAMPLES = 1000        # anomalies listed in results.json; the counts cover all
LINE_CHARS = 500       # a log line is cut to this many characters
# RocketMQ's logback layouts write `%d{yyy-MM-dd HH:mm:ss,GMT+8}`: China Standard Time.
ROCKETMQ_LOG_TZ = _dt.timezone(_dt.timedelta(hours=8))
_ROCKETMQ_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})")


@dataclass(frozen=True)
class LogPattern:
    """A log line with which RocketMQ or DLedger reports one of its own invariants broken."""

    kind: str
    regex: re.Pattern[str]
    safety: bool
    source: str          # the file of apache/rocketmq or openmessaging/dledger that writes it

    def matches(self, line: str) -> bool:
        return self.regex.search(line) is not None


def _p(kind: str, text: str, safety: bool, source: str) -> LogPattern:
    return LogPattern(kind, re.compile(text), safety, source)


# Most specific first: a line counts once, for the first pattern it matches.
PATTERNS = (
    _p("rocketmq-consume-queue-order", r"\[BUG\]\s*logic queue order maybe wrong", True,
       "store/src/main/java/org/apache/rocketmq/store/ConsumeQueue.java"),
    _p("rocketmq-consume-queue-unwritable", r"\[BUG\]\s*consume queue can not write", True,
       "store/src/main/java/org/apache/rocketmq/store/ConsumeQueue.java"),
    _p("rocketmq-message-size-mismatch", r"\[BUG\]\s*read total count not equals msg total size", True,
       "store/src/main/java/org/apache/rocketmq/store/CommitLog.java, DefaultMessageStore.java"),
    _p("rocketmq-dispatch-error", r"\[BUG\]\s*dispatch message to consume queue error", True,
       "store/src/main/java/org/apache/rocketmq/store/DefaultMessageStore.java"),
    _p("rocketmq-mapped-files-damaged", r"\[BUG\]\s*The mappedFile queue's data is damaged", True,
       "store/src/main/java/org/apache/rocketmq/store/MappedFileQueue.java; "
       "dledger/src/main/java/io/openmessaging/storage/dledger/store/file/MmapFileList.java"),
    _p("dledger-two-leaders-one-term", r"\[BUG\]\s*currTerm \d+ has leader \S+, but received leader", True,
       "dledger/src/main/java/io/openmessaging/storage/dledger/DLedgerLeaderElector.java"),
    _p("rocketmq-bug-line", r"\[BUG\]", False,
       "any RocketMQ or DLedger class: the `[BUG]` marker their code puts on impossible states"),
)


def anomaly(kind: str, safety: bool, node: str, process: str, file: str, line_number: int | None,
            line: str, time_unix: float | None, origin_unix: float | None, **extra: Any) -> dict[str, Any]:
    """One finding, with its time on the history's clock when the origin is known."""
    time_s = None
    if time_unix is not None and origin_unix is not None:
        time_s = round(time_unix - origin_unix, 3)
    return {"kind": kind, "safety": safety, "node": node, "process": process, "file": file,
            "line_number": line_number, "line": line[:LINE_CHARS], "time_unix": time_unix,
            "time_s": time_s, **extra}


def model_anomalies(path: Path, node: str, process: str, origin: float | None) -> Iterator[dict[str, Any]]:
    """The model's invariant events of one file; a line that is not one is reported, not safety."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            text = line.strip()
            if not text:
                continue
            try:
                event = json.loads(text)
                kind, when = event["kind"], event.get("time")
                if not isinstance(kind, str) or not (when is None or isinstance(when, (int, float))):
                    raise ValueError("kind or time of the wrong type")
            except (ValueError, KeyError, TypeError):
                yield anomaly("malformed-invariant-event", False, node, process, path.name, number, text,
                              None, origin)
                continue
            yield anomaly(kind, True, node, process, path.name, number, text, when, origin,
                          source="model", reported_node=event.get("node"), details=event.get("details"))


def rocketmq_time(line: str) -> float | None:
    """The Unix time of a RocketMQ log line (its layout's GMT+8 timestamp), if it has one."""
    found = _ROCKETMQ_TIME.match(line)
    if found is None:
        return None
    try:
        stamp = _dt.datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=ROCKETMQ_LOG_TZ)
    except ValueError:
        return None
    return stamp.timestamp()


def log_anomalies(path: Path, node: str, process: str, origin: float | None) -> Iterator[dict[str, Any]]:
    """The lines of one log file that match a pattern of PATTERNS."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            if "[BUG]" not in line:  # every pattern has it: one cheap test per line
                continue
            pattern = next((p for p in PATTERNS if p.matches(line)), None)
            if pattern is not None:
                yield anomaly(pattern.kind, pattern.safety, node, process, path.name, number, line.rstrip("\n"),
                              rocketmq_time(line), origin, source=pattern.source)


def history_origin_unix(run_dir: Path) -> float | None:
    """The Unix time of the history's zero, from run.json (None if it does not say)."""
    try:
        timings = read_model(RunJson, run_dir / "run.json").timings
    except Exception:  # no or unusable run.json: times stay Unix times only
        return None
    origin = timings.get("history_origin_unix")
    return float(origin) if isinstance(origin, (int, float)) else None


def node_files(run_dir: Path) -> Iterator[tuple[Path, str, str]]:
    """(file, node, process) of every collected log and invariant file of the run."""
    nodes = run_dir / "nodes"
    for path in sorted(nodes.glob("*/*/*")):
        if path.is_file() and (path.name == MODEL_FILE or path.suffix in (".log", ".out")):
            yield path, path.parent.parent.name, path.parent.name


def section_of(run_dir: Path) -> dict[str, Any]:
    """The `invariants` section of one run (pure apart from reading its node files)."""
    origin = history_origin_unix(run_dir)
    found: list[dict[str, Any]] = []
    files = 0
    for path, node, process in node_files(run_dir):
        files += 1
        reader = model_anomalies if path.name == MODEL_FILE else log_anomalies
        found.extend(reader(path, node, process, origin))
    found.sort(key=lambda a: (a["time_unix"] is None, a["time_unix"] or 0, a["node"], a["line_number"] or 0))
    counts: dict[str, int] = {}
    for item in found:
        counts[item["kind"]] = counts.get(item["kind"], 0) + 1
    safety = [a for a in found if a["safety"]]
    safety_kinds = {a["kind"] for a in safety}
    problems = [f"{n} {kind} ({'safety' if kind in safety_kinds else 'reported, not safety'})"
                for kind, n in sorted(counts.items())]
    return {"valid": not safety, "checked": True, "files": files, "safety_breaches": len(safety),
            "counts": counts, "problems": problems, "anomalies": found[:EXAMPLES],
            "examples_limit": EXAMPLES, "history_origin_unix": origin}


class InvariantsChecker:
    """Registered in checkers/builtin.py; applies to runs whose node logs were collected."""

    name = "invariants"
    sections = (SECTION,)

    def applies_to(self, run: RunFacts) -> bool:
        return (run.run_dir / "nodes").is_dir()

    def not_applicable(self, run: RunFacts) -> Sections:
        return {SECTION: {"valid": True, "checked": False,
                          "reason": "no node logs in this run (an imported history, or a hand-made one)"}}

    def check(self, ctx: CheckContext, runs: list[RunFacts]) -> list[Sections]:
        out = []
        for run in runs:
            try:
                out.append({SECTION: section_of(run.run_dir)})
            except OSError as exc:  # an unreadable log is missing evidence: unknown, never valid
                out.append({SECTION: crashed(exc)})
        return out
