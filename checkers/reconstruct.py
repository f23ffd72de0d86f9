"""Reconstructing histories: raw events of many runs -> one row per operation.

Per run and process, events are ordered by time (file order breaks ties), an
invoke is paired with the completion that follows it, an invoke that never
completed is closed as `info` (Jepsen's rule for crashed operations), every
operation is tagged with the fault windows active when it was invoked, and
indices follow invoke time. Events that break the protocol (a completion with
no pending invoke, a second invoke while one is pending, a completion of a
different function) are reported like malformed lines, with file and line.

Two Spark writes keep memory flat however long the history: the paired
operations first (one shuffle by process), then the indexed history (one
shuffle by slices of invoke time, cut from the operations per second counted
in between).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from .spark.frames import local_frame
from .ops import INVOKE, OUTCOMES
from .parse import HISTORY, NEMESIS, RawFile, locate_lines, parse, read_lines, run_files
from .schema import HISTORY as HISTORY_SCHEMA
from .spark.staging import Staging
from .windows import FaultEvent, FaultWindow, fault_windows, segments

BUCKET_NS = 1_000_000_000  # indices are counted per second of invoke time, then offset
_POSITION_MASK = (1 << 33) - 1  # monotonically_increasing_id: partition << 33 | position
MALFORMED_EXAMPLES = 50
NEVER_COMPLETED = "no completion in the history"


@dataclass
class Reconstruction:
    """The reconstructed history of all runs plus what was found on the way."""

    history: DataFrame  # HISTORY_SCHEMA + `run`
    windows: list[list[FaultWindow]]
    fault_problems: list[list[str]]
    census: Census
    malformed_examples: list[list[dict[str, Any]]] = field(default_factory=list)

    @property
    def malformed_counts(self) -> list[int]:
        return self.census.problems


def _fault_events(spark: SparkSession, files: list[RawFile], n_runs: int) -> list[list[FaultEvent]]:
    """The valid nemesis events of every run (a few per run: collected).

    A scan of the nemesis files alone: filtering the scan of all files would
    not skip the client histories (nothing is pushed below the line numbering).
    Invalid lines are reported by the main pass, not here.
    """
    per_run: list[list[FaultEvent]] = [[] for _ in range(n_runs)]
    lines = read_lines(spark, [f for f in files if f.kind == NEMESIS])
    if lines is None:
        return per_run
    rows = (parse(lines).filter(F.col("problem").isNull())
            .select("run", "seq", "f", "time", "value").collect())
    for row in rows:
        value = json.loads(row["value"]) if row["value"] else {}
        per_run[row["run"]].append(FaultEvent(
            fault=row["f"], phase=value.get("phase"), time=row["time"], value=value,
            order=row["seq"]))
    return per_run



def _next(column: str, window: Window) -> Column:
    return F.lead(column).over(window)


def pair(events: DataFrame) -> DataFrame:
    """One row per invoke (is_op) plus one row per reportable problem.

    Valid client events are partitioned by (run, process); every other line
    (malformed, nemesis) lands in the null-process partition and only passes
    through to keep its problem.
    """
    client = (F.col("kind") == HISTORY) & F.col("problem").isNull()
    events = events.withColumn("process_id", F.when(client, F.col("process").cast("long")))
    by_process = Window.partitionBy("run", "process_id").orderBy("time", "seq")
    nexts = ("type", "f", "key", "value", "time", "node", "error", "seq")
    paired = events.select(
        "*", *[_next(c, by_process).alias(f"next_{c}") for c in nexts],
        F.lag("type").over(by_process).alias("prev_type"))

    is_client = F.col("process_id").isNotNull()
    is_invoke = is_client & (F.col("type") == INVOKE)
    completed = is_invoke & F.coalesce(F.col("next_type").isin(*OUTCOMES), F.lit(False))
    mismatch = completed & (F.col("next_f") != F.col("f"))
    orphan = is_client & (F.col("type") != INVOKE) & (
        F.col("prev_type").isNull() | (F.col("prev_type") != INVOKE))
    process = F.col("process_id").cast("string")
    problem = (
        F.when(F.col("problem").isNotNull(), F.col("problem"))
        .when(is_invoke & (F.col("next_type") == INVOKE),
              F.concat(F.lit("invoke of process "), process,
                       F.lit(" never completed before its next invoke")))
        .when(mismatch, F.concat(F.lit("completion f="), F.col("next_f"),
                                 F.lit(" does not match invoke f="), F.col("f"))))
    problem = problem.when(orphan, F.concat(F.col("type"), F.lit(" completion of process "),
                                            process, F.lit(" without a pending invoke")))
    return paired.filter(F.col("problem").isNotNull() | is_invoke | orphan).select(
        "run",
        "seq",
        F.when(mismatch, F.col("next_seq")).otherwise(F.col("seq")).alias("line_seq"),
        is_invoke.alias("is_op"),
        problem.alias("problem"),
        F.col("process_id").alias("process"),
        "f",
        F.coalesce("key", "next_key").alias("key"),
        F.when(completed, F.col("next_type")).otherwise(F.lit("info")).alias("type"),
        F.col("time").alias("invoke_time"),
        F.when(completed, F.col("next_time")).alias("complete_time"),
        F.col("value").alias("invoke_value"),
        F.when(completed, F.col("next_value")).alias("value"),
        F.when(completed, F.coalesce("next_node", "node")).otherwise(F.col("node")).alias("node"),
        F.when(completed, F.col("next_error")).otherwise(F.lit(NEVER_COMPLETED)).alias("error"),
        (is_invoke & ~completed).alias("dangling"),
    )


def _bucket() -> Column:
    return F.floor(F.col("invoke_time") / BUCKET_NS).cast("long")


@dataclass
class Census:
    """What one pass over the paired rows says about every run (small: on the driver)."""

    buckets: list[tuple[int, int, int]]  # (run, second of invoke time, operations), sorted
    problems: list[int]  # problem rows per run
    counts: list[dict[str, dict[str, int]]]  # per run: f -> outcome -> operations
    dangling: list[int]  # per run: invokes that never completed
    spans: list[tuple[int, int]]  # per run: first invoke, last event of an operation (ns; 0, 0 if none)


def census(paired: DataFrame, n_runs: int) -> Census:
    """One aggregation over the paired rows: operations per (run, second of invoke time,
    f, outcome) with their dangling count and time span, and problem rows per run.

    The per-run facts every checker shares come from here too, so that they
    cost no pass over the history of their own.
    """
    is_op = F.col("is_op")
    last = F.greatest("invoke_time", F.coalesce("complete_time", "invoke_time"))
    rows = (paired.groupBy("run", F.when(is_op, _bucket()).alias("bucket"),
                           F.when(is_op, F.col("f")).alias("op_f"), F.when(is_op, F.col("type")).alias("op_type"))
            .agg(F.count_if(is_op).alias("ops"),
                 F.count_if(F.col("problem").isNotNull()).alias("problems"),
                 F.count_if(is_op & F.col("dangling")).alias("dangling"),
                 F.min(F.when(is_op, F.col("invoke_time"))).alias("start"),
                 F.max(F.when(is_op, last)).alias("end"))
            .collect())
    found = Census([], [0] * n_runs, [{} for _ in range(n_runs)], [0] * n_runs, [(0, 0)] * n_runs)
    per_bucket: dict[tuple[int, int], int] = {}
    spans: dict[int, tuple[int, int]] = {}
    for row in rows:
        run = row["run"]
        found.problems[run] += row["problems"]
        if not row["ops"]:
            continue
        per_bucket[run, row["bucket"]] = per_bucket.get((run, row["bucket"]), 0) + row["ops"]
        by_type = found.counts[run].setdefault(row["op_f"], {})
        by_type[row["op_type"]] = by_type.get(row["op_type"], 0) + row["ops"]
        found.dangling[run] += row["dangling"]
        start, end = spans.get(run, (row["start"], row["end"]))
        spans[run] = (min(start, row["start"]), max(end, row["end"]))
    found.spans = [spans.get(run, (0, 0)) for run in range(n_runs)]
    found.buckets = sorted((run, bucket, n) for (run, bucket), n in per_bucket.items())
    return found


def spark_hash_int(value: int, seed: int = 42) -> int:
    """Spark's `hash()` of an int (Murmur3 x86 32-bit, seed 42): the hash that places a
    row in partition pmod(hash, n) of a hash-partitioned shuffle."""
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    k1 = rotl((value & mask) * 0xCC9E2D51 & mask, 15) * 0x1B873593 & mask
    h1 = (rotl(seed ^ k1, 13) * 5 + 0xE6546B64) & mask
    h1 ^= 4  # the length in bytes
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & mask
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & mask
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 >= 1 << 31 else h1


def partition_keys(parts: int) -> list[int]:
    """keys[i]: an int that a shuffle of `parts` hash partitions sends to partition i."""
    keys: dict[int, int] = {}
    candidate = 0
    while len(keys) < parts:
        keys.setdefault(spark_hash_int(candidate) % parts, candidate)
        candidate += 1
    return [keys[i] for i in range(parts)]


def index_plan(buckets: list[tuple[int, int, int]], parts: int) -> list[tuple[int, int, int, int]]:
    """Per (run, second of invoke time) from the census: (run, bucket, part, offset).

    Seconds are dealt out in order to `parts` slices of about equal numbers of
    operations. A slice's rows are sorted by (run, invoke time), so an
    operation's index is its position in its slice plus `offset`: the run's
    operations before this second, less the slice's rows before this second.
    """
    total = sum(count for _, _, count in buckets)
    rows, before, dealt, in_part, last_part = [], {}, 0, 0, 0
    for run, bucket, count in buckets:
        part = min(parts - 1, dealt * parts // total) if total else 0
        if part != last_part:
            in_part, last_part = 0, part
        done = before.get(run, 0)
        rows.append((run, bucket, part, done - in_part))
        before[run] = done + count
        in_part += count
        dealt += count
    return rows


def _tag_faults(spark: SparkSession, ops: DataFrame, windows: list[list[FaultWindow]]) -> DataFrame:
    """Add `faults`: ids of the fault windows active at each operation's invoke."""
    pieces = [(run, lo, hi, ids) for run, run_windows in enumerate(windows)
              for lo, hi, ids in segments(run_windows)]
    seg = F.broadcast(local_frame(spark, pieces, "s_run int, lo long, hi long, ids array<int>"))
    joined = ops.join(seg, (F.col("run") == F.col("s_run")) & (F.col("invoke_time") >= F.col("lo"))
                      & (F.col("invoke_time") < F.col("hi")), "left")
    return joined.withColumn("faults", F.coalesce("ids", F.array().cast("array<int>")))


def _position_in_partition() -> Column:
    """A row's position in its partition, counted in the order the rows come
    (the low bits of Spark's monotonically increasing id)."""
    return F.monotonically_increasing_id().bitwiseAND(F.lit(_POSITION_MASK))


def index_history(spark: SparkSession, ops: DataFrame, windows: list[list[FaultWindow]],
                  buckets: list[tuple[int, int, int]]) -> DataFrame:
    """Tag faults and number operations by invoke time within each run (`buckets`: census).

    The census already says how many operations each second holds, so the
    slices of invoke time are cut on the driver (index_plan) and each is sent
    to its own shuffle partition by a key that hashes there: partition i
    holds slice i, the written files are in index order, and no sampling pass
    over the history is needed, as range partitioning would make. A slice is
    sorted by one long, the second's place in the plan and the nanoseconds
    within it, which the sort's prefix compares without reading the rows; an
    operation's index is then its position plus its second's offset, with no
    window (which would copy every row into a buffer of its partition).
    """
    parts = int(spark.conf.get("spark.sql.shuffle.partitions"))
    keys = partition_keys(parts)
    plan = [(run, bucket, keys[part], offset, ordinal)
            for ordinal, (run, bucket, part, offset) in enumerate(index_plan(buckets, parts))]
    offsets = F.broadcast(local_frame(spark, plan, "o_run int, o_bucket long, slot int, offset long, ordinal long"))
    tagged = (_tag_faults(spark, ops, windows).withColumn("bucket", _bucket())
              .join(offsets, (F.col("run") == F.col("o_run")) & (F.col("bucket") == F.col("o_bucket"))))
    in_second = F.col("invoke_time") - F.col("bucket") * BUCKET_NS  # < 2**30
    order_key = F.shiftleft(F.col("ordinal"), 30) + in_second
    runs = {run for run, *_ in buckets}
    sliced = tagged.withColumn("order_key", order_key)
    # the staged write is partitioned by run and wants its rows sorted by run: with one
    # run a literal tells Spark they are; with several the sort starts with the run
    if len(runs) <= 1:
        sliced, by_run = sliced.withColumn("run", F.lit(min(runs, default=0))), []
    else:
        by_run = ["run"]
    sliced = sliced.repartition(parts, "slot").sortWithinPartitions(*by_run, "order_key", "seq")
    indexed = sliced.withColumn("index", _position_in_partition() + F.col("offset"))
    return indexed.select("run", *HISTORY_SCHEMA.fieldNames())


def _empty_history(spark: SparkSession) -> DataFrame:
    return local_frame(spark, [], HISTORY_SCHEMA).withColumn("run", F.lit(0))


def _malformed(lines: DataFrame, paired: DataFrame, staging: Staging,
               n_runs: int) -> list[list[dict[str, Any]]]:
    """Locate and stage the problem rows; return the first examples of each run."""
    problems = paired.filter(F.col("problem").isNotNull())
    examples: list[list[dict[str, Any]]] = [[] for _ in range(n_runs)]
    rows = problems.select("run", F.col("line_seq").alias("seq"), F.col("problem").alias("reason"))
    staging.write(locate_lines(lines, rows), "malformed")
    first = Window.partitionBy("run").orderBy("file", "line")
    for row in (staging.read("malformed").withColumn("rank", F.row_number().over(first))
                .filter(F.col("rank") <= MALFORMED_EXAMPLES).orderBy("run", "rank").collect()):
        examples[row["run"]].append(
            {"file": row["file"], "line": row["line"], "reason": row["reason"], "text": row["text"]})
    return examples


def reconstruct(spark: SparkSession, run_dirs: list[Path], staging: Staging) -> Reconstruction:
    """Reconstruct the histories of `run_dirs` (run i = run_dirs[i]) in shared Spark jobs."""
    n_runs = len(run_dirs)
    files = [f for run, d in enumerate(run_dirs) for f in run_files(run, d)]
    lines = read_lines(spark, files)
    if lines is None:
        nothing = Census([], [0] * n_runs, [{} for _ in run_dirs], [0] * n_runs, [(0, 0)] * n_runs)
        return Reconstruction(_empty_history(spark), [[] for _ in run_dirs],
                              [[] for _ in run_dirs], nothing, [[] for _ in run_dirs])
    events = parse(lines)
    found = [fault_windows(evs) for evs in _fault_events(spark, files, n_runs)]
    windows = [w for w, _ in found]
    staging.write(pair(events), "paired")
    paired = staging.read("paired")
    counted = census(paired, n_runs)
    examples = (_malformed(lines, paired, staging, n_runs) if any(counted.problems)
                else [[] for _ in run_dirs])
    staging.write(index_history(spark, paired.filter("is_op"), windows, counted.buckets), "history")
    return Reconstruction(staging.read("history"), windows, [p for _, p in found], counted, examples)
