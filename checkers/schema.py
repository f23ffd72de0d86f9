"""The schemas of the checkers' tables: one place, documented in docs/history-format.md."""
from __future__ import annotations

from pyspark.sql import types as T

# checked/history.parquet: one row per operation (invoke + its completion).
HISTORY = T.StructType([
    T.StructField("index", T.LongType(), False),
    T.StructField("process", T.LongType()),
    T.StructField("f", T.StringType()),
    T.StructField("key", T.StringType()),
    T.StructField("type", T.StringType()),
    T.StructField("invoke_time", T.LongType()),
    T.StructField("complete_time", T.LongType()),
    T.StructField("invoke_value", T.StringType()),
    T.StructField("value", T.StringType()),
    T.StructField("node", T.StringType()),
    T.StructField("error", T.StringType()),
    T.StructField("dangling", T.BooleanType()),
    T.StructField("faults", T.ArrayType(T.IntegerType())),
    T.StructField("problem", T.StringType()),
])

# checked/malformed.parquet: lines that are not valid events, and events that
# break the invoke/completion protocol.
MALFORMED = T.StructType([
    T.StructField("file", T.StringType()),
    T.StructField("line", T.LongType()),
    T.StructField("reason", T.StringType()),
    T.StructField("text", T.StringType()),
])

# checked/queue.parquet: one row per message id and anomaly category. Offset
# anomalies (inconsistent_offsets, poll_skip, nonmonotonic_poll) also say at
# which offset of the queue (`key`) and, in `detail`, what was there (JSON).
QUEUE_ANOMALIES = T.StructType([
    T.StructField("category", T.StringType()),
    T.StructField("id", T.StringType()),
    T.StructField("key", T.StringType()),
    T.StructField("sends", T.LongType()),
    T.StructField("send_outcome", T.StringType()),
    T.StructField("first_send_s", T.DoubleType()),
    T.StructField("consumed", T.LongType()),
    T.StructField("same_offset", T.BooleanType()),
    T.StructField("offset", T.LongType()),
    T.StructField("detail", T.StringType()),
])
