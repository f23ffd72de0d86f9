"""How the checkers' code and the JVM engine reach Spark executors on a cluster.

A cluster's workers have Python, Java and the project's declared
dependencies (pyspark, JPype, pyarrow, edn_format) but not this project: the
driver ships it the way Spark ships code. The `checkers` package goes as a
zip through `SparkContext.addPyFile` (what `spark.submit.pyFiles` does for
spark-submit), the engine jar (which also holds the event decoder of
checkers/parse.py) through `spark.jars`, which every executor fetches into its
work directory. Inside an executor the Python worker finds
that jar with `SparkFiles.get` and hands it to JPype; no path of the driver's
is used there. A local master needs none of this: its workers are the
driver's own machine and interpreter.
"""
from __future__ import annotations

import os
import tempfile
import zipfile
from pathlib import Path

ENGINE_JAR_NAME = "knossos-engine.jar"
ENGINE_JAR_ENV = "KNOSSOS_ENGINE_JAR"
PACKAGE_ZIP_NAME = "chaos-checkers.zip"
_SKIPPED_PARTS = {"__pycache__", "java"}  # bytecode and the engine's sources stay home

_shipping_dir: tempfile.TemporaryDirectory | None = None


def is_local(master: str) -> bool:
    """A local master (local, local[2], local[*], local-cluster[...] is not one)."""
    return master == "local" or master.startswith("local[")


def package_zip() -> Path:
    """A zip of the `checkers` package for the executors' sys.path (built once per process)."""
    global _shipping_dir
    if _shipping_dir is None:
        _shipping_dir = tempfile.TemporaryDirectory(prefix="chaos-spark-ship-")
    target = Path(_shipping_dir.name) / PACKAGE_ZIP_NAME
    if not target.exists():
        package = Path(__file__).resolve().parents[1]
        with zipfile.ZipFile(target.with_suffix(".tmp"), "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(package.rglob("*")):
                relative = path.relative_to(package.parent)
                if path.is_file() and not _SKIPPED_PARTS.intersection(relative.parts):
                    archive.write(path, relative.as_posix())
        target.with_suffix(".tmp").replace(target)
    return target


def engine_jar() -> Path | None:
    """The engine jar to ship (built when its sources changed), or None without javac/JDK.

    Without it the linearizability checker reports `unknown` with the reason,
    and reading the history's lines (checkers.spark.jvmfunctions.register) fails.
    """
    from ..knossos import jvm

    try:
        return Path(jvm._engine_jar())
    except jvm.EngineUnavailable:
        return None


def cluster_conf(conf: dict[str, str]) -> dict[str, str]:
    """`conf` plus the engine jar in `spark.jars` (kept beside any jars the user gave)."""
    jar = engine_jar()
    if jar is None:
        return conf
    jars = [j for j in conf.get("spark.jars", "").split(",") if j]
    return {**conf, "spark.jars": ",".join([*jars, str(jar)])}


def ship_python(spark_context) -> None:
    """Add the checkers' zip to every executor's Python path (the running session's)."""
    spark_context.addPyFile(str(package_zip()))


def use_shipped_engine() -> None:
    """In a Python worker: point JPype at the engine jar Spark fetched for this executor.

    Does nothing when the user set KNOSSOS_ENGINE_JAR, outside a Spark worker,
    or when Spark shipped no jar (a local master: the driver's build is used).
    """
    if os.environ.get(ENGINE_JAR_ENV):
        return
    from pyspark.files import SparkFiles

    if not SparkFiles._is_running_on_worker:
        return
    shipped = Path(SparkFiles.get(ENGINE_JAR_NAME))
    if shipped.is_file():
        os.environ[ENGINE_JAR_ENV] = str(shipped)
