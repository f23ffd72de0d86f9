"""Checks on a real Spark standalone cluster equal the local check's.

A master and two workers start from pyspark's own bin/spark-class on
loopback, each worker with its own work directory. A campaign (the pipeline
tests' scenarios: queue, rto, a valid and an invalid register, a log) is
checked on the cluster by a driver process and, at the same time, with
local[2] by `chaos check`; every run's results.json and history table must be
the same. The executors must import the checkers from the zip the driver
shipped and start the JVM engine from the jar Spark fetched for them.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from conftest import require
from support.checker_runs import SCENARIOS
from support.spark_standalone import StandaloneCluster, java_available

from checkers.pipeline import RESULTS_FILE, find_runs
from checkers.spark.session import session_conf
from checkers.spark.shipping import ENGINE_JAR_NAME, PACKAGE_ZIP_NAME, is_local, package_zip

pytestmark = [pytest.mark.spark, pytest.mark.jvm]

ROOT = Path(__file__).resolve().parents[1]
MEASURED_BY_THE_ENGINE = ("time", "engine-seconds", "engine-cpu-seconds")

# The cluster's driver: checks the campaign, then asks every executor where its
# checkers and engine jar come from (the answer goes to stdout as JSON).
CLUSTER_DRIVER = textwrap.dedent("""
    import json, sys
    from checkers.pipeline import check_runs, find_runs
    from checkers.spark.session import get_spark

    master, store, log = sys.argv[1:4]
    conf = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
            "spark.pyspark.python": sys.executable, "spark.executor.memory": "512m",
            "spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "4"}
    spark = get_spark(master, conf, log)
    check_runs(find_runs([store]))

    def origin(_):
        import os, socket
        import checkers
        from checkers.spark.shipping import use_shipped_engine
        from checkers.knossos import jvm
        use_shipped_engine()
        return {"checkers": checkers.__file__, "jar": str(jvm._engine_jar()), "cwd": os.getcwd()}

    print(json.dumps(spark.sparkContext.parallelize(range(4), 4).map(origin).collect()))
    spark.stop()
""")


def _checked_copy(store: Path, name: str) -> Path:
    copy = store.parent / name
    shutil.copytree(store, copy)
    return copy


def _comparable(run_dir: Path, store: Path) -> dict[str, Any]:
    """A run's results.json without its timestamp and store path, and its history table in index order."""
    result = json.loads((run_dir / RESULTS_FILE).read_text().replace(str(store), "STORE"))
    result.pop("checked_at")
    for failure in result["checkers"].get("linearizable", {}).get("failures", []):
        for measured in MEASURED_BY_THE_ENGINE:  # how long the search took, not what it found
            failure.pop(measured, None)
    history = run_dir / "checked" / "history.parquet"
    rows = sorted(pq.read_table(history).to_pylist(), key=lambda r: (r["index"])) \
        if history.exists() else None
    return {"result": result, "history": rows}


def _differences(a: Any, b: Any, where: str = "") -> list[str]:
    """Where two JSON-like values differ, as paths with both values."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b), key=str) for d in _differences(a.get(k), b.get(k), f"{where}/{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _differences(x, y, f"{where}[{i}]")]
    return [] if a == b else [f"{where}: {a!r:.300} != {b!r:.300}"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    require(java_available(), "needs Java (java on PATH or JAVA_HOME) for a Spark standalone cluster")
    root = tmp_path_factory.mktemp("standalone")
    with StandaloneCluster(root, workers=2, cores=1, memory="1g") as running:
        yield running
    assert running.leftovers() == [], "Spark processes outlived the cluster"


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("store") / "campaign"
    for scenario in SCENARIOS:
        scenario(store)
    return store


@pytest.fixture(scope="module")
def checked_both_ways(cluster: StandaloneCluster, campaign: Path) -> dict[str, Any]:
    """The campaign checked on the cluster and with local[2] at the same time."""
    on_cluster, on_local = _checked_copy(campaign, "cluster"), _checked_copy(campaign, "local")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    driver = subprocess.Popen([sys.executable, "-c", CLUSTER_DRIVER, cluster.master_url, str(on_cluster),
                               str(on_cluster / "spark.log")], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    local = subprocess.run([str(Path(sys.executable).parent / "chaos"), "check", str(on_local),
                            "--spark-master", "local[2]"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=600)
    out, err = driver.communicate(timeout=600)
    assert driver.returncode == 0, err[-3000:] + (on_cluster / "spark.log").read_text()[-3000:]
    assert local.returncode in (0, 1, 2), local.stdout + local.stderr
    return {"cluster": on_cluster, "local": on_local, "origins": json.loads(out.splitlines()[-1]),
            "work_dirs": [cluster.root / f"worker{n}" for n in (1, 2)]}


def test_every_run_checked_on_the_cluster_equals_the_local_check(checked_both_ways):
    runs = find_runs([checked_both_ways["local"]])
    assert len(runs) == len(SCENARIOS)
    for local_run in runs:
        cluster_run = checked_both_ways["cluster"] / local_run.relative_to(checked_both_ways["local"])
        differences = _differences(_comparable(cluster_run, checked_both_ways["cluster"]),
                                   _comparable(local_run, checked_both_ways["local"]))
        assert differences == [], f"{local_run.name}: " + "\n".join(differences[:10])


def test_linearizability_ran_the_engine_on_the_cluster(checked_both_ways):
    """Real verdicts, not `unknown`: the executors started the JVM engine."""
    runs = checked_both_ways["cluster"] / "runs"
    bad = json.loads((runs / "register-bad" / RESULTS_FILE).read_text())["checkers"]["linearizable"]
    good = json.loads((runs / "rto-register" / RESULTS_FILE).read_text())["checkers"]["linearizable"]
    assert (bad["valid"], good["valid"]) == (False, True)
    assert bad["counts"]["unknown"] == good["counts"]["unknown"] == 0


def test_executors_use_shipped_code_and_engine_jar_not_the_drivers_paths(checked_both_ways):
    work_dirs = [str(d) for d in checked_both_ways["work_dirs"]]
    for origin in checked_both_ways["origins"]:
        assert any(origin["cwd"].startswith(d) for d in work_dirs), origin
        assert PACKAGE_ZIP_NAME in origin["checkers"] and not origin["checkers"].startswith(str(ROOT)), origin
        assert origin["jar"].endswith(ENGINE_JAR_NAME) and any(origin["jar"].startswith(d)
                                                              for d in work_dirs), origin


# -- what is shipped (no cluster needed) ------------------------------------------------

def test_only_local_masters_skip_shipping():
    assert all(is_local(m) for m in ("local", "local[2]", "local[*]"))
    assert not any(is_local(m) for m in ("spark://127.0.0.1:7077", "yarn", "k8s://https://h:6443",
                                         "local-cluster[2,1,1024]"))


def test_shipped_zip_holds_the_checkers_code_but_not_bytecode_or_java_sources():
    names = zipfile.ZipFile(package_zip()).namelist()
    assert {"checkers/pipeline.py", "checkers/knossos/jvm.py", "checkers/spark/shipping.py"} <= set(names)
    assert not [n for n in names if "__pycache__" in n or n.endswith(".java")]


def test_cluster_conf_keeps_the_users_jars_and_adds_the_engine():
    require(java_available(), "needs a JDK to build the engine jar")
    jars = session_conf("spark://127.0.0.1:7077", {"spark.jars": "/opt/extra.jar"})["spark.jars"].split(",")
    assert jars[0] == "/opt/extra.jar" and jars[1].endswith(ENGINE_JAR_NAME) and Path(jars[1]).is_file()
    assert "spark.jars" not in session_conf("local[2]")
