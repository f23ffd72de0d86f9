"""Clock faults through libfaketime: options refused before a run, the FAKETIME specs the
nucleus writes, a preloaded process following its file, the journal and heal of the
timestamp files, and the SUT started under libfaketime only in runs with a clock fault."""
from __future__ import annotations

import glob
import json
import os
import random
import shutil
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from faults import registry
from faults.context import FaultContext, FaultError
from inventory import Inventory, Node
from nuclei import Journal, NucleusError, clock, heal
from nuclei.process import Proc
from sut import systems
from tests.conftest import require

LIBRARY = next(iter(glob.glob(clock.LIBRARY_GLOB)), None)


@dataclass
class Result:
    exited: int
    stdout: str
    stderr: str


class LocalPool:
    """Runs a nucleus's scripts on this machine: every "node" is here."""

    def run(self, node, script, timeout=30, check=False):
        done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=timeout)
        return Result(done.returncode, done.stdout, done.stderr)


@dataclass
class RecordingPool:
    """Records what a deployer would start (argv, env) instead of starting it."""

    started: list[dict] = field(default_factory=list)

    def start_detached(self, node, argv, pidfile, logfile, cwd=None, env=None):
        self.started.append({"node": str(node), "argv": list(argv), "env": env})
        return 4242


def read(path: str) -> str:
    return Path(path).read_text().strip()


# -- options ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, options, message", [
    ("random-clock-skew", {"ms": "0"}, "option ms='0': Input should be greater than 0"),
    ("random-clock-skew", {"ms": "7200000"}, "ms='7200000'"),
    ("random-clock-skew", {"direction": "sideways"}, "direction must be one of forward, back, random"),
    ("random-clock-drift", {"rate": "1"}, "rate must be in \\[0.5, 2\\] and not 1"),
    ("random-clock-drift", {"rate": "3"}, "rate must be in"),
    ("clock-strobe", {"period": "0.2"}, "period='0.2'"),
    ("fixed-clock-skew", {}, "needs the nodes to hit: targets=n1,n2"),
    ("leader-clock-strobe", {"offset": "1"}, "unknown option"),
])
def test_a_bad_clock_option_is_refused_before_anything_starts(name, options, message):
    with pytest.raises(FaultError, match=message):
        registry.create(name, **options)


def test_every_clock_fault_has_its_random_fixed_and_leader_form():
    names = set(registry.names())
    for kind in ("skew", "drift"):
        assert {f"random-clock-{kind}", f"fixed-clock-{kind}", f"leader-clock-{kind}"} <= names
    assert {"clock-strobe", "fixed-clock-strobe", "leader-clock-strobe"} <= names
    assert registry.create("clock-strobe", ms="250", period="1").settings() == {"ms": 250.0, "period_s": 1.0}


# -- the specs the nucleus writes ------------------------------------------------------------------

def test_a_skew_is_written_as_an_offset_at_the_true_rate(tmp_path):
    path = str(tmp_path / "p.rc")
    written = clock.write(LocalPool(), "n1", [(path, None)], clock.ClockShift(skew_s=-2.5))
    assert written["specs"][path] == read(path) == "-2.500000 x1.000000000"
    clock.write(LocalPool(), "n1", [(path, None)], clock.ClockShift())
    assert read(path) == clock.TRUE_CLOCK


def test_a_drift_starts_from_the_true_time_whatever_the_process_start(tmp_path):
    """offset = (start - applied_at) * (rate - 1): at the instant applied the clock reads true."""
    path = str(tmp_path / "p.rc")
    now = time.time()
    spec = clock.write(LocalPool(), "n1", [(path, None)], clock.ClockShift(rate=1.5), applied_at=now - 10)
    offset, rate = spec["specs"][path].split()
    assert rate == "x1.500000000" and float(offset) == pytest.approx(5.0, abs=0.5)
    # A running process: its start comes from /proc (this test's own process).
    pidfile = tmp_path / "self.pid"
    pidfile.write_text(str(os.getpid()))
    with open(f"/proc/{os.getpid()}/stat") as f:
        ticks = int(f.read().rsplit(") ", 1)[1].split()[19])
    btime = next(int(line.split()[1]) for line in open("/proc/stat") if line.startswith("btime "))
    age = time.time() - (btime + ticks / os.sysconf("SC_CLK_TCK"))
    spec = clock.write(LocalPool(), "n1", [(path, str(pidfile))], clock.ClockShift(rate=0.5))
    assert float(spec["specs"][path].split()[0]) == pytest.approx(age * 0.5, abs=0.5)


def test_the_preload_fakes_the_monotonic_clock_only_when_asked():
    wall = clock.preload_env("/lib/f.so", "/w/n1", "broker-a-0", fake_monotonic=False)
    assert wall["FAKETIME_TIMESTAMP_FILE"] == "/w/n1/faketime/broker-a-0.rc"
    assert wall["FAKETIME_DONT_FAKE_MONOTONIC"] == "1" and wall["LD_PRELOAD"] == "/lib/f.so"
    assert "FAKETIME_DONT_FAKE_MONOTONIC" not in clock.preload_env("/lib/f.so", "/w/n1", "b", fake_monotonic=True)


# -- libfaketime itself -------------------------------------------------------------------------------

PRINT_CLOCKS = textwrap.dedent("""
    import json, sys, time
    for line in sys.stdin:
        print(json.dumps([time.time(), time.monotonic()]), flush=True)
""")


@pytest.mark.parametrize("fake_monotonic", [False, True])
def test_a_preloaded_process_follows_its_timestamp_file(tmp_path, fake_monotonic):
    require(LIBRARY is not None, "needs libfaketime (Debian package libfaketime; bash scripts/setup.sh)")
    (tmp_path / clock.DIRECTORY).mkdir()
    env = {**os.environ, **clock.preload_env(LIBRARY, str(tmp_path), "p", fake_monotonic)}
    path = env["FAKETIME_TIMESTAMP_FILE"]
    clock.write(LocalPool(), "n1", [(path, None)], clock.ClockShift())
    child = subprocess.Popen([sys.executable, "-c", PRINT_CLOCKS], env=env, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def ask() -> tuple[float, float]:
        child.stdin.write("\n")
        child.stdin.flush()
        wall, mono = json.loads(child.stdout.readline())
        return wall - time.time(), mono - time.monotonic()

    try:
        wall0, mono0 = ask()  # a faked monotonic clock starts where the wall clock is: compare moves
        assert abs(wall0) < 0.5
        clock.write(LocalPool(), "n1", [(path, None)], clock.ClockShift(skew_s=-30))
        time.sleep(1.2)  # libfaketime reads its file again when the second changed
        wall, mono = ask()
        assert wall == pytest.approx(-30, abs=0.5)
        assert mono - mono0 == (pytest.approx(-30, abs=0.5) if fake_monotonic else pytest.approx(0, abs=0.5))
        clock.write(LocalPool(), "n1", [(path, None)], clock.ClockShift())
        time.sleep(1.2)
        assert abs(ask()[0]) < 0.5
    finally:
        stop_preloaded(child)


def stop_preloaded(child: subprocess.Popen) -> None:
    """Kill a local preloaded child and remove the libfaketime segments SIGKILL leaves."""
    child.kill()
    child.wait()
    for leftover in (f"/dev/shm/faketime_shm_{child.pid}", f"/dev/shm/sem.faketime_sem_{child.pid}"):
        if os.path.exists(leftover):
            os.unlink(leftover)


JAVA_PROBE = textwrap.dedent("""
    import java.io.*;
    import java.util.concurrent.locks.LockSupport;
    public class Probe {
        public static void main(String[] args) throws Exception {
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
            while (in.readLine() != null) {
                long before = System.nanoTime();
                LockSupport.parkNanos(100_000_000L);  // a timed wait, as RocketMQ's services do
                long parked = System.nanoTime() - before;
                System.out.println(System.currentTimeMillis() + " " + System.nanoTime() + " " + parked);
            }
        }
    }
""")


@pytest.mark.jvm
def test_a_jvm_under_the_preload_sees_both_clocks_jump_and_its_timed_waits_last_their_time(tmp_path):
    """What RocketMQ's processes get: currentTimeMillis and nanoTime jump together, and a
    100 ms park still lasts 100 ms (it neither returns at once nor waits out the jump)."""
    require(LIBRARY is not None, "needs libfaketime (Debian package libfaketime; bash scripts/setup.sh)")
    java = shutil.which("java")
    require(java is not None, "needs a JDK (java on PATH)")
    (tmp_path / clock.DIRECTORY).mkdir()
    (tmp_path / "Probe.java").write_text(JAVA_PROBE)
    env = {**os.environ, **clock.preload_env(LIBRARY, str(tmp_path), "jvm", fake_monotonic=True)}
    path = env["FAKETIME_TIMESTAMP_FILE"]
    clock.write(LocalPool(), "n1", [(path, None)], clock.ClockShift())
    child = subprocess.Popen([java, "-Xshare:auto", "-XX:TieredStopAtLevel=1", str(tmp_path / "Probe.java")],
                             env=env, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def ask() -> tuple[float, float, float]:
        child.stdin.write("\n")
        child.stdin.flush()
        millis, nanos, parked = map(int, child.stdout.readline().split())
        return millis / 1000 - time.time(), nanos / 1e9 - time.monotonic(), parked / 1e9

    try:
        wall0, mono0, parked0 = ask()
        assert abs(wall0) < 1 and 0.09 < parked0 < 1
        clock.write(LocalPool(), "n1", [(path, None)], clock.ClockShift(skew_s=3600))
        time.sleep(1.2)
        began = time.monotonic()
        wall, mono, parked = ask()
        assert wall == pytest.approx(3600, abs=1) and mono == pytest.approx(mono0 + 3600, abs=1)
        assert 0.09 < parked < 1 and 0.09 < time.monotonic() - began < 2
    finally:
        stop_preloaded(child)


# -- journal and heal -------------------------------------------------------------------------------

def test_heal_resets_the_clocks_and_removes_the_files_only_after_the_sut_stopped(tmp_path):
    pool, journal = LocalPool(), Journal(tmp_path / "journal.jsonl")
    workdir = str(tmp_path / "n1")
    clock.prepare(pool, journal, "n1", workdir)
    path = clock.timestamp_file(workdir, "broker-a-0")
    assert clock.before_start(pool, journal, "n1", workdir, "broker-a-0") == clock.TRUE_CLOCK
    entry, _ = clock.shift(pool, journal, "n1", [(path, None)], clock.ClockShift(skew_s=4), "skew")
    assert read(path) == "+4.000000 x1.000000000"
    # A process restarted while the fault is in force follows it too.
    assert clock.before_start(pool, journal, "n1", workdir, "broker-a-0") == "+4.000000 x1.000000000"
    dead = subprocess.Popen(["true"])
    dead.wait()
    clock.started(pool, "n1", workdir, dead.pid)
    shm = Path(f"/dev/shm/faketime_shm_{dead.pid}")
    shm.write_bytes(b"\0" * 8)

    report = heal(pool, journal)
    assert report.ok and read(path) == clock.TRUE_CLOCK
    assert [e.action for e in journal.pending()] == [clock.FILES_ACTION] and Path(workdir, "faketime").is_dir()
    report = heal(pool, journal, unmount=True)
    assert report.ok and not journal.pending()
    assert not Path(workdir, "faketime").exists() and not shm.exists()
    assert heal(pool, journal, unmount=True).done == []  # a healed run stays healed


def test_the_files_stay_while_a_preloaded_process_runs(tmp_path):
    pool, journal = LocalPool(), Journal(tmp_path / "journal.jsonl")
    workdir = str(tmp_path / "n1")
    entry = clock.prepare(pool, journal, "n1", workdir)
    env = {**os.environ, "FAKETIME_TIMESTAMP_FILE": clock.timestamp_file(workdir, "p")}
    alive = subprocess.Popen(["sleep", "30"], env=env)
    try:
        clock.started(pool, "n1", workdir, alive.pid)
        with pytest.raises(NucleusError, match=f"alive {alive.pid}.*stop the SUT first"):
            clock.remove(pool, journal, entry)
        assert journal.pending() == [entry]
    finally:
        alive.kill()
        alive.wait()
    clock.remove(pool, journal, entry)
    assert not journal.pending() and not Path(workdir, "faketime").exists()


def test_a_zombie_counts_as_gone_and_its_segments_are_removed(tmp_path):
    pool, journal = LocalPool(), Journal(tmp_path / "journal.jsonl")
    workdir = str(tmp_path / "n1")
    entry = clock.prepare(pool, journal, "n1", workdir)
    env = {**os.environ, "FAKETIME_TIMESTAMP_FILE": clock.timestamp_file(workdir, "p")}
    zombie = subprocess.Popen(["true"], env=env)
    try:
        while open(f"/proc/{zombie.pid}/stat").read().rsplit(") ", 1)[1][0] != "Z":
            time.sleep(0.02)
        clock.started(pool, "n1", workdir, zombie.pid)
        shm = Path(f"/dev/shm/sem.faketime_sem_{zombie.pid}")
        shm.write_bytes(b"\0" * 32)
        clock.remove(pool, journal, entry)
        assert not shm.exists() and not journal.pending()
    finally:
        zombie.wait()


# -- the faults on a context ------------------------------------------------------------------------------

def context(tmp_path, env_for=lambda name: {}) -> tuple[FaultContext, list[Proc]]:
    workdir = str(tmp_path / "n1")
    Path(workdir, "faketime").mkdir(parents=True)
    procs = [Proc(node="n1", name=name, pidfile=str(tmp_path / f"{name}.pid"), role=role,
                  env=env_for(name) | {"X": "1"})
             for name, role in (("namesrv", "namesrv"), ("broker-a-0", "broker"))]
    ctx = FaultContext(pool=LocalPool(), nodes=[Node(name="n1", host="192.0.2.1", workdir=workdir)],
                       rng=random.Random(7), journal=Journal(tmp_path / "journal.jsonl"),
                       processes=lambda node: procs, target_roles=frozenset({"broker"}))
    return ctx, procs


def preloaded(tmp_path):
    return lambda name: clock.preload_env("/lib/f.so", str(tmp_path / "n1"), name, fake_monotonic=False)


def test_a_skew_moves_only_the_target_roles_and_is_recorded(tmp_path):
    ctx, _ = context(tmp_path, preloaded(tmp_path))
    fault = registry.create("random-clock-skew", ms="1500", direction="back")
    handle = fault.start(ctx)
    broker, namesrv = (clock.timestamp_file(str(tmp_path / "n1"), n) for n in ("broker-a-0", "namesrv"))
    assert read(broker) == "-1.500000 x1.000000000" and not os.path.exists(namesrv)
    assert handle.details["clocks"] == {"n1/broker-a-0": {"spec": "-1.500000 x1.000000000", "skew_ms": -1500.0,
                                                          "rate": 1.0, "monotonic": False}}
    fault.stop(ctx, handle)
    assert read(broker) == clock.TRUE_CLOCK and not ctx.journal.pending()


def test_a_clock_fault_refuses_a_process_not_started_under_libfaketime(tmp_path):
    ctx, _ = context(tmp_path)
    with pytest.raises(FaultError, match="broker-a-0 was not started under libfaketime"):
        registry.create("random-clock-drift").start(ctx)
    assert not ctx.journal.pending()


def test_a_strobe_flips_until_stop_and_ends_on_the_true_clock(tmp_path):
    ctx, _ = context(tmp_path, preloaded(tmp_path))
    fault = registry.create("clock-strobe", ms="3000", period="1")
    broker = clock.timestamp_file(str(tmp_path / "n1"), "broker-a-0")
    handle = fault.start(ctx)
    seen = {read(broker)}
    deadline = time.monotonic() + 5
    while len(seen) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
        seen.add(read(broker))
    fault.stop(ctx, handle)
    assert seen == {"+3.000000 x1.000000000", clock.TRUE_CLOCK} and handle.flips[0] >= 1
    assert read(broker) == clock.TRUE_CLOCK and not handle.flipper.is_alive()


def test_a_strobe_healed_behind_its_back_stops_flipping(tmp_path):
    ctx, _ = context(tmp_path, preloaded(tmp_path))
    handle = registry.create("clock-strobe", ms="3000", period="1").start(ctx)
    assert heal(ctx.pool, ctx.journal).ok  # as `chaos heal` would, without the fault's stop
    handle.flipper.join(timeout=5)
    assert not handle.flipper.is_alive() and handle.flips[0] == 0
    assert read(clock.timestamp_file(str(tmp_path / "n1"), "broker-a-0")) == clock.TRUE_CLOCK


# -- the deployer ------------------------------------------------------------------------------------

def test_processes_start_exactly_as_before_unless_the_run_has_a_clock_fault(tmp_path):
    inventory = Inventory(name="planned", kind="netns",
                          nodes=[Node(name=f"n{i}", host=f"192.0.2.{i}", workdir=f"/w/n{i}") for i in range(1, 5)])
    for profile in ("controller-3", "rmq-controller-3"):
        deployer = systems.make_deployer(None, inventory, profile, tmp_path)
        deployer.pool = pool = RecordingPool()
        ref = deployer.refs[0]
        deployer.start_process(ref)
        plain = pool.started[-1]
        assert plain["argv"] == list(ref.argv) and plain["env"] == (ref.env or None)
        assert not any("FAKETIME" in key or key == "LD_PRELOAD" for key in (plain["env"] or {}))

        hooks: list[str] = []
        deployer.add_env(lambda r: clock.preload_env("/lib/f.so", "/w/" + r.node, r.name,
                                                     deployer.fake_monotonic_clock))
        deployer.before_start = lambda r: hooks.append(f"before {r.name}")
        deployer.after_start = lambda r, pid: hooks.append(f"after {r.name} {pid}")
        deployer.start_process(deployer.refs[0])
        env = pool.started[-1]["env"]
        assert pool.started[-1]["argv"] == plain["argv"] and env["LD_PRELOAD"] == "/lib/f.so"
        assert hooks == [f"before {ref.name}", f"after {ref.name} 4242"]
        # Both clocks move for both systems: the model's leases read the monotonic clock, and a
        # JVM's timed waits break under libfaketime when only its wall clock is faked.
        assert "FAKETIME_DONT_FAKE_MONOTONIC" not in env


# -- on a local cluster ------------------------------------------------------------------------------

# select, not time.sleep: under FAKETIME_DONT_FAKE_MONOTONIC libfaketime 0.9.10 fails Python's
# absolute monotonic clock_nanosleep with EINVAL (and returns a JVM's timed waits at once).
PROBE = "import select, time\nwhile True:\n    print(repr(time.time()), flush=True)\n    select.select([], [], [], 0.2)\n"


def test_a_skew_really_moves_a_process_clock_on_a_node_and_heal_leaves_nothing(netns_cluster, tmp_path):
    """A tiny python3 on the node, started under the preload as the deployer starts the SUT,
    prints time.time(): it jumps 20 s with the fault and comes back at stop; after the heal
    neither the timestamp files nor libfaketime's /dev/shm segments are left."""
    inventory, pool = netns_cluster
    node = inventory.nodes[0]
    journal = Journal(tmp_path / "journal.jsonl")
    clock.prepare(pool, journal, node.name, node.workdir)
    env = clock.preload_env(clock.find_library(pool, node.name), node.workdir, "probe", fake_monotonic=False)
    probe = Proc(node=node.name, name="probe", role="broker", pidfile=f"{node.workdir}/probe/probe.pid",
                 argv=("python3", "-c", PROBE), env=env, logfile=f"{node.workdir}/probe/probe.out")
    clock.before_start(pool, journal, node.name, node.workdir, "probe")
    pid = pool.start_detached(node.name, list(probe.argv), probe.pidfile, probe.logfile, env=probe.env)
    clock.started(pool, node.name, node.workdir, pid)
    ctx = FaultContext(pool=pool, nodes=[node], rng=random.Random(1), journal=journal,
                       processes=lambda name: [probe] if name == node.name else [])

    def ahead_s() -> float:
        time.sleep(1.5)  # the file is read again within a second, then one more print
        last = pool.read_file(node.name, probe.logfile).decode().strip().splitlines()[-1]
        return float(last) - time.time()

    try:
        assert abs(ahead_s()) < 1
        fault = registry.create("fixed-clock-skew", targets=node.name, ms="20000", direction="forward")
        handle = fault.start(ctx)
        assert handle.details["clocks"][f"{node.name}/probe"]["skew_ms"] == 20000
        assert ahead_s() == pytest.approx(20, abs=1)
        fault.stop(ctx, handle)
        assert abs(ahead_s()) < 1
    finally:
        pool.run(node.name, f"kill -9 {int(pid)}", check=False)
        time.sleep(0.3)
    shm = f"/dev/shm/faketime_shm_{pid}"
    assert pool.run(node.name, ["test", "-e", shm], check=False).exited == 0  # SIGKILL left it
    report = heal(pool, journal, unmount=True)
    assert report.ok, report.errors
    assert not journal.pending()
    left = pool.run(node.name, f"ls -d {node.workdir}/faketime {shm} /dev/shm/sem.faketime_sem_{pid} 2>/dev/null",
                    check=False).stdout.strip()
    assert left == ""
    pool.run(node.name, ["rm", "-rf", f"{node.workdir}/probe"])


def test_a_short_model_run_under_an_overlapping_clock_skew_is_valid_and_healed(netns_cluster, tmp_path):
    """The skew overlaps the windows of another fault: the run preloads its processes for a
    clock fault wherever the schedule has one."""
    from rich.console import Console

    from harness.run import RunLifecycle
    from harness.spec import build_spec

    inventory, pool = netns_cluster
    spec = build_spec({"workload": "queue", "time": 14, "interval": 5, "recovery": 8, "seed": 45, "rate": 30,
                       "inventory": inventory.source, "store": tmp_path / "store", "profile": "controller-3",
                       "faults": ["noop"], "overlap": ["random-clock-skew:ms=5000"], "targets": ["brokers"]})
    outcome = RunLifecycle(spec, Console(stderr=True, force_terminal=False), show_progress=False).execute()
    assert outcome.status == "complete", outcome.error
    run_dir = outcome.run.path
    assert outcome.valid is True, json.loads((run_dir / "results.json").read_text())["checkers"]
    starts = [json.loads(line) for line in (run_dir / "nemesis.jsonl").read_text().splitlines()]
    skews = [ev for ev in starts if ev["f"] == "random-clock-skew" and ev["value"]["phase"] == "start"]
    recorded = json.dumps(skews)
    assert "libfaketime" in recorded and "x1.000000000" in recorded, recorded[:2000]
    journal = [json.loads(line) for line in (run_dir / "journal.jsonl").read_text().splitlines()]
    applied = {e["id"] for e in journal if e["event"] == "apply"}
    assert {e["action"] for e in journal if e["event"] == "apply"} >= {clock.FILES_ACTION, clock.ACTION}
    assert applied == {e["id"] for e in journal if e["event"] == "undo"}
    for node in inventory.nodes:
        assert pool.run(node.name, ["test", "-e", f"{node.workdir}/faketime"], check=False).exited != 0


def test_a_run_preloads_its_sut_only_when_its_schedule_has_a_clock_fault(tmp_path):
    from faults.schedule import FaultSpec
    from harness.run import preload_clocks

    require(LIBRARY is not None, "needs libfaketime (Debian package libfaketime; bash scripts/setup.sh)")
    inventory = Inventory(name="planned", kind="netns", nodes=[
        Node(name=f"n{i}", host=f"192.0.2.{i}", workdir=str(tmp_path / f"n{i}")) for i in range(1, 4)])
    pool, journal = LocalPool(), Journal(tmp_path / "journal.jsonl")
    deployer = systems.make_deployer(None, inventory, "controller-3", tmp_path)
    before = list(deployer.refs)
    preload_clocks(pool, deployer, journal, [FaultSpec("leader-kill"), FaultSpec.parse("random-loss")])
    assert deployer.refs == before and [r.env for r in deployer.refs] == [r.env for r in before]
    assert deployer.before_start is None and deployer.after_start is None and not journal.entries()

    preload_clocks(pool, deployer, journal, [FaultSpec.parse("random-clock-skew:ms=500")])
    assert sorted(e.node for e in journal.pending() if e.action == clock.FILES_ACTION) == ["n1", "n2", "n3"]
    ref = deployer.refs[0]
    assert ref.env["LD_PRELOAD"] == LIBRARY and ref.env["PYTHONPATH"] == before[0].env["PYTHONPATH"]
    deployer.before_start(ref)
    assert read(ref.env["FAKETIME_TIMESTAMP_FILE"]) == clock.TRUE_CLOCK
    assert heal(pool, journal, unmount=True).ok and not (tmp_path / "n1" / "faketime").exists()


# Modules of sut/ that never run inside a node's SUT process (the control node's side).
CONTROL_SIDE = {"deploy.py", "admin.py", "local.py", "raft/localgroup.py"}


def test_the_model_processes_use_no_thread_timed_waits():
    """Under a faked monotonic clock (clock faults on the model) a thread's timed wait never
    times out: libfaketime 0.9.10 does not intercept sem_clockwait, which CPython's locks use.
    The model's processes wait with asyncio only; this keeps it so."""
    sut = Path(__file__).resolve().parent.parent / "sut"
    offenders = []
    for path in sorted(sut.rglob("*.py")):
        relative = path.relative_to(sut).as_posix()
        if relative in CONTROL_SIDE or relative.startswith("rocketmq/"):
            continue
        text = path.read_text()
        if any(word in text for word in ("import threading", "import queue", "concurrent.futures",
                                         "import multiprocessing")):
            offenders.append(relative)
    assert offenders == [], f"thread waits in the model's processes: {offenders}; use asyncio instead"
