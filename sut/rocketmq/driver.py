"""Python's handle on real RocketMQ: one JVM running RocketMQ's own remoting client.

The JVM (sut/rocketmq/java/chaos/rmq/Driver.java, built by scripts/build-rmq-driver.sh)
reads JSON requests from stdin and answers JSON lines on stdout, each tagged with the
request's id, so one process serves every worker of a run at once; `Driver` is usable
from threads (`call`) and from asyncio (`acall`) alike. Why one shared process and not
JPype or a JVM per worker: docs/rocketmq-client.md.

Lifetime: the JVM exits when its stdin closes, which the kernel does when this process
ends however it ends (even SIGKILL), so no JVM outlives the harness; `close()` (also
run at exit) ends it sooner. If the JVM dies, every request in flight fails with
`DriverDied`: a send in flight then counts as indeterminate (see `classify_send`).

`classify_send` / `classify_error` are the one table of RocketMQ outcomes -> ok / fail /
info (Jepsen's rules), documented in docs/rocketmq-client.md.
"""
from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import itertools
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import weakref
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# CHAOS_RMQ_DRIVER_JAR: a driver built elsewhere (a branch's sources, beside a shared build/).
DRIVER_JAR = Path(os.environ.get("CHAOS_RMQ_DRIVER_JAR") or ROOT / "build" / "rmq-driver.jar")
START_TIMEOUT_S = 60.0
CLOSE_TIMEOUT_S = 5.0
# A client JVM: small heap, C1 only and the serial collector start fast and stay small
# on a 2-core box; the client needs no throughput beyond what one run sends.
JVM_FLAGS = ("-Xms16m", "-Xmx160m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             "-Xss512k", "-XX:-UsePerfData")


class DriverError(Exception):
    """RocketMQ (or the driver) answered a request with an error."""

    def __init__(self, error: dict[str, Any]) -> None:
        self.error = error
        self.cls: str = error.get("class", "")
        self.code: int | None = error.get("code")
        self.cause: str | None = error.get("cause")
        super().__init__(f"{self.cls}: {error.get('message')}")


class DriverDied(Exception):
    """The driver process ended while (or before) a request was in flight."""


class DriverMissing(RuntimeError):
    """No JDK, no RocketMQ release, or no compiled driver: what to run to get them."""


def release_lib() -> Path:
    """The pinned release's lib/ (scripts/fetch-rocketmq.sh)."""
    pom = (ROOT / "scripts" / "rocketmq" / "pom.xml").read_text()
    version = pom.split("<rocketmq.version>", 1)[1].split("<", 1)[0].strip()
    return ROOT / "build" / f"rocketmq-{version}" / "lib"


def driver_command(java: str | None = None, lib: Path | None = None, jar: Path = DRIVER_JAR,
                   log_dir: Path | None = None) -> list[str]:
    """The argv of a driver JVM; DriverMissing says what set-up step is missing."""
    java = java or shutil.which("java")
    lib = lib or release_lib()
    if not java:
        raise DriverMissing("no JDK: 'java' is not on PATH (bash scripts/setup.sh installs openjdk-17)")
    if not lib.is_dir():
        raise DriverMissing(f"no RocketMQ release in {lib} (run bash scripts/setup.sh)")
    if not jar.is_file():
        raise DriverMissing(f"no RocketMQ client driver {jar} (run bash scripts/build-rmq-driver.sh)")
    props = ["-Drocketmq.log.level=warn"]
    if log_dir is not None:
        props.append(f"-Drocketmq.log.root={log_dir}")
    return [java, *JVM_FLAGS, *props, "-cp", f"{jar}{os.pathsep}{lib}/*", "chaos.rmq.Driver"]


class Driver:
    """One driver JVM; requests are `call(op, **args)` (blocking) or `await acall(...)`."""

    def __init__(self, java: str | None = None, log_dir: Path | str | None = None) -> None:
        self._own_log_dir = log_dir is None
        self.log_dir = Path(log_dir) if log_dir is not None else Path(tempfile.mkdtemp(prefix="rmq-driver-"))
        self._argv = driver_command(java, log_dir=self.log_dir)
        self._ids = itertools.count(1)
        self._pending: dict[int, concurrent.futures.Future[Any]] = {}
        self._lock = threading.Lock()         # guards _pending
        self._write_lock = threading.Lock()   # one request line at a time; never held with _lock
        self._proc: subprocess.Popen[bytes] | None = None
        self._dead: str | None = None
        self._ready = threading.Event()
        self._reader: threading.Thread | None = None

    # -- lifetime -------------------------------------------------------------------------
    def start(self, timeout: float = START_TIMEOUT_S) -> "Driver":
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_dir / "driver.stderr", "ab") as stderr:
            # Its own session: a Ctrl-C meant for the harness must not kill the client
            # under the workers' feet (the harness closes pending ops itself).
            self._proc = subprocess.Popen(self._argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=stderr, start_new_session=True, cwd=self.log_dir)
        _LIVE.add(self)
        self._reader = threading.Thread(target=self._read, name="rmq-driver-reader", daemon=True)
        self._reader.start()
        if not self._ready.wait(timeout) or self._dead:
            reason = self._dead or f"no ready line within {timeout:g}s"
            self.close()
            raise DriverDied(f"the RocketMQ driver did not start: {reason} (log: {self.log_dir})")
        return self

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._dead is None and self._proc.poll() is None

    def close(self, timeout: float = CLOSE_TIMEOUT_S) -> None:
        """End the JVM (EOF first, then SIGKILL) and fail what is still in flight."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            try:
                assert proc.stdin is not None
                proc.stdin.close()
            except OSError:
                pass
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc is not None and proc.stdout is not None:
            proc.stdout.close()
        self._fail_pending("the driver was closed")
        _LIVE.discard(self)
        if self._own_log_dir:
            shutil.rmtree(self.log_dir, ignore_errors=True)

    def __enter__(self) -> "Driver":
        return self.start() if self._proc is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- requests ---------------------------------------------------------------------------
    def submit(self, op: str, **args: Any) -> concurrent.futures.Future[Any]:
        """Send one request; the future holds its result, or DriverError / DriverDied."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        request_id = next(self._ids)
        line = json.dumps({"id": request_id, "op": op, **args}, separators=(",", ":")) + "\n"
        with self._lock:
            if not self.alive:
                future.set_exception(DriverDied(self._dead or "the driver is not running"))
                return future
            self._pending[request_id] = future
        try:
            with self._write_lock:
                assert self._proc is not None and self._proc.stdin is not None
                self._proc.stdin.write(line.encode())
                self._proc.stdin.flush()
        except (OSError, ValueError) as exc:
            with self._lock:
                self._pending.pop(request_id, None)
            if not future.done():
                future.set_exception(DriverDied(f"writing to the driver failed: {exc}"))
        return future

    def call(self, op: str, timeout: float | None = None, **args: Any) -> Any:
        """Blocking request (for threads: deployers, nemeses)."""
        return self.submit(op, **args).result(timeout)

    async def acall(self, op: str, **args: Any) -> Any:
        """Request from asyncio; cancelling it only stops waiting (the JVM finishes the call)."""
        return await asyncio.wrap_future(self.submit(op, **args))

    def _read(self) -> None:
        """Answer futures from the driver's lines until its output ends. A line that is not
        JSON is a library's chatter and is skipped; a JSON line that is not an answer of the
        protocol's shape means the two sides no longer agree, so the driver is ended and
        marked dead: every request in flight fails with DriverDied (indeterminate) and
        `SharedDriver.acquire` starts a new one. Nothing a line holds may end this thread
        without marking the driver dead, or every pending and later request would hang."""
        assert self._proc is not None and self._proc.stdout is not None
        reason = "the driver's output ended"
        try:
            for raw in self._proc.stdout:
                try:
                    answer = json.loads(raw)
                except ValueError:
                    continue  # not an answer (a library printed something): ignore
                problem = _answer_problem(answer)
                if problem is not None:
                    reason = f"the driver broke the protocol: {problem}: {_excerpt(raw)}"
                    self._proc.kill()
                    break
                if answer.get("ready"):
                    self._ready.set()
                    continue
                with self._lock:
                    future = self._pending.pop(answer["id"], None)
                if future is None or future.done():
                    continue
                if answer.get("ok"):
                    future.set_result(answer.get("result"))
                else:
                    future.set_exception(DriverError(answer.get("error") or {}))
        except Exception as exc:  # noqa: BLE001 - any failure here must mark the driver dead
            reason = f"reading the driver failed: {type(exc).__name__}: {exc}"
            try:
                self._proc.kill()
            except OSError:
                pass
        finally:
            code = self._proc.poll()
            self._dead = reason + (f" (exit code {code})" if code is not None else "")
            self._ready.set()
            self._fail_pending(self._dead)

    def _fail_pending(self, reason: str) -> None:
        with self._lock:
            pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(DriverDied(reason))


def _answer_problem(answer: Any) -> str | None:
    """What makes a parsed line not an answer of the driver's protocol, or None: a ready
    line `{"ready": true}`, or `{"id": int, "ok": bool, "result": ...}` /
    `{"id": int, "ok": false, "error": {"class": str, "message": ..., "code": int|null,
    "cause": str|null}}` (chaos/rmq/Driver.java)."""
    if not isinstance(answer, dict):
        return f"a JSON {type(answer).__name__}, not an object"
    if answer.get("ready") is True and "id" not in answer:
        return None
    request_id = answer.get("id")
    if type(request_id) is not int:
        return f"an id that is {type(request_id).__name__}, not an integer"
    if not isinstance(answer.get("ok", False), bool):
        return "an 'ok' that is not true or false"
    if answer.get("ok"):
        return None
    error = answer.get("error")
    if error is None:
        return None
    if not isinstance(error, dict):
        return f"an error that is a {type(error).__name__}, not an object"
    for key in ("class", "cause"):
        if not isinstance(error.get(key, ""), (str, type(None))):
            return f"an error whose {key!r} is not a string"
    code = error.get("code")
    if code is not None and type(code) is not int:
        return "an error whose 'code' is not an integer"
    return None


def _excerpt(raw: bytes, limit: int = 120) -> str:
    text = raw.decode("utf-8", "replace").strip()
    return text if len(text) <= limit else text[:limit] + "..."


_LIVE: "weakref.WeakSet[Driver]" = weakref.WeakSet()


class SharedDriver:
    """One driver for everyone who holds it: started by the first `acquire`, ended
    `linger_s` after the last `release` (so a run's workers that retire and reconnect,
    or all reconnect for the audit, do not pay a JVM start each time)."""

    def __init__(self, linger_s: float = 5.0, **driver_args: Any) -> None:
        self.linger_s, self._driver_args = linger_s, driver_args
        self._driver: Driver | None = None
        self._holders = 0
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None

    def acquire(self) -> Driver:
        """The running driver (started, or restarted if it died); blocks while it starts."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._driver is None or not self._driver.alive:
                if self._driver is not None:
                    self._driver.close()
                self._driver = None
                self._driver = Driver(**self._driver_args).start()
            self._holders += 1
            return self._driver

    def release(self) -> None:
        with self._lock:
            self._holders = max(0, self._holders - 1)
            if self._holders == 0 and self._driver is not None and self._timer is None:
                self._timer = threading.Timer(self.linger_s, self._stop_if_unused)
                self._timer.daemon = True
                self._timer.start()

    def _stop_if_unused(self) -> None:
        with self._lock:
            self._timer = None
            if self._holders > 0 or self._driver is None:
                return
            driver, self._driver = self._driver, None
        driver.close()

    def close(self) -> None:
        """End the driver now, held or not (its requests in flight fail with DriverDied)."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            driver, self._driver, self._holders = self._driver, None, 0
        if driver is not None:
            driver.close()


@atexit.register
def _close_all() -> None:
    for driver in list(_LIVE):
        driver.close(timeout=1.0)


_SHARED = SharedDriver()


def shared_driver() -> SharedDriver:
    """The process's one driver JVM, shared by the workloads' clients and anything else in
    the harness process that queries RocketMQ (deployer, nemeses): `acquire()` / `release()`."""
    return _SHARED


# -- outcomes (Jepsen's rules; the table in docs/rocketmq-client.md) ----------------------

# SendStatus of a SendResult: only SEND_OK is acknowledged; the others mean the master
# appended the message but flush or replication was not confirmed in time.
SEND_STATUS_TYPES = {"SEND_OK": "ok", "FLUSH_DISK_TIMEOUT": "info",
                     "FLUSH_SLAVE_TIMEOUT": "info", "SLAVE_NOT_AVAILABLE": "info"}

# RocketMQ response codes (org.apache.rocketmq.remoting.protocol.ResponseCode) that a
# broker of the pinned release (5.3.3, DLedger 0.3.1.2) answers only before anything is
# appended (read in their sources; docs/rocketmq-client.md gives the paths). Absent codes
# are indeterminate: SYSTEM_ERROR (1) covers a quorum or in-sync-replica wait that ran out,
# or a Raft term that changed, after the append.
REJECTED_BEFORE_APPEND = {
    2: "SYSTEM_BUSY",                 # page cache busy, DLedger refused the append, request queue cleaned
    3: "REQUEST_CODE_NOT_SUPPORTED",
    13: "MESSAGE_ILLEGAL",
    14: "SERVICE_NOT_AVAILABLE",      # a slave, a store shut down or not writeable
    15: "VERSION_NOT_SUPPORTED",
    16: "NO_PERMISSION",              # the broker is not writeable
    17: "TOPIC_NOT_EXIST",
    23: "SUBSCRIPTION_NOT_EXIST",
}

# Client-side exceptions raised before the request was written to any connection.
NOT_SENT = {
    "MQClientException",               # no broker address in the route, validation, not started
    "RemotingConnectException",         # no connection could be made: nothing was written
    "RemotingTooMuchRequestException",  # the time budget ran out before sending
    "RequestError",                     # the driver refused the request (no route, no such queue)
}


def classify_send(status: str) -> str:
    """History type of a SendResult's status (anything unknown is info)."""
    return SEND_STATUS_TYPES.get(status, "info")


def classify_error(exc: BaseException) -> str:
    """History type of a failed write: fail only if it provably had no effect."""
    if isinstance(exc, DriverError):
        if exc.cls == "MQBrokerException":
            return "fail" if exc.code in REJECTED_BEFORE_APPEND else "info"
        if exc.cls in NOT_SENT and exc.cause in (None, "RemotingConnectException"):
            return "fail"
    return "info"  # timeouts, broken connections, a dead driver, anything unknown


# A broker's SERVICE_NOT_AVAILABLE remark always names the disk and shows its commitlog
# disk's used ratio (`the broker's disk is full [CL:  0.93 CQ: ...]`); the store refuses
# writes for a full disk from diskSpaceWarningLevelRatio (0.90) on.
_DISK_USED = re.compile(r"disk is full \[CL:\s*([0-9.]+)")
DISK_FULL_RATIO = 0.90


def disk_full_remark(text: str) -> bool:
    """Does a SERVICE_NOT_AVAILABLE remark show a commitlog disk used beyond the full ratio?"""
    found = _DISK_USED.search(text)
    try:
        return found is not None and float(found.group(1)) >= DISK_FULL_RATIO
    except ValueError:
        return False


def error_text(exc: BaseException) -> str:
    """One line for the history's error field: the exception and the broker's code name."""
    if isinstance(exc, DriverError) and exc.code is not None and exc.cls == "MQBrokerException":
        name = REJECTED_BEFORE_APPEND.get(exc.code) or ("SYSTEM_ERROR" if exc.code == 1 else f"CODE_{exc.code}")
        if exc.code == 14 and disk_full_remark(str(exc)):
            name = "DISK_FULL (SERVICE_NOT_AVAILABLE)"
        return f"{name}: {exc}"
    return f"{type(exc).__name__}: {exc}"

