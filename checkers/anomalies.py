"""The `queue` section of results.json: anomaly names, the verdict they give, examples.

Two accountings fill it: message ids for the queue workload (checkers/queue.py)
and values at offsets for the log workload (checkers/logs.py). Both name
what they find as Jepsen's Kafka/queue workload does, so reports and
campaigns read one format whichever workload ran.
"""
from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from .verdict import UNKNOWN

# Jepsen's Kafka/queue anomaly names, snake_case (docs/history-format.md maps them).
ID_CATEGORIES = ("lost", "lost_after_consume", "duplicated", "unexpected", "recovered")
OFFSET_CATEGORIES = ("inconsistent_offsets", "poll_skip", "nonmonotonic_poll")
CATEGORIES = ID_CATEGORIES + OFFSET_CATEGORIES
ID_AUDITED = ("lost_after_consume",)   # queue categories only the durability audit can show
LOG_AUDITED = ("lost",)                # log categories only the durability audit can show
ID_EXAMPLES = 1000  # ids listed per category in results.json; all are in checked/queue.parquet

# (count, what it means, fails the run only without duplicates tolerated)
_FAILURES = (
    ("lost", "acknowledged message(s) never consumed and not in the final log", False),
    ("lost_after_consume", "consumed message(s) missing from the final log", False),
    ("inconsistent_offsets", "queue offset(s) seen holding two different messages", False),
    ("poll_skip", "consumer poll(s) skipped offsets that hold messages", False),
    ("unexpected", "consumed message(s) never sent", False),
    ("recovered_fail", "message(s) whose sends all failed were consumed", False),
    ("duplicated", "message(s) consumed more than once (exactly-once run)", True),
    ("nonmonotonic_poll", "consumer poll(s) went back to earlier offsets (exactly-once run)", True),
)


def queue_section(totals: dict[str, int], examples: dict[str, list[dict[str, Any]]],
                  spec_tolerates_duplicates: bool, audit: dict[str, Any] | None = None) -> dict[str, Any]:
    """The queue verdict from the counts (pure).

    Without a complete durability audit the categories that need it were not
    evaluated: the verdict is then unknown (never valid), with the reason.
    """
    audit = audit or audit_summary(False, totals, ID_AUDITED)
    failures, doubts = [], []
    for name, text, only_exactly_once in _FAILURES:
        if totals.get(name) and not (only_exactly_once and spec_tolerates_duplicates):
            failures.append(f"{totals[name]} {text}")
    for name, text in (("unreadable_polls", "poll result(s) not a list of messages"),
                       ("items_without_id", "consumed item(s) without an id"),
                       ("sends_without_id", "send(s) without a message id")):
        if totals.get(name):
            doubts.append(f"{totals[name]} {text}")
    if not audit.get("complete"):
        doubts.append(audit.get("reason") or "no complete durability audit")
    valid = False if failures else UNKNOWN if doubts else True
    return {
        "valid": valid,
        "problems": failures + doubts,
        "counts": totals,
        **{category: examples.get(category, []) for category in CATEGORIES},
        "audit": audit,
        "examples_limit": ID_EXAMPLES,
        "duplicates_allowed": spec_tolerates_duplicates,
    }


def audit_summary(complete: bool, totals: dict[str, int],
                  needs: tuple[str, ...] = ID_AUDITED) -> dict[str, Any]:
    """What the section says about the durability audit the anomalies `needs` rest on."""
    if complete:
        return {"complete": True, "messages_in_final_log": totals.get("in_final_log", 0)}
    return {"complete": False, "unchecked": list(needs),
            "reason": "no complete durability audit (none in the history, or it did not read every "
                      f"written queue to its end): {', '.join(needs)} not checked"}


def first_rows(df: DataFrame, group: list[str], order: list[Column], limit: int) -> list[Any]:
    """The first `limit` rows of each group in `order`: a section's examples."""
    rank = Window.partitionBy(*group).orderBy(*order)
    return (df.withColumn("_rank", F.row_number().over(rank)).filter(F.col("_rank") <= limit)
            .orderBy(*group, "_rank").collect())
