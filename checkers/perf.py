"""The `perf` checker: latency quantiles and throughput over time, as chartable tables.

Latency is completion minus invocation of every completed operation (a
dangling invocation has no latency). Time series count operations by the time
they completed, in buckets sized so that a run has at most MAX_BUCKETS of
them. Quantiles are Spark's approximate percentiles (relative error 1e-4).
Perf measures, it does not judge: its `valid` is always true.
"""
from __future__ import annotations

import math
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from .context import CheckContext, RunFacts
from .spark.frames import local_frame

QUANTILES = (0.5, 0.95, 0.99)
SERIES_QUANTILES = (0.5, 0.99)
SERIES_ACCURACY = 1000  # 0.1 % relative error is plenty for a chart, and keeps buffers small
MAX_BUCKETS = 300
_NICE_SECONDS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600)


def bucket_seconds(duration_ns: int) -> int:
    """The smallest round bucket width that cuts `duration_ns` into at most MAX_BUCKETS."""
    needed = math.ceil(duration_ns / 1e9 / MAX_BUCKETS)
    for width in _NICE_SECONDS:
        if width >= needed:
            return width
    return 3600 * math.ceil(needed / 3600)


def _ms(ns: Any) -> float | None:
    return None if ns is None else ns / 1e6


def _completed(history: DataFrame) -> DataFrame:
    return history.filter(F.col("complete_time").isNotNull()).withColumn(
        "latency", F.col("complete_time") - F.col("invoke_time"))


def latency_table(history: DataFrame) -> dict[int, list[dict[str, Any]]]:
    """Per run: count, mean, p50/p95/p99 and max latency (ms) per f and outcome."""
    rows = (_completed(history).groupBy("run", "f", "type").agg(
        F.count(F.lit(1)).alias("count"), F.avg("latency").alias("mean"),
        F.percentile_approx("latency", list(QUANTILES)).alias("q"), F.max("latency").alias("max"))
        .collect())
    table: dict[int, list[dict[str, Any]]] = {}
    for r in sorted(rows, key=lambda r: (r["run"], r["f"], r["type"])):
        entry = {"f": r["f"], "type": r["type"], "count": r["count"], "mean_ms": _ms(r["mean"])}
        entry.update({f"p{round(q * 100)}_ms": _ms(v) for q, v in zip(QUANTILES, r["q"])})
        entry["max_ms"] = _ms(r["max"])
        table.setdefault(r["run"], []).append(entry)
    return table


def series_table(spark: SparkSession, history: DataFrame,
                 widths: dict[int, int]) -> dict[int, list[dict[str, Any]]]:
    """Per run: for each (f, outcome), ops, throughput and latency per time bucket."""
    width_df = F.broadcast(local_frame(spark, list(widths.items()), "b_run int, width long"))
    bucketed = (_completed(history).join(width_df, F.col("run") == F.col("b_run"))
                .withColumn("bucket", F.floor(F.col("complete_time") / (F.col("width") * 1e9))))
    rows = (bucketed.groupBy("run", "f", "type", "bucket").agg(
        F.count(F.lit(1)).alias("ops"),
        F.percentile_approx("latency", list(SERIES_QUANTILES), SERIES_ACCURACY).alias("q"),
        F.max("latency").alias("max")).collect())
    series: dict[int, dict[tuple[str, str], dict[str, list]]] = {}
    for r in sorted(rows, key=lambda r: (r["run"], r["f"], r["type"], r["bucket"])):
        width = widths[r["run"]]
        s = series.setdefault(r["run"], {}).setdefault((r["f"], r["type"]), {
            "f": r["f"], "type": r["type"], "t_s": [], "ops": [], "throughput": [],
            **{f"p{round(q * 100)}_ms": [] for q in SERIES_QUANTILES}, "max_ms": []})
        s["t_s"].append(r["bucket"] * width)
        s["ops"].append(r["ops"])
        s["throughput"].append(r["ops"] / width)
        for q, v in zip(SERIES_QUANTILES, r["q"]):
            s[f"p{round(q * 100)}_ms"].append(_ms(v))
        s["max_ms"].append(_ms(r["max"]))
    return {run: list(by_op.values()) for run, by_op in series.items()}


def perf_section(run: RunFacts, latency: list[dict[str, Any]], series: list[dict[str, Any]],
                 width: int) -> dict[str, Any]:
    duration = max(0, run.end - run.start) / 1e9
    completed = sum(e["count"] for e in latency)
    return {"valid": True, "duration_s": duration,
            "throughput": completed / duration if duration else None,
            "latency": latency, "bucket_s": width, "series": series}


def check(ctx: CheckContext) -> list[dict[str, Any]]:
    widths = {r.index: bucket_seconds(r.end) for r in ctx.runs}
    latency = latency_table(ctx.history)
    series = series_table(ctx.spark, ctx.history, widths)
    return [{"perf": perf_section(r, latency.get(r.index, []), series.get(r.index, []),
                                  widths[r.index])} for r in ctx.runs]
