"""Tables of many runs written in one Spark job, then handed to each run.

Spark writes a table of all runs partitioned by `run` into a staging
directory (one job, however many runs); `publish` then moves each run's
partition into `<run_dir>/checked/<table>.parquet`. Staging lives next to the
runs, so publishing is a rename on the same file system.

Small inputs (`in_memory`, chosen by the pipeline from the raw bytes) keep
the intermediate tables in memory instead, as local checkpoints: each Parquet write and
read-back costs a job and a file listing, which dominates a check of a few
thousand events. Only the published tables are written, once, at publish
time. Large inputs stage every table as Parquet, so that memory stays flat
however long the history.
"""
from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pyarrow.parquet as pq
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql import types as T

CHECKED_DIR = "checked"


class Staging:
    """A scratch directory (and, for small inputs, cache) for run-partitioned tables;
    removed on close."""

    def __init__(self, spark: SparkSession, parent: Path, in_memory: bool = False) -> None:
        self.spark = spark
        self.in_memory = in_memory
        self.root = Path(parent) / f".chaos-check-{uuid.uuid4().hex[:12]}"
        self.root.mkdir(parents=True)
        self._schemas: dict[str, T.StructType] = {}
        self._cached: dict[str, DataFrame] = {}

    def path(self, table: str) -> str:
        return str(self.root / table)

    def write(self, df: DataFrame, table: str) -> None:
        """Keep `df` (with a `run` column): cached when in memory, else written partitioned by run."""
        self._schemas[table] = df.schema
        if self.in_memory:
            self._uncache(table)
            # a few partitions, as the Parquet scan of a small table would give: the cache
            # keeps the partitioning, and each cached partition is a task of every later job
            few = df.coalesce(self.spark.sparkContext.defaultParallelism)
            # a local checkpoint, not persist(): later queries then start from a leaf instead
            # of the table's whole plan, whose analysis and cache lookups cost more than
            # the data
            self._cached[table] = few.localCheckpoint(eager=True, storageLevel=StorageLevel.MEMORY_AND_DISK)
        else:
            self._write(df, table)

    def _write(self, df: DataFrame, table: str) -> None:
        df.write.mode("overwrite").partitionBy("run").parquet(self.path(table))

    def read(self, table: str) -> DataFrame:
        """A staged table (with its `run` column), also when it has no rows at all."""
        if table in self._cached:
            return self._cached[table]
        return self.spark.read.schema(self._schemas[table]).parquet(self.path(table))

    def publish(self, table: str, run_dirs: list[Path], schema: T.StructType) -> None:
        """Move each run's part to its checked/ directory (an empty table if it has none)."""
        if table in self._cached:
            self._write(self._cached[table], table)
        for run, run_dir in enumerate(run_dirs):
            target = Path(run_dir) / CHECKED_DIR / f"{table}.parquet"
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.exists():
                shutil.rmtree(target)
            part = self.root / table / f"run={run}"
            if part.is_dir():
                shutil.move(part, target)
            else:
                target.mkdir()
                pq.write_table(to_arrow_schema(schema).empty_table(), target / "part-00000.parquet")

    def _uncache(self, table: str) -> None:
        """Drop a checkpointed table's blocks now, not at the JVM's next garbage collection."""
        cached = self._cached.pop(table, None)
        if cached is not None:
            cached._jdf.queryExecution().logical().rdd().unpersist(False)

    def close(self) -> None:
        for table in list(self._cached):
            self._uncache(table)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "Staging":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
