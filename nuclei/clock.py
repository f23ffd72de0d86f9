"""Clock nuclei: move the clock one SUT process sees, through libfaketime.

A run with a clock fault starts every SUT process with libfaketime preloaded
(`preload_env`) and a timestamp file of its own, `<workdir>/faketime/<process>.rc`,
that libfaketime reads again once a second (FAKETIME_CACHE_DURATION=0: whenever the
real second changed). The file holds a FAKETIME spec, `"<offset seconds> x<rate>"`:
`+0 x1` is the true clock. A fault rewrites the files (atomically: libfaketime exits
on a spec it cannot parse, and a torn read would be one), a heal writes `+0 x1` back.
The rate is always written, because libfaketime keeps the last rate it parsed when a
spec has none.

libfaketime computes `start + offset + (now - start) * rate`, with `start` the
instant the process loaded it. A drift applied at instant A should start from the
true time, so each process gets the offset `skew + (start - A) * (rate - 1)`, with its
own start read from /proc (the node script `_WRITE`): the clock moves on from A at the
new rate instead of jumping by the drift it would have had since its start.

libfaketime 0.9.10 (Debian bookworm) keeps a small shared-memory segment and a
semaphore per process tree in /dev/shm, named by the pid that loaded it first; a
process killed with SIGKILL leaves them there. Every preloaded pid is appended to
`<workdir>/faketime/pids` when started, and the undo of `prepare` removes those pids'
segments (once the processes are gone) and the directory.
"""
from __future__ import annotations

import json
import math
import posixpath
import shlex
from dataclasses import dataclass
from typing import Any

from nuclei.journal import Journal, JournalEntry
from nuclei.remote import NucleusError, sh

FILES_ACTION = "clock-files"   # the per-process timestamp files and pid list (removed after the SUT stopped)
ACTION = "clock"               # a clock fault in force on some of those files
TRUE_CLOCK = "+0 x1"
LIBRARY_GLOB = "/usr/lib/*/faketime/libfaketimeMT.so.1"
DIRECTORY = "faketime"


@dataclass(frozen=True)
class ClockShift:
    """What a fault does to a process's clock: a jump of `skew_s` seconds and a `rate`
    (1 = true speed) from the instant it is applied."""

    skew_s: float = 0.0
    rate: float = 1.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.skew_s) and abs(self.skew_s) <= 365 * 86400):
            raise NucleusError(f"clock skew must be a finite number of seconds within a year, got {self.skew_s}")
        if not (math.isfinite(self.rate) and 0.01 <= self.rate <= 100):
            raise NucleusError(f"clock rate must be in [0.01, 100], got {self.rate}")


def directory(workdir: str) -> str:
    return posixpath.join(workdir, DIRECTORY)


def timestamp_file(workdir: str, process: str) -> str:
    """The file whose spec a process's libfaketime follows."""
    return posixpath.join(directory(workdir), f"{process}.rc")


def preload_env(library: str, workdir: str, process: str, fake_monotonic: bool) -> dict[str, str]:
    """The environment that starts a process under libfaketime, following its own file.

    `fake_monotonic` False sets FAKETIME_DONT_FAKE_MONOTONIC: only the wall clock
    (CLOCK_REALTIME) moves, as a clock stepped on a real machine does."""
    env = {"LD_PRELOAD": library, "FAKETIME_TIMESTAMP_FILE": timestamp_file(workdir, process),
           "FAKETIME_CACHE_DURATION": "0", "LC_NUMERIC": "C"}
    if not fake_monotonic:
        env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
    return env


def find_library(pool: Any, node: str) -> str:
    """Where libfaketime (the multithreaded build) is on the node; NucleusError if it is not."""
    result = sh(pool, node, f"for f in {LIBRARY_GLOB}; do [ -f \"$f\" ] && echo \"$f\" && break; done")
    path = result.stdout.strip().splitlines()[0] if result.stdout.strip() else ""
    if result.exited != 0 or not path:
        raise NucleusError(f"node {node}: libfaketime is not installed ({LIBRARY_GLOB} not found); clock "
                           "faults need the Debian package libfaketime (scripts/setup.sh installs it)")
    return path


# Runs on the node (python3 is there for the SUT): write specs atomically, read them back.
# argv[1] is JSON: {"files": [[path, pidfile or null], ...], "skew": s, "rate": r,
# "applied_at": epoch or null (now)}; a process not running gets its start = now.
_WRITE = r"""
import json, os, sys, time
job = json.loads(sys.argv[1])
now = time.time()
applied = job.get("applied_at") or now
def started(pidfile):
    try:
        pid = int(open(pidfile).read().strip() or 0)
        ticks = int(open(f"/proc/{pid}/stat").read().rsplit(") ", 1)[1].split()[19])
        btime = next(int(l.split()[1]) for l in open("/proc/stat") if l.startswith("btime "))
        return btime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return now
out = {}
for path, pidfile in job["files"]:
    rate, skew = float(job["rate"]), float(job["skew"])
    start = started(pidfile) if pidfile else now
    offset = skew + (start - applied) * (rate - 1.0)
    spec = "+0 x1" if rate == 1.0 and skew == 0.0 else "%+.6f x%.9f" % (offset, rate)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(spec + "\n")
    os.replace(tmp, path)
    out[path] = open(path).read().strip()
print(json.dumps({"applied_at": applied, "specs": out}))
"""


def write(pool: Any, node: str, files: list[tuple[str, str | None]], shift: ClockShift,
          applied_at: float | None = None) -> dict[str, Any]:
    """Write the shift's spec into each (timestamp file, pidfile); returns
    {"applied_at": epoch, "specs": {file: spec read back}}. Not journaled: callers journal."""
    job = {"files": [list(pair) for pair in files], "skew": shift.skew_s, "rate": shift.rate,
           "applied_at": applied_at}
    result = sh(pool, node, shlex.join(["python3", "-c", _WRITE, json.dumps(job)]), timeout=30)
    try:
        reply = json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        reply = None
    if result.exited != 0 or not isinstance(reply, dict):
        raise NucleusError(f"node {node}: cannot write the clock files {', '.join(f for f, _ in files)}: "
                           f"{(result.stderr or result.stdout).strip()[-300:]}")
    return reply


def before_start(pool: Any, journal: Journal, node: str, workdir: str, process: str) -> str:
    """Write the spec a process starting now follows: that of the clock fault in force on its
    file (drift counted from the fault's start), else the true clock; returns it."""
    path = timestamp_file(workdir, process)
    active = [entry for entry in journal.pending()
              if entry.action == ACTION and entry.node == node and path in (entry.params.get("files") or ())]
    if not active:
        return write(pool, node, [(path, None)], ClockShift())["specs"][path]
    latest = active[-1]
    how = ClockShift(float(latest.params.get("skew_s", 0.0)), float(latest.params.get("rate", 1.0)))
    return write(pool, node, [(path, None)], how, applied_at=latest.time)["specs"][path]


def prepare(pool: Any, journal: Journal, node: str, workdir: str) -> JournalEntry:
    """Make the node's timestamp-file directory (journaled first; undone after the SUT stopped)."""
    entry = journal.record(FILES_ACTION, node, workdir=workdir, directory=directory(workdir))
    result = sh(pool, node, shlex.join(["mkdir", "-p", directory(workdir)]))
    if result.exited != 0:
        raise NucleusError(f"node {node}: cannot make {directory(workdir)}: {result.stderr.strip()[:200]}")
    return entry


def started(pool: Any, node: str, workdir: str, pid: int) -> None:
    """Note a preloaded process's pid: its libfaketime segments in /dev/shm are removed at the end."""
    pids = posixpath.join(directory(workdir), "pids")
    result = sh(pool, node, f"echo {int(pid)} >> {shlex.quote(pids)}")
    if result.exited != 0:
        raise NucleusError(f"node {node}: cannot note pid {pid} in {pids}: {result.stderr.strip()[:200]}")


def shift(pool: Any, journal: Journal, node: str, files: list[tuple[str, str | None]], how: ClockShift,
          kind: str) -> tuple[JournalEntry, dict[str, Any]]:
    """Put a clock shift in force on the given processes' files (journaled first); returns the
    entry and what was written (applied_at, each file's spec)."""
    entry = journal.record(ACTION, node, kind=kind, files=[f for f, _ in files],
                           skew_s=how.skew_s, rate=how.rate)
    return entry, write(pool, node, files, how)


def undo(pool: Any, journal: Journal, entry: JournalEntry) -> list[str]:
    """Write the true clock back into the entry's files (those still there) and verify it;
    returns the files reset."""
    files = [str(f) for f in entry.params.get("files") or []]
    script = ("import json,os,sys\nout=[]\nfor p in json.loads(sys.argv[1]):\n"
              "    if not os.path.isdir(os.path.dirname(p)): continue\n"
              f"    open(p+'.tmp','w').write({TRUE_CLOCK!r}+'\\n'); os.replace(p+'.tmp', p)\n"
              f"    assert open(p).read().strip() == {TRUE_CLOCK!r}, p\n    out.append(p)\n"
              "print(json.dumps(out))\n")
    result = sh(pool, entry.node, shlex.join(["python3", "-c", script, json.dumps(files)]))
    if result.exited != 0:
        raise NucleusError(f"node {entry.node}: cannot reset the clock files {', '.join(files)}: "
                           f"{(result.stderr or result.stdout).strip()[-300:]}")
    journal.mark_undone(entry)
    return json.loads(result.stdout.strip().splitlines()[-1]) if result.stdout.strip() else []


# Removes the libfaketime segments of noted pids that are gone (or zombies), then the
# directory; exits 3 naming a noted pid still alive (its process still follows a file here).
_REMOVE = r"""
dir=%(dir)s
[ -d "$dir" ] || exit 0
if [ -f "$dir/pids" ]; then
  for pid in $(tr -dc '0-9\n' < "$dir/pids" | sort -u); do
    st=$(cat "/proc/$pid/stat" 2>/dev/null) && st=${st##*") "} && [ "${st%%%% *}" != Z ] && {
      # one of ours still runs: refuse; a pid reused by a stranger keeps its segments
      if tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qF "FAKETIME_TIMESTAMP_FILE=$dir/"; then
        echo "alive $pid"; exit 3
      fi
      continue
    }
    rm -f "/dev/shm/faketime_shm_$pid" "/dev/shm/sem.faketime_sem_$pid"
  done
fi
rm -rf "$dir"
"""


def remove(pool: Any, journal: Journal, entry: JournalEntry) -> None:
    """Undo `prepare`: remove the timestamp files and the noted pids' /dev/shm segments.
    Refused while a process still follows a file there (stop the SUT first)."""
    folder = entry.params["directory"]
    result = sh(pool, entry.node, _REMOVE % {"dir": shlex.quote(folder)})
    if result.exited != 0:
        what = result.stdout.strip() or result.stderr.strip()[:200]
        raise NucleusError(f"node {entry.node}: cannot remove the clock files in {folder} ({what}); "
                           "a preloaded SUT process still runs: stop the SUT first")
    journal.mark_undone(entry)


__all__ = ["ACTION", "FILES_ACTION", "TRUE_CLOCK", "ClockShift", "before_start", "directory", "find_library", "preload_env",
           "prepare", "remove", "shift", "started", "timestamp_file", "undo", "write"]
