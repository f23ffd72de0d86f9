"""The Spark session of the checkers: local by default, quiet on the terminal.

Spark's JVM and its Python workers write their logs to stdout/stderr of the
process that launched them. We launch the JVM with both pointed at a log file
in the store, so `chaos check` shows only its own output, while everything
Spark says is still kept for whoever needs it.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterator, Mapping

from pyspark import SparkContext
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
    # Spark's defaults too, named so that tiny checks can turn generated code off
    "spark.sql.codegen.wholeStage": "true",
    "spark.sql.codegen.factoryMode": "FALLBACK",
}

# On a local master Spark's sockets stay on loopback.
LOCAL_CONF: dict[str, str] = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.memory": "2g",
}


# A check of a small input spends its time planning queries and compiling their
# code, each of it run once or a few times, not in hot loops: a driver JVM that
# compiles with C1 only starts and warms up sooner (docs/spark.md, "The driver
# JVM"). check_runs starts its own session so for a small input; C2 pays off from the third or
# fourth check of a session on, so a session started for more checks than
# QUICK_SESSION_CHECKS (a campaign of many batches) is left to compile fully. A
# large check spends its time in a few hot loops, which C2 makes twice as fast, so
# a quick session is relaunched in a fresh JVM before one. Local masters only (on a
# cluster the executors do the work), and only when spark.driver.extraJavaOptions
# is not set (--conf it, to anything, to opt out).
QUICK_START_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
# A session that will run at most this many checks starts quick too: a campaign
# whose runs are checked in one or two batches pays for C2's compiling and gets
# nothing back, since C2 overtakes C1 only from the third check of a session on.
QUICK_SESSION_CHECKS = 2
# The throughput collector, not G1 (the JVM's default): a check allocates fast and
# keeps little, and on few cores G1's write barriers and concurrent marking compete
# with the tasks; the collector's pauses are also shorter in total.
THROUGHPUT_GC_JAVA_OPTIONS = "-XX:+UseParallelGC"
_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
_JVM_EXIT_S = 60


def class_archive() -> Path:
    """Where the set-up script keeps the class-data-sharing archive of Spark's classes
    (checkers/spark/class_data_archive.py): with it the driver JVM maps the classes a check loads
    instead of loading and verifying them one by one, so the session starts sooner.
    One per pyspark version and JDK: a JVM ignores an archive another JDK
    wrote, so after a JDK upgrade the set-up script builds a new one."""
    import pyspark

    return Path(sys.prefix) / "share" / "chaos" / f"spark-{pyspark.__version__}-java-{java_version()}.jsa"


def java_version() -> str:
    """The version of the JDK Spark's launcher runs ($JAVA_HOME, else `java` on PATH),
    from the JDK's `release` file (no JVM started); "unknown" without one."""
    home = os.environ.get("JAVA_HOME")
    if not home:
        java = shutil.which("java")
        if java is None:
            return "unknown"
        home = str(Path(os.path.realpath(java)).parent.parent)
    try:
        release = (Path(home) / "release").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "unknown"
    found = re.search(r'^JAVA_VERSION="?([^"\n]*)"?\s*$', release, re.MULTILINE)
    return re.sub(r"[^\w.+-]", "_", found.group(1)) if found and found.group(1) else "unknown"


def java_path_option(option: str, path: Path) -> str:
    """`option=path` as one word of spark.driver.extraJavaOptions: Spark's launcher splits
    that setting at white space and takes quotes and backslashes as shell-like escapes."""
    return f"{option}=" + re.sub(r"""([\\'"\s])""", r"\\\1", str(path))


def _java_options(quick: bool, log_file: Path | None) -> str:
    """The driver JVM's options we choose for a local session. A crash report of the JVM
    (hs_err_pid*.log) goes next to Spark's log, not into the working directory."""
    options = [THROUGHPUT_GC_JAVA_OPTIONS] + ([QUICK_START_JAVA_OPTIONS] if quick else [])
    archive = class_archive()
    if archive.is_file():
        options.append(java_path_option("-XX:SharedArchiveFile", archive))
    if log_file is not None:
        options.append(java_path_option("-XX:ErrorFile", Path(log_file).resolve().parent / "hs_err_pid%p.log"))
    return " ".join(options)


@dataclass(frozen=True)
class _Launch:
    """How this module started the running session, to start it again the other way."""

    app_id: str
    master: str
    conf: dict[str, str]
    log_file: Path | None
    quick: bool
    handed_out: bool = False  # get_spark gave it to a caller, who may still hold it


_launched: _Launch | None = None

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
# Tiny inputs (checkers.pipeline.TINY_INPUT_BYTES, ~25,000 events) also run
# without generated code: Spark's operators and expressions are interpreted
# instead of compiled by Janino, whose compiling (and its many class lookups on
# the jars' class path) costs more than such an input's rows. Well above the
# limit interpreting is slower than compiling (docs/spark.md, "Measurements").
# `factoryMode` is an internal Spark setting (stable since
# Spark 2.4): without it projections and orderings would still be compiled.
TINY_INPUT_CONF: dict[str, str] = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
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
def input_settings(spark: SparkSession, small: bool, tiny: bool = False) -> Iterator[None]:
    """SMALL_INPUT_CONF or LARGE_INPUT_CONF (plus TINY_INPUT_CONF if `tiny`) while the
    block runs; a setting the user changed from our default (--conf) is left alone."""
    settings = {**(SMALL_INPUT_CONF if small else LARGE_INPUT_CONF), **(TINY_INPUT_CONF if tiny else {})}
    saved: dict[str, str | None] = {}
    for key, value in settings.items():
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
              log_file: Path | None = None, *, quick: bool = False) -> SparkSession:
    """The active Spark session, or a new one on `master` logging into `log_file`.

    An already running session (a test fixture, a harness that checks many
    runs) is reused as it is: Spark cannot change master or JVM options later.
    `quick`: start the driver JVM for small checks (QUICK_START_JAVA_OPTIONS).
    On a cluster master the checkers' code and engine jar are shipped to the
    executors (checkers.spark.shipping).
    """
    global _launched
    active = SparkSession.getActiveSession()
    if active is not None:
        if _is_ours(active):
            _launched = replace(_launched, handed_out=True)
        return active
    master = master or DEFAULT_MASTER
    settings = session_conf(master, conf)
    ours = shipping.is_local(master) and _JAVA_OPTIONS not in settings
    quick = quick and ours
    options = _java_options(quick, log_file) if ours else ""
    if options:
        settings[_JAVA_OPTIONS] = options
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
    _launched = _Launch(spark.sparkContext.applicationId, master, dict(conf or {}), log_file, quick)
    return spark


def session_for(master: str | None, conf: Mapping[str, str] | None, log_file: Path | None,
                small: bool) -> SparkSession:
    """The session to check an input of this size on: a new one starts quick when the
    input is small; a quick-started one of ours is relaunched, in a new JVM, before a
    large input, unless get_spark handed it to someone (stopping it would pull it
    from under them); any other running session is used as it is."""
    active = SparkSession.getActiveSession()
    launched = _launched
    if active is None:
        return get_spark(master, conf, log_file, quick=small)
    if small or not _is_ours(active) or not launched.quick or launched.handed_out:
        return active
    stop()
    return get_spark(launched.master, launched.conf, launched.log_file)


def _is_ours(session: SparkSession) -> bool:
    """Whether get_spark launched `session` (and _launched describes it)."""
    return _launched is not None and _launched.app_id == session.sparkContext.applicationId


def stop() -> None:
    """Stop the running session and end its JVM (the next session launches a new one)."""
    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
    _stop_jvm()


def _stop_jvm() -> None:
    """End the driver JVM of a stopped session, so that the next session launches its own.

    PySpark keeps one JVM per Python process; its gateway exits when its stdin
    closes, which is how PySpark ends it too when Python exits.
    """
    gateway = SparkContext._gateway
    SparkContext._gateway = None
    SparkContext._jvm = None
    if gateway is None:
        return
    gateway.shutdown()
    proc = getattr(gateway, "proc", None)
    if proc is not None:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=_JVM_EXIT_S)
