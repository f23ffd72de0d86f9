"""Build the class-data-sharing archive of the driver JVM (checkers.spark.session.class_archive).

    python -m checkers.spark.class_data_archive    # what scripts/setup.sh runs, once per pyspark version

Small checks run on a JVM started with -XX:ArchiveClassesAtExit: when that
JVM exits it writes every class it loaded (Spark's, Hadoop's, Parquet's,
Janino's) into the archive, which later driver JVMs map instead of loading and
verifying the classes again. The input is a tiny generated queue run, so the
classes of every checker step are in it. It is checked twice: as the tiny
input it is (interpreted), and as a larger input is (with generated code).
"""
from __future__ import annotations

import contextlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Iterator

from .. import pipeline
from . import session

_PROCESSES = 4


def _sample_run(run_dir: Path) -> None:
    """A short queue run with a fault: sends, polls, a partition window."""
    history = run_dir / "history"
    history.mkdir(parents=True)
    ms = 1_000_000
    for process in range(_PROCESSES):
        lines = []
        for n in range(20):
            at = (n * _PROCESSES + process) * 10 * ms
            msg = {"id": f"m{process}-{n}", "shard": "s0", "payload": "p"}
            lines.append({"process": process, "type": "invoke", "f": "send", "key": 0, "value": msg, "time": at})
            lines.append({"process": process, "type": "ok", "f": "send", "key": 0,
                          "value": {**msg, "queue": 0, "offset": n * _PROCESSES + process},
                          "time": at + 2 * ms, "node": "n1"})
        (history / f"w{process}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    polls = [{"process": 9, "type": "invoke", "f": "poll", "key": 0, "value": {"offset": 0}, "time": 900 * ms},
             {"process": 9, "type": "ok", "f": "poll", "key": 0, "time": 901 * ms, "node": "n1",
              "value": [{"id": "m0-0", "key": 0, "queue": 0, "offset": 0}]}]
    (history / "consumer.jsonl").write_text("".join(json.dumps(e) + "\n" for e in polls))
    faults = [{"process": "nemesis", "type": "info", "f": "partition", "time": t * ms,
               "value": {"phase": phase, "targets": ["n1"]}} for t, phase in ((100, "start"), (300, "stop"))]
    (run_dir / "nemesis.jsonl").write_text("".join(json.dumps(e) + "\n" for e in faults))


@contextlib.contextmanager
def _tiny_input_bytes(limit: int) -> Iterator[None]:
    saved, pipeline.TINY_INPUT_BYTES = pipeline.TINY_INPUT_BYTES, limit
    try:
        yield
    finally:
        pipeline.TINY_INPUT_BYTES = saved


def build(archive: Path) -> Path:
    """Check a sample run on a JVM that writes `archive` when it exits; end that JVM."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="chaos-classes-") as scratch:
        run_dir = Path(scratch) / "run"
        _sample_run(run_dir)
        options = f"{session.QUICK_START_JAVA_OPTIONS} {session.java_path_option('-XX:ArchiveClassesAtExit', partial)}"
        for tiny_limit in (pipeline.TINY_INPUT_BYTES, -1):  # -1: no input is tiny
            with _tiny_input_bytes(tiny_limit):
                pipeline.check_runs([run_dir], "local[2]", {"spark.driver.extraJavaOptions": options},
                                    log_file=Path(scratch) / "spark.log")
        session.stop()
    if not partial.is_file():
        raise RuntimeError(f"the JVM wrote no class archive at {partial}")
    partial.replace(archive)
    for stale in archive.parent.glob("spark-*.jsa"):  # another pyspark's or JDK's: never mapped again
        if stale != archive:
            stale.unlink(missing_ok=True)
    return archive


def main() -> int:
    target = session.class_archive()
    try:
        print(f"class archive: {build(target)}")
    except Exception as exc:  # noqa: BLE001 - the archive only saves time: say so, do not fail set-up
        print(f"class archive not built ({type(exc).__name__}: {exc}); checks start ~1.5 s slower",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
