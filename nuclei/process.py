"""Process nuclei: kill with a signal and start again, pause (SIGSTOP) and resume (SIGCONT).

A process is found by its pidfile, and the pid is trusted only if its command
line still matches what was started (argv) - on the local cluster all nodes
share one PID namespace, so a stale pidfile could otherwise name a stranger.
Its start time (field 22 of /proc/PID/stat) is journaled with the pid, so a
heal never signals a process that merely reuses the pid.
"""
from __future__ import annotations

import os
import shlex
import signal as signals
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from nuclei.journal import Journal, JournalEntry
from nuclei.remote import NucleusError, sh

# argv words travel on one output line: NUL -> SEPARATOR, newline -> NEWLINE.
SEPARATOR, NEWLINE = "\x1f", "\x1e"


class ProcessRef(Protocol):
    """What the nuclei need to know about a process (sut.deploy.ProcessRef fits)."""

    node: str
    name: str
    pidfile: str | None
    argv: Sequence[str]


@dataclass(frozen=True)
class Proc:
    """A process description for callers without a deployer (tests, `chaos heal`).

    `pattern` finds processes whose command line contains it, for programs
    without a pidfile; on a node that shares its PID namespace with others it
    must contain the node's own workdir, so it cannot match another node.
    """

    node: str
    name: str
    pidfile: str | None = None
    argv: tuple[str, ...] = ()
    role: str = ""
    pattern: str | None = None
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    logfile: str | None = None


@dataclass(frozen=True)
class ProcessState:
    """One live process as /proc shows it."""

    pid: int
    state: str  # R, S, D, T (stopped), Z (zombie), ...
    starttime: int
    cmdline: tuple[str, ...]

    @property
    def stopped(self) -> bool:
        return self.state in ("T", "t")


class ProcessNotRunning(NucleusError):
    """The process to act on is not running (no pidfile, or its pid is gone)."""


# Signals whose default action does not end a process (stop, continue, ignore):
# a "kill" with one of them would be recorded while nothing died.
NON_FATAL = frozenset({"STOP", "TSTP", "TTIN", "TTOU", "CONT", "CHLD", "URG", "WINCH"})


def signal_name(value: int | str, fatal: bool = False) -> str:
    """The name (`KILL`, `TERM`, ...) of a signal given by number or name, from the
    real signal table; with `fatal`, only signals whose default action ends a process.

    Raises ValueError naming what is allowed: the value never reaches a shell
    unless it is one of the table's names.
    """
    number = value if isinstance(value, int) and not isinstance(value, bool) else None
    if number is None and isinstance(value, str):
        text = value.strip().upper()
        number = int(text) if text.isdigit() else getattr(signals.Signals, text if text.startswith("SIG")
                                                          else f"SIG{text}", None)
    try:
        name = signals.Signals(number).name.removeprefix("SIG") if number is not None else None
    except ValueError:
        name = None
    allowed = allowed_signals(fatal)
    if name not in allowed:
        raise ValueError(f"{value!r} is not a signal{' that ends a process' if fatal else ''}; "
                         f"allowed: a number or one of {', '.join(allowed)}")
    return name


def allowed_signals(fatal: bool = False) -> list[str]:
    """Signal names of the real table (numbers order), only fatal ones with `fatal`."""
    names = [sig.name.removeprefix("SIG") for sig in sorted(set(signals.Signals), key=int)]
    return [name for name in names if not (fatal and name in NON_FATAL)]


# Shell helper: prints "STATE STARTTIME" of a pid. The command name in
# /proc/PID/stat may hold spaces and parentheses, so cut after the last ") ".
_PSTAT = ('pstat() { st=$(cat /proc/$1/stat 2>/dev/null) || return 1; rest=${st##*") "}; '
          'set -- $rest; echo "$1 ${20}"; }')

_INSPECT_PIDFILE = _PSTAT + r"""
pf=%(pidfile)s
[ -e "$pf" ] || { echo none; exit 0; }
pid=$(head -c 32 "$pf" | tr -dc 0-9)
[ -n "$pid" ] || { echo none; exit 0; }
s=$(pstat "$pid") || { echo none; exit 0; }
printf 'P %%s %%s ' "$pid" "$s"
tr '\0\n' '\037\036' < /proc/$pid/cmdline
echo
"""

# Pattern search needs a real fixed-string match over every /proc entry and
# must skip its own ancestors (their argv holds the pattern): python3 is on
# every node anyway (the SUT needs it).
_INSPECT_PATTERN = r"""
import os, sys
pattern, exclude = sys.argv[1], {int(p) for p in sys.argv[2].split(",") if p}
def stat(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(") ", 1)[1].split()
pid = os.getpid()
while pid > 1:
    exclude.add(pid)
    pid = int(stat(pid)[1])
for entry in os.listdir("/proc"):
    if not entry.isdigit() or int(entry) in exclude:
        continue
    try:
        with open(f"/proc/{entry}/cmdline", "rb") as f:
            argv = f.read().rstrip(b"\0").decode(errors="replace").split("\0")
        fields = stat(entry)
    except OSError:
        continue
    if argv != [""] and pattern in " ".join(argv):
        print("P", entry, fields[0], fields[19], "\x1f".join(argv).replace("\n", "\x1e"))
"""

_SIGNAL_AND_WAIT = _PSTAT + r"""
pid=%(pid)d; want=%(starttime)d
s=$(pstat $pid) || { echo gone; exit 0; }
set -- $s
[ "$2" = "$want" ] || { echo gone; exit 0; }
kill -%(signal)d $pid 2>/dev/null || { echo gone; exit 0; }
i=0
while s=$(pstat $pid); do
  set -- $s
  [ "$2" = "$want" ] || { echo gone; exit 0; }
  %(done_test)s
  i=$((i+1)); [ $i -gt %(polls)d ] && { echo "timeout state=$1"; exit 3; }
  sleep 0.005
done
echo gone
"""

# When the wait loop above may stop: the state each action waits for.
_DONE_TEST = {
    "gone": '[ "$1" = Z ] && { echo gone; exit 0; }',
    "stopped": 'case "$1" in T|t) echo ok; exit 0;; esac',
    "running": 'case "$1" in T|t) ;; *) echo ok; exit 0;; esac',
}


def node_name(proc: ProcessRef) -> str:
    """The node a process runs on, as a name (a ProcessRef may carry a Node)."""
    return str(getattr(proc.node, "name", proc.node))


def inspect(pool: Any, proc: ProcessRef, exclude: Sequence[int] = ()) -> list[ProcessState]:
    """The live processes `proc` names (one for a pidfile), checked against its argv.

    Raises NucleusError when a pidfile names a pid running something else.
    """
    pidfile = getattr(proc, "pidfile", None)
    pattern = getattr(proc, "pattern", None)
    if pidfile:
        result = sh(pool, node_name(proc), _INSPECT_PIDFILE % {"pidfile": shlex.quote(str(pidfile))})
    elif pattern:
        _check_pattern_is_node_scoped(pool, node_name(proc), pattern)
        own = [os.getpid(), os.getppid(), *exclude]
        result = sh(pool, node_name(proc), shlex.join(
            ["python3", "-c", _INSPECT_PATTERN, pattern, ",".join(map(str, own))]))
    else:
        raise NucleusError(f"process {proc.name} on {node_name(proc)}: "
                           f"neither a pidfile nor a pattern to find it")
    if result.exited != 0:
        raise NucleusError(f"node {node_name(proc)}: cannot inspect process {proc.name}: "
                           f"{(result.stderr or result.stdout).strip()[:200]}")
    states = [_parse_state(line) for line in result.stdout.split("\n") if line.startswith("P ")]
    if pidfile:
        for state in states:
            _check_identity(proc, state)
    return states


def kill(pool: Any, journal: Journal, proc: ProcessRef, signal: int | str = 9,
         timeout: float = 10.0) -> list[JournalEntry]:
    """Send `signal` (9 by default) and verify the process is gone; journaled first."""
    name = _checked_signal(signal, fatal=True)
    states = _running(pool, proc)
    entries = []
    for state in states:
        entry = journal.record("kill", node_name(proc), signal=name, **_identity(proc, state),
                               **_start_facts(proc))
        _signal(pool, proc, state, name, "gone", timeout)
        entries.append(entry)
    return entries


def restart(pool: Any, journal: Journal, entry: JournalEntry,
            start: Callable[[Any], Any] | None = None, proc: ProcessRef | None = None,
            timeout: float = 30.0) -> ProcessState | None:
    """Undo a kill: start the process again (deployer hook, else the journaled argv)
    unless it already runs, verify a new process is up, mark the entry undone."""
    ref = proc if proc is not None else proc_from_entry(entry)
    original = _undelivered(pool, ref, entry)
    if original is not None:
        # The harness died (or the node was unreachable) between journaling and signalling:
        # starting another would fail its lock and orphan the original behind a new pidfile.
        journal.mark_undone(entry, restarted=False, pid=original.pid,
                            reason="the kill was never delivered: the original still runs")
        return original
    current = _live_replacement(pool, ref, entry)
    if current is None:
        if start is not None:
            start(ref)
        elif entry.params.get("argv") and getattr(ref, "pidfile", None):
            _start_detached(pool, ref)
        else:
            journal.mark_undone(entry, restarted=False, reason="no start command known")
            return None
        current = _wait_for(lambda: _live_replacement(pool, ref, entry), timeout,
                            f"node {entry.node}: process {entry.params.get('name')} did not come back "
                            f"within {timeout:g} s after restart")
    journal.mark_undone(entry, restarted=True, pid=current.pid)
    return current


def pause(pool: Any, journal: Journal, proc: ProcessRef, timeout: float = 10.0) -> list[JournalEntry]:
    """SIGSTOP the process and verify it is stopped (state T); journaled first."""
    states = _running(pool, proc)
    entries = []
    for state in states:
        entry = journal.record("pause", node_name(proc), **_identity(proc, state))
        if _signal(pool, proc, state, "STOP", "stopped", timeout) == "gone":
            journal.mark_undone(entry, reason="exited before SIGSTOP")
            raise ProcessNotRunning(f"node {node_name(proc)}: process {proc.name} (pid {state.pid}) "
                                    f"exited before SIGSTOP took effect")
        entries.append(entry)
    return entries


def resume(pool: Any, journal: Journal, entry: JournalEntry, timeout: float = 10.0) -> None:
    """SIGCONT a paused process (only if its start time still matches) and verify it runs;
    a process that is gone meanwhile (killed while paused) needs nothing."""
    state = ProcessState(entry.params["pid"], "T", entry.params["starttime"], ())
    ref = proc_from_entry(entry)
    outcome = _signal(pool, ref, state, "CONT", "running", timeout)
    journal.mark_undone(entry, **({"reason": "process gone"} if outcome == "gone" else {}))


# A pid is trusted only if its argv names the directory (PIDs are shared by local nodes).
_RESUME_STOPPED = _PSTAT + r"""
dir=%(directory)s; dir=${dir%%/}
find "$dir" -name '*.pid' -type f 2>/dev/null | while read -r pf; do
  pid=$(head -c 32 "$pf" | tr -dc 0-9); [ -n "$pid" ] || continue
  s=$(pstat "$pid") || continue; set -- $s
  argv=$(tr '\0' '\n' 2>/dev/null </proc/"$pid"/cmdline) || continue
  # the directory itself or a path under it: /w/n1 is not /w/n10
  printf '%%s\n' "$argv" | grep -qF -- "$dir/" || printf '%%s\n' "$argv" | grep -qxF -- "$dir" || continue
  case "$1" in T|t) kill -CONT "$pid" && echo "$pid $pf";; esac
done
"""


def resume_stopped_under(pool: Any, node: str, directory: str) -> list[str]:
    """SIGCONT every stopped process named by a pidfile under `directory` (a heal
    without a journal); returns "pid pidfile" for each one resumed."""
    result = sh(pool, node, _RESUME_STOPPED % {"directory": shlex.quote(directory)})
    if result.exited != 0:
        raise NucleusError(f"node {node}: cannot look for stopped processes under {directory}: "
                           f"{result.stderr.strip()[:200]}")
    return [line for line in result.stdout.splitlines() if line.strip()]


def proc_from_entry(entry: JournalEntry) -> Proc:
    """The process description a journal entry keeps (for a heal without a deployer)."""
    params = entry.params
    return Proc(node=entry.node, name=params.get("name", "?"), pidfile=params.get("pidfile"),
                argv=tuple(params.get("argv") or ()), role=params.get("role", ""),
                pattern=params.get("pattern"), cwd=params.get("cwd"), env=params.get("env") or {},
                logfile=params.get("logfile"))


def _running(pool: Any, proc: ProcessRef) -> list[ProcessState]:
    states = [state for state in inspect(pool, proc) if state.state != "Z"]
    if not states:
        where = getattr(proc, "pidfile", None) or f"pattern {getattr(proc, 'pattern', None)!r}"
        raise ProcessNotRunning(f"node {node_name(proc)}: process {proc.name} is not running ({where})")
    return states


def _checked_signal(signal: int | str, fatal: bool = False) -> str:
    try:
        return signal_name(signal, fatal)
    except ValueError as error:
        raise NucleusError(f"signal {error}") from None


def _signal(pool: Any, proc: ProcessRef, state: ProcessState, signal: int | str, wait_for: str,
            timeout: float) -> str:
    """Signal the pid (if its start time still matches) and wait for the state;
    returns "ok" (state reached) or "gone" (the process no longer exists)."""
    name = _checked_signal(signal)
    script = _SIGNAL_AND_WAIT % {"pid": int(state.pid), "starttime": int(state.starttime),
                                 "signal": int(signals.Signals[f"SIG{name}"]),
                                 "done_test": _DONE_TEST[wait_for], "polls": int(timeout / 0.006) + 1}
    result = sh(pool, node_name(proc), script, timeout=timeout + 15)
    out = result.stdout.strip()
    if result.exited != 0 or out not in ("gone", "ok"):
        raise NucleusError(f"node {node_name(proc)}: SIG{name} to {proc.name} (pid {state.pid}) did not "
                           f"take effect: {out or result.stderr.strip()[:200]}")
    return out


def _identity(proc: ProcessRef, state: ProcessState) -> dict[str, Any]:
    pidfile = getattr(proc, "pidfile", None)
    return {"name": proc.name, "role": getattr(proc, "role", ""), "pidfile": pidfile and str(pidfile),
            "pattern": getattr(proc, "pattern", None), "argv": list(getattr(proc, "argv", ()) or ()),
            "pid": state.pid, "starttime": state.starttime}


def _start_facts(proc: ProcessRef) -> dict[str, Any]:
    """What a heal without the deployer needs to start the process again."""
    return {"cwd": getattr(proc, "cwd", None), "env": dict(getattr(proc, "env", None) or {}),
            "logfile": getattr(proc, "logfile", None)}


def _live_states(pool: Any, proc: ProcessRef, entry: JournalEntry) -> list[tuple[bool, ProcessState]]:
    """(is the one the entry killed, state) of each live process for `proc`."""
    try:
        states = inspect(pool, proc)
    except NucleusError:
        return []
    return [(state.pid == entry.params.get("pid") and state.starttime == entry.params.get("starttime"), state)
            for state in states if state.state != "Z"]


def _live_replacement(pool: Any, proc: ProcessRef, entry: JournalEntry) -> ProcessState | None:
    """A live process for `proc` that is not the one the entry killed."""
    return next((state for killed, state in _live_states(pool, proc, entry) if not killed), None)


def _undelivered(pool: Any, proc: ProcessRef, entry: JournalEntry) -> ProcessState | None:
    """The very process the entry meant to kill (same pid and start time), still alive."""
    return next((state for killed, state in _live_states(pool, proc, entry) if killed), None)


def _start_detached(pool: Any, proc: Proc) -> None:
    logfile = proc.logfile or f"{proc.pidfile}.restart.log"
    pool.start_detached(proc.node, list(proc.argv), proc.pidfile, logfile, cwd=proc.cwd,
                        env=proc.env or None)


def _wait_for(probe: Callable[[], Any], timeout: float, message: str) -> Any:
    deadline = time.monotonic() + timeout
    delay = 0.02
    while True:
        value = probe()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise NucleusError(message)
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


def _parse_state(line: str) -> ProcessState:
    _, pid, state, starttime, *rest = line.split(" ", 4)
    words = rest[0].rstrip(SEPARATOR).split(SEPARATOR) if rest and rest[0] else []
    cmdline = tuple(word.replace(NEWLINE, "\n") for word in words)
    return ProcessState(int(pid), state, int(starttime), cmdline)


def _check_identity(proc: ProcessRef, state: ProcessState) -> None:
    """The pid must run the expected argv: its words after the program, in order
    (the program itself may show up resolved, e.g. python3 -> /usr/bin/python3)."""
    argv = list(getattr(proc, "argv", ()) or ())
    if not argv or state.state == "Z":
        return
    words = list(state.cmdline)
    if len(argv) > 1:
        tail = argv[1:]
        matches = any(words[i:i + len(tail)] == tail for i in range(len(words) - len(tail) + 1))
    else:
        matches = bool(words) and os.path.basename(words[0]) == os.path.basename(argv[0])
    if not matches:
        raise NucleusError(
            f"node {node_name(proc)}: pidfile {proc.pidfile} names pid {state.pid} running "
            f"{' '.join(words)[:120]!r}, not {shlex.join(argv)[:120]!r}; refusing to signal it")


def _check_pattern_is_node_scoped(pool: Any, node_name: str, pattern: str) -> None:
    node = _node(pool, node_name)
    if node is not None and getattr(node, "netns", None) and node.workdir not in pattern:
        raise NucleusError(
            f"node {node_name}: pattern {pattern!r} could match other nodes' processes (all local "
            f"nodes share one PID namespace); include the node's workdir {node.workdir}")


def _node(pool: Any, name: str) -> Any:
    inventory = getattr(pool, "inventory", None)
    if inventory is None:
        return None
    return next((node for node in inventory.nodes if node.name == name), None)
