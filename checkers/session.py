"""The Spark session of the checkers: local by default, quiet on the terminal.

Spark's JVM and its Python workers write their logs to stdout/stderr of the
process that launched them. We launch the JVM with both pointed at a log file
in the store, so `chaos check` shows only its own output, while everything
Spark says is still kept for whoever needs it.
"""
from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Iterator, Mapping

from pyspark.sql import SparkSession

from . import shipping

DEFAULT_MASTER = "local[*]"

# Defaults: no web UI, no console progress bar (we draw our own), no capture of
# the Python call site of every DataFrame function (four JVM round trips per
# call, a quarter of those of a small check; it only decorates error texts), 16 shuffle
# partitions (the default 200 costs seconds per shuffle on 2 cores; adaptive
# execution merges them further for small data, and 16 keeps the sort of a
# 10 M event history in memory). The files of a check are listed on the driver:
# above 32 paths Spark would list them in a Spark job of one task per path
# (6,500 tasks for 50 runs of 130 files), which costs more than the check of
# small runs. Anything here can be overridden with --conf.
DEFAULT_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    "spark.sql.shuffle.partitions": "16",
    "spark.sql.session.timeZone": "UTC",
    "spark.python.worker.reuse": "true",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "1000000",
    "spark.sql.files.openCostInBytes": "4194304",  # Spark's default, named so that small checks can lower it
}

# On a local master Spark's sockets stay on loopback.
LOCAL_CONF: dict[str, str] = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.memory": "2g",
}


# Small inputs (checkers.pipeline.SMALL_INPUT_BYTES) run with these SQL settings
# for the time of their check: without adaptive execution each query is one
# job (adaptive execution submits every shuffle stage as a job of its own and
# re-plans in between), a shuffle has as many partitions as there are cores
# instead of 16 mostly empty ones, and opening one of many small files counts
# as reading 64 KiB, not 4 MiB, so that 50 runs' files pack into a few tasks.
SMALL_INPUT_CONF: dict[str, str] = {
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.shuffle.partitions": "1x",  # "Nx": N times the session's cores
    "spark.sql.files.openCostInBytes": "65536",
}
# Large inputs: a scan of a staged table is cut into at least 4 tasks per core.
# By default Spark cuts 128 MiB splits, so a 300 MB table is 3 tasks on 2 cores,
# and one core idles for a third of every scan.
LARGE_INPUT_CONF: dict[str, str] = {
    "spark.sql.files.minPartitionNum": "4x",
}


def _value(spark: SparkSession, value: str) -> str:
    """A setting's value, with "Nx" meaning N times the session's cores."""
    if value.endswith("x"):
        return str(int(value[:-1]) * spark.sparkContext.defaultParallelism)
    return value


@contextlib.contextmanager
def input_settings(spark: SparkSession, small: bool) -> Iterator[None]:
    """SMALL_INPUT_CONF or LARGE_INPUT_CONF while the block runs; a setting the user
    changed from our default (--conf) is left alone."""
    saved: dict[str, str | None] = {}
    for key, value in (SMALL_INPUT_CONF if small else LARGE_INPUT_CONF).items():
        current = spark.conf.get(key, None)
        if current is not None and current != DEFAULT_CONF.get(key):
            continue
        saved[key] = current
        spark.conf.set(key, _value(spark, value))
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


@contextlib.contextmanager
def _output_redirected(log_file: Path) -> Iterator[None]:
    """Point fds 1 and 2 at `log_file` while a child (the JVM) is started."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    try:
        with open(log_file, "ab") as log:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def session_conf(master: str, conf: Mapping[str, str] | None = None) -> dict[str, str]:
    """The Spark settings for `master`: our defaults, then the user's `conf` on top."""
    settings = dict(DEFAULT_CONF)
    if shipping.is_local(master):
        settings.update(LOCAL_CONF)
    settings.update(conf or {})
    return settings if shipping.is_local(master) else shipping.cluster_conf(settings)


def get_spark(master: str | None = None, conf: Mapping[str, str] | None = None,
              log_file: Path | None = None) -> SparkSession:
    """The active Spark session, or a new one on `master` logging into `log_file`.

    An already running session (a test fixture, a harness that checks many
    runs) is reused as it is: Spark cannot change master or JVM options later.
    On a cluster master the checkers' code and engine jar are shipped to the
    executors (checkers.shipping).
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    master = master or DEFAULT_MASTER
    settings = session_conf(master, conf)
    if settings.get("spark.pyspark.python"):
        # What spark-submit does: PySpark takes the executors' interpreter from this variable.
        os.environ["PYSPARK_PYTHON"] = settings["spark.pyspark.python"]
    if shipping.is_local(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # Python workers must run our interpreter (the venv with checkers.knossos and its
        # dependencies), not the first `python3` on PATH; PySpark reads only the variable.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName("chaos-check")
    for key, value in settings.items():
        builder = builder.config(key, value)
    if log_file is None:
        spark = builder.getOrCreate()
    else:
        with _output_redirected(Path(log_file)):
            spark = builder.getOrCreate()
    if not shipping.is_local(master):
        shipping.ship_python(spark.sparkContext)
    return spark
