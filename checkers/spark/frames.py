"""Small driver-side tables (a few rows: run ids, fault windows, bucket offsets) as DataFrames.

`spark.createDataFrame(list_of_tuples)` pickles the rows into an RDD that a
Python worker unpickles: a Python task per partition, for every such table,
which dominated the checks of small runs. Handing Spark an Arrow table
instead goes straight into the JVM (no Python worker at all).
"""
from __future__ import annotations

from typing import Any, Iterable

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema


def local_frame(spark: SparkSession, rows: Iterable[tuple[Any, ...]], schema: str | T.StructType) -> DataFrame:
    """A DataFrame of `rows` (tuples in the order of `schema`: a DDL string or a StructType)."""
    struct = T._parse_datatype_string(schema) if isinstance(schema, str) else schema
    columns = list(zip(*rows)) or [() for _ in struct.fields]
    arrow = to_arrow_schema(struct)
    table = pa.Table.from_arrays([pa.array(list(c), type=f.type) for c, f in zip(columns, arrow)],
                                 schema=arrow)
    return spark.createDataFrame(table, schema=struct)
