"""The JVM engine: started lazily once per Python process through JPype,
fed whole batches of encoded histories in one call.

One call per batch matters: a JPype call costs microseconds, a history has
thousands of ops, and the property tests check thousands of histories.
"""
from __future__ import annotations

import fcntl
import json
import os
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .history import Operation
from .models import Values, spec

ROOT = Path(__file__).resolve().parents[2]
ENGINE_JAR = ROOT / "build" / "knossos-engine.jar"
BUILD_SCRIPT = ROOT / "scripts" / "build-engine.sh"
ENGINE_CLASS = "chaos.lin.Engine"

_lock = threading.Lock()
_engine: Any = None
_startup_seconds: float | None = None
_max_heap: int | None = None


class EngineUnavailable(RuntimeError):
    """The JVM or the engine jar cannot be had; the message says what to do."""


@dataclass
class Prepared:
    """One history encoded for the engine, with what is needed to decode its verdict."""

    model: str
    ops: list[Operation]
    wire: str


def encode(model: str, ops: list[Operation], init: Any, time_limit: float | None,
           max_configs: int = 0, memory_budget: int = 0, nil_reads: str = "absent") -> Prepared:
    """Encodes one history (already paired) as the text block Wire.java reads."""
    values = Values()
    encoder = spec(model).encoder(values, init, nil_reads)
    kept: list[Operation] = []
    rows: list[str] = []
    for op in encoder.relevant(ops):
        encoded = encoder.encode(op)
        if encoded is None:
            continue
        code, ins, outs = encoded
        ret = -1 if op.ret is None else op.ret
        # "CALL RET F NIN in... NOUT out..." (NOUT -1: output unknown)
        ins_text = f"{len(ins)} {' '.join(map(str, ins))}" if ins else "0"
        outs_text = "-1" if outs is None else \
            f"{len(outs)} {' '.join(map(str, outs))}" if outs else "0"
        rows.append(f"{op.call} {ret} {code} {ins_text} {outs_text}")
        kept.append(op)
    init_ids = encoder.init_ids()
    aux = encoder.aux_ids()
    limit_ms = 0 if time_limit is None else max(1, int(time_limit * 1000))
    head = (f"{model} {limit_ms} {max_configs} {memory_budget}\n"
            f"values {len(values.json)}\n")
    wire = "".join([
        head, "\n".join(values.json), "\n",
        f"init {len(init_ids)} {' '.join(map(str, init_ids))}\n",
        f"aux {len(aux)} {' '.join(map(str, aux))}\n",
        f"ops {len(rows)}\n", "\n".join(rows), "\n",
    ])
    return Prepared(model, kept, wire)


def check_prepared(batch: list[Prepared], deadline: float | None = None,
                   groups: list[int] | None = None) -> list[dict]:
    """Runs a batch in the JVM; returns the engine's raw verdicts (op numbers
    refer to each Prepared's `ops`). `groups[i]` says which checked history
    part i belongs to (default: each its own): the parts of one history are
    searched in parallel and stop once one of them is proven invalid."""
    if not batch:
        return []
    groups = list(range(len(batch))) if groups is None else groups
    deadline_ms = 0 if deadline is None else max(1, int(deadline * 1000))
    wire = f"batch {len(batch)} {deadline_ms}\n" + "".join(
        f"history {g} {p.wire}" for g, p in zip(groups, batch))
    raw = str(engine().check(wire))
    return json.loads(raw)


def engine() -> Any:
    """The engine class, starting the JVM on first use (once per process)."""
    global _engine, _startup_seconds
    if _engine is not None:
        return _engine
    with _lock:
        if _engine is None:
            start = time.perf_counter()
            _engine = _load_engine()
            _startup_seconds = time.perf_counter() - start
    return _engine


def startup_seconds() -> float | None:
    """How long starting the JVM and loading the engine took in this process."""
    return _startup_seconds


def max_heap_bytes() -> int:
    """The JVM's heap limit, for the memory guard's default budget."""
    global _max_heap
    if _max_heap is None:
        engine()
        import jpype
        _max_heap = int(jpype.JClass("java.lang.Runtime").getRuntime().maxMemory())
    return _max_heap


def _load_engine() -> Any:
    try:
        import jpype
    except ImportError as err:  # pragma: no cover - JPype is a declared dependency
        raise EngineUnavailable(f"JPype is not installed ({err}); run scripts/setup.sh") from None
    jar = _engine_jar()
    extra = [os.environ["KNOSSOS_JAR"]] if os.environ.get("KNOSSOS_JAR") else []
    if not jpype.isJVMStarted():
        options = os.environ.get("KNOSSOS_JVM_OPTS", "").split()
        try:
            jpype.startJVM(*options, classpath=[str(jar), *extra], convertStrings=False)
        except Exception as err:
            raise EngineUnavailable(f"cannot start the JVM: {err}") from None
        return jpype.JClass(ENGINE_CLASS)
    # Someone else started the JVM in this process: load our jar beside theirs.
    try:
        return jpype.JClass(ENGINE_CLASS)
    except Exception:
        urls = [jpype.JClass("java.io.File")(p).toURI().toURL() for p in [str(jar), *extra]]
        loader = jpype.JClass("java.net.URLClassLoader")(
            urls, jpype.JClass("java.lang.ClassLoader").getSystemClassLoader())
        return jpype.JClass(ENGINE_CLASS, loader=loader)


def _engine_jar() -> Path:
    """The engine jar, (re)built with javac when its sources changed."""
    override = os.environ.get("KNOSSOS_ENGINE_JAR")
    if override:
        return Path(override)
    if BUILD_SCRIPT.exists():
        ENGINE_JAR.parent.mkdir(parents=True, exist_ok=True)
        with open(ENGINE_JAR.parent / ".engine-build.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # Spark workers may start at once
            done = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True)
        if done.returncode != 0:
            raise EngineUnavailable(
                f"building the engine failed: {done.stderr.strip()[-400:]}; is javac installed? "
                "run scripts/setup.sh")
    if not ENGINE_JAR.exists():
        raise EngineUnavailable(f"{ENGINE_JAR} is missing; run scripts/setup.sh")
    return ENGINE_JAR
