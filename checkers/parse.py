"""Reading raw event files in Spark and validating every line.

A line that is not a valid event is kept, with the reason, as a "malformed"
row: it is reported with its file and line number and counted, never dropped
and never fatal. Spark's text source knows no line numbers, so each line gets
a sequence number instead (monotonically_increasing_id: partition in the high
bits, position in the partition in the low bits); `locate_lines` turns the
sequence numbers of the few reported rows back into file and line.
"""
from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from functools import reduce
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from .spark import jvmfunctions
from .spark.frames import local_frame
from .ops import EVENT_TYPES, NEMESIS_PROCESS

HISTORY = "history"
NEMESIS = "nemesis"
TEXT_PREVIEW = 200
_PARTITION_BITS = 33  # monotonically_increasing_id keeps the row number in the low 33 bits


@dataclass(frozen=True)
class RawFile:
    """One raw event file: client history or nemesis events of run `run`."""

    run: int
    kind: str  # HISTORY | NEMESIS
    path: str  # absolute, as listed


def run_files(run: int, run_dir: Path) -> list[RawFile]:
    """The raw event files of a stored run (docs/history-format.md)."""
    files = [RawFile(run, HISTORY, str(p)) for p in sorted((Path(run_dir) / "history").glob("*.jsonl"))]
    nemesis = Path(run_dir) / "nemesis.jsonl"
    if nemesis.is_file():
        files.append(RawFile(run, NEMESIS, str(nemesis)))
    return files


def _uri_keys(uri: str) -> tuple[str, ...]:
    """The forms of a listed file's URI: `inputFiles` says file:///a%20b, a line's
    `_metadata.file_path` says file:/a%20b (same escaping)."""
    parts = urllib.parse.urlsplit(uri)
    return (uri,) if parts.scheme != "file" else (f"file://{parts.path}", f"file:{parts.path}")


def _listed_path(uri: str) -> str:
    """Spark's URI of a local file -> the path it was listed as (/a b): Hadoop escapes
    a literal '%' and spaces but leaves '+' as is, which `unquote` (not `unquote_plus`) undoes."""
    parts = urllib.parse.urlsplit(uri)
    return urllib.parse.unquote(parts.path) if parts.scheme == "file" else uri


def _file_runs(scan: DataFrame, files: list[RawFile]) -> list[tuple[str, int]]:
    """(uri, run): the run of every file the scan lists, under each form of its URI."""
    run_of = {f.path: f.run for f in files}
    rows = []
    for uri in scan.inputFiles():
        run = run_of.get(_listed_path(uri))
        if run is None:
            raise ValueError(f"Spark listed {uri}, which is none of the files given to it")
        rows += [(key, run) for key in _uri_keys(uri)]
    return rows


def _with_run(spark: SparkSession, lines: DataFrame, file_runs: list[tuple[str, int]]) -> DataFrame:
    """`lines` plus the run each came from. Files of one run (a single check): a constant,
    no lookup per line (1.5 % of a 10 M event check's CPU went to hashing and comparing
    its URIs)."""
    runs = {run for _, run in file_runs}
    if len(runs) == 1:
        return lines.withColumn("run", F.lit(runs.pop()))
    table = F.broadcast(local_frame(spark, file_runs, "uri string, run int"))
    known = lines.join(table, F.col("file_uri") == F.col("uri"), "left")
    unmatched = F.raise_error(F.concat(F.lit("no run for the lines of "), F.col("file_uri")))
    return known.withColumn("run", F.coalesce("run", unmatched.cast("int"))).drop("uri")


def read_lines(spark: SparkSession, files: list[RawFile]) -> DataFrame | None:
    """All lines of all files: run, kind, seq, text, file_uri, block (None if no files).

    One scan per kind for all runs (Spark packs small files into few tasks).
    Which run a line belongs to comes from a broadcast table keyed by the file
    URIs the scan lists (on the driver), so that each line costs one hash
    lookup, not a decoding of its URI; a line whose URI is not there stops
    the check instead of being dropped. A scan of one run's files needs no
    lookup at all.
    """
    frames = []
    for kind in (HISTORY, NEMESIS):
        mine = [f for f in files if f.kind == kind]
        if not mine:
            continue
        scan = spark.read.text([f.path for f in mine])
        lines = scan.select(
            F.lit(kind).alias("kind"),
            F.col("value").alias("text"),
            F.col("_metadata.file_path").alias("file_uri"),
            F.col("_metadata.file_block_start").alias("block"),
        )
        frames.append(_with_run(spark, lines, _file_runs(scan, mine)))
    if not frames:
        return None
    lines = reduce(DataFrame.unionByName, frames)
    return lines.withColumn("seq", F.monotonically_increasing_id())


def _problem(text: Column, kind: Column, ev: Column) -> Column:
    """Why a line is not a valid event, or null when it is one."""
    is_nemesis = ev["process"] == NEMESIS_PROCESS
    phase = F.get_json_object(ev["value"], "$.phase")
    unreadable = ev["unreadable"]
    return (
        F.when(F.trim(text) == "", "empty line")
        # a second JSON parser runs only on the rare lines the decoder could not read
        .when(unreadable & F.try_parse_json(text).isNull(),
              "not valid JSON (truncated or garbled line?)")
        .when(~F.ltrim(text).startswith("{"), "not a JSON object")
        .when(~F.rtrim(text).endswith("}"), "trailing characters after the JSON object")
        .when(ev["process"].isNull(), "missing `process`")
        .when(~(ev["process"].rlike(r"^-?[0-9]+$") | is_nemesis),
              '`process` must be an integer or "nemesis"')
        .when(ev["type"].isNull() | ~ev["type"].isin(*EVENT_TYPES),
              "`type` must be one of " + ", ".join(EVENT_TYPES))
        .when(ev["f"].isNull() | (ev["f"] == ""), "missing `f`")
        .when(ev["time"].isNull() | (ev["time"] < 0),
              "`time` must be a non-negative integer (ns since run start)")
        .when(unreadable, "a field has the wrong JSON type")
        .when((kind == HISTORY) & is_nemesis,
              "nemesis event in a client history file (fault events belong in nemesis.jsonl)")
        .when((kind == NEMESIS) & ~is_nemesis, "client event in nemesis.jsonl")
        .when((kind == NEMESIS) & (phase.isNull() | ~phase.isin("start", "stop")),
              'nemesis event needs value.phase "start" or "stop"')
    )


def parse(lines: DataFrame) -> DataFrame:
    """Decode and validate every line; `problem` is null for valid events.

    Columns: run, kind, seq, problem, process (text), type, f, key, value
    (JSON text as in the line, null when absent or null), time, node, error.
    """
    jvmfunctions.register(lines.sparkSession)
    decoded = lines.select("run", "kind", "seq", "text",
                           jvmfunctions.decode_event(F.col("text")).alias("ev"))
    return decoded.select(
        "run", "kind", "seq",
        _problem(F.col("text"), F.col("kind"), F.col("ev")).alias("problem"),
        F.col("ev.process").alias("process"),
        F.col("ev.type").alias("type"),
        F.col("ev.f").alias("f"),
        F.col("ev.key").alias("key"),
        F.col("ev.value").alias("value"),
        F.col("ev.time").alias("time"),
        F.col("ev.node").alias("node"),
        F.col("ev.error").alias("error"),
    )


def _relative_file(kind: Column, file_uri: Column) -> Column:
    """history/<name> or nemesis.jsonl, decoded from Spark's file URI."""
    name = F.regexp_extract(file_uri, r"[^/]*$", 0)
    # url_decode would turn a literal '+' into a space; Hadoop URIs keep '+' as is.
    decoded = F.url_decode(F.regexp_replace(name, r"\+", "%2B"))
    return F.when(kind == HISTORY, F.concat(F.lit("history/"), decoded)).otherwise(decoded)


def locate_lines(lines: DataFrame, rows: DataFrame) -> DataFrame:
    """File and 1-based line number of `rows` (run, seq, reason).

    Within one read partition the lines of one file split are contiguous, so a
    line's number is the number of lines in the file's earlier splits plus its
    distance from the first line of its own split.
    """
    with_pid = lines.withColumn("pid", F.shiftright("seq", _PARTITION_BITS))
    chunks = (with_pid.groupBy("run", "file_uri", "pid")
              .agg(F.count(F.lit(1)).alias("n"), F.min("seq").alias("first_seq"),
                   F.min("block").alias("block")))
    earlier = Window.partitionBy("run", "file_uri").orderBy("block").rowsBetween(
        Window.unboundedPreceding, -1)
    chunks = chunks.withColumn("base", F.coalesce(F.sum("n").over(earlier), F.lit(0)))
    located = (rows.join(with_pid.select("run", "seq", "pid", "kind", "file_uri", "text"),
                         ["run", "seq"])
               .join(chunks.select("run", "file_uri", "pid", "base", "first_seq"),
                     ["run", "file_uri", "pid"]))
    return located.select(
        "run",
        _relative_file(F.col("kind"), F.col("file_uri")).alias("file"),
        (F.col("base") + F.col("seq") - F.col("first_seq") + 1).alias("line"),
        "reason",
        F.substring("text", 1, TEXT_PREVIEW).alias("text"),
    )
