"""The driver JVM the checks start: a quick (C1-only) JVM for small one-off checks,
relaunched with full compilation before a large one, the class-data archive built at
set-up, and driver options a user sets taking over."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from support.checker_runs import ROOT, queue_all

pytestmark = [pytest.mark.spark, pytest.mark.jvm]


_SESSION_PROBE = """
import json, os, sys
from pyspark.sql import SparkSession
from checkers import pipeline
from checkers.spark.session import get_spark

def jvm():
    spark = SparkSession.getActiveSession()
    java = spark._jvm.java.lang
    args = java.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    hotspot = java.management.ManagementFactory.getPlatformMXBean(
        java.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
    return {"pid": java.ProcessHandle.current().pid(),
            "c1_only": "-XX:TieredStopAtLevel=1" in list(args),
            "archive": hotspot.getVMOption("SharedArchiveFile").getValue(),
            "sharing": hotspot.getVMOption("UseSharedSpaces").getValue() == "true",
            "parallel_gc": hotspot.getVMOption("UseParallelGC").getValue() == "true"}

run, conf, hand_out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3] == "hand-out"
found = {"small": pipeline.check_runs([run], "local[2]", conf)[0], "small_jvm": jvm()}
held = get_spark() if hand_out else None
pipeline.SMALL_INPUT_BYTES = -1
found["large"] = pipeline.check_runs([run], "local[2]", conf)[0]
found["large_jvm"] = jvm()
found["first_jvm_alive"] = os.path.exists(f"/proc/{found['small_jvm']['pid']}")
found["held_session_works"] = held is not None and held.range(3).count() == 3
print(json.dumps(found))
"""


def _probe_sessions(run_dir: Path, conf: dict[str, str], hand_out: bool = False) -> dict[str, Any]:
    """Check one run small, then large, in a fresh process (it may relaunch its JVM);
    `hand_out`: in between, take the running session with get_spark() and keep it."""
    proc = subprocess.run([sys.executable, "-c", _SESSION_PROBE, str(run_dir), json.dumps(conf),
                           "hand-out" if hand_out else "-"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def default_probe(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One run checked small then large with the default settings (shared: each probe starts
    two driver JVMs)."""
    root = tmp_path_factory.mktemp("default-probe")
    queue_all(root)
    return _probe_sessions(root / "runs" / "queue-all", {})


def test_a_small_check_starts_a_quick_jvm_that_is_relaunched_before_a_large_one(default_probe):
    """Small checks run on a C1-only driver JVM (quicker to warm up); before a large
    check that session is stopped and a fully compiling JVM takes over, the old one
    exits, and the results are the same."""
    found = default_probe
    assert found["small_jvm"]["c1_only"] and not found["large_jvm"]["c1_only"]
    assert found["large_jvm"]["pid"] != found["small_jvm"]["pid"]
    assert not found["first_jvm_alive"]
    same = [{k: v for k, v in found[size].items() if k != "checked_at"} for size in ("small", "large")]
    assert same[0] == same[1] and same[0]["valid"] is False


def test_a_quick_session_handed_out_by_get_spark_is_never_relaunched(tmp_path):
    """Whoever took the session with get_spark() may still use it: a large check then
    runs on it as it is, and it keeps working."""
    queue_all(tmp_path)
    found = _probe_sessions(tmp_path / "runs" / "queue-all", {}, hand_out=True)
    assert found["small_jvm"]["c1_only"] and found["large_jvm"]["pid"] == found["small_jvm"]["pid"]
    assert found["held_session_works"]
    assert {k: v for k, v in found["small"].items() if k != "checked_at"} == \
        {k: v for k, v in found["large"].items() if k != "checked_at"}


def test_setting_the_driver_java_options_opts_out_of_the_quick_jvm(tmp_path):
    queue_all(tmp_path)
    found = _probe_sessions(tmp_path / "runs" / "queue-all", {"spark.driver.extraJavaOptions": "-Xss4m"})
    assert not found["small_jvm"]["c1_only"] and not found["small_jvm"]["archive"]
    assert not found["small_jvm"]["parallel_gc"]
    assert found["large_jvm"]["pid"] == found["small_jvm"]["pid"]   # not relaunched


def _built_class_archive() -> Path:
    """The driver's class archive; in CI its absence fails the test (setup builds it)."""
    from checkers.spark.session import class_archive

    archive = class_archive()
    if not archive.is_file():
        message = f"{archive} missing: scripts/setup.sh builds it (python -m checkers.spark.class_data_archive)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return archive


def test_driver_jvms_map_the_class_archive_built_at_set_up(default_probe):
    """scripts/setup.sh builds it (python -m checkers.spark.class_data_archive); both the quick and the
    fully compiling JVM use it, with the throughput collector."""
    archive = _built_class_archive()
    for jvm in (default_probe["small_jvm"], default_probe["large_jvm"]):
        assert jvm["archive"] == str(archive) and jvm["sharing"]
        assert jvm["parallel_gc"]   # the throughput collector, and the archive still maps


_SPACED_PROBE = """
import json, sys
from pathlib import Path
from checkers.spark import session

archive, log = Path(sys.argv[1]), Path(sys.argv[2])
session.class_archive = lambda: archive
spark = session.get_spark("local[1]", {}, log, quick=True)
java = spark._jvm.java.lang
hotspot = java.management.ManagementFactory.getPlatformMXBean(
    java.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
print(json.dumps({"archive": hotspot.getVMOption("SharedArchiveFile").getValue(),
                  "sharing": hotspot.getVMOption("UseSharedSpaces").getValue() == "true",
                  "error_file": hotspot.getVMOption("ErrorFile").getValue(),
                  "works": spark.range(3).count() == 3}))
"""


def test_paths_with_spaces_and_quotes_reach_the_driver_jvm_as_one_option(tmp_path):
    """The class archive and the JVM's crash report file are paths inside
    spark.driver.extraJavaOptions, which Spark's launcher splits at white space."""
    import shutil

    archive = _built_class_archive()
    odd = tmp_path / "a venv's \"share\" dir"
    odd.mkdir()
    shutil.copy(archive, odd / archive.name)
    log = tmp_path / "my store" / "spark.log"
    proc = subprocess.run([sys.executable, "-c", _SPACED_PROBE, str(odd / archive.name), str(log)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found == {"archive": str(odd / archive.name), "sharing": True,
                     "error_file": str(log.parent / "hs_err_pid%p.log"), "works": True}


def test_the_class_archive_is_built_from_an_interpreted_and_a_compiled_check(tmp_path, monkeypatch):
    """A tiny check loads no code-generation classes: the build checks its sample both
    ways so that larger checks find theirs in the archive too (unit level: no JVM)."""
    from checkers import pipeline
    from checkers.spark import class_data_archive, session

    limits = []

    def fake_check(run_dirs, master, conf, log_file):
        limits.append(pipeline.TINY_INPUT_BYTES)
        assert pipeline.raw_bytes(run_dirs) <= pipeline.TINY_INPUT_BYTES or limits[-1] == -1
        partial = conf["spark.driver.extraJavaOptions"].split("-XX:ArchiveClassesAtExit=")[1]
        Path(partial).write_bytes(b"archive")

    monkeypatch.setattr(pipeline, "check_runs", fake_check)
    monkeypatch.setattr(session, "stop", lambda: None)
    (tmp_path / "spark-4.0.0-java-11.0.1.jsa").write_bytes(b"old")   # another pyspark's and JDK's
    (tmp_path / "notes.txt").write_text("kept")
    built = class_data_archive.build(tmp_path / "spark-4.3.0-java-17.0.15.jsa")
    assert built.read_bytes() == b"archive"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "spark-4.3.0-java-17.0.15.jsa"]
    assert limits == [pipeline.TINY_INPUT_BYTES, -1]  # and the limit is restored afterwards
