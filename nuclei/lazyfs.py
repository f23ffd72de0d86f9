"""Crash file system nuclei: mount a lazyfs under a node's data directory, make
it lose every unsynced write (a machine crash), unmount it and verify it is gone.

The FUSE program (nuclei/lazyfs_node.py) and the `mfusepy` binding are
uploaded to `<workdir>/lazyfs/lib/` and run with the node's system `python3`
(stdlib + the binding, like the SUT); the node needs Debian's `fuse3`
(libfuse3 and fusermount3), /dev/fuse and root. The mount is journaled before
it is made, so `heal` unmounts it even after the harness was killed.
"""
from __future__ import annotations

import json
import posixpath
import shlex
import time
from pathlib import Path
from typing import Any

from nuclei.journal import Journal, JournalEntry
from nuclei.remote import NucleusError, sh

NODE_PROGRAM = Path(__file__).with_name("lazyfs_node.py")
NODE_MODULES = (Path(__file__).with_name("diskfault_node.py"),)  # what the program imports
MOUNT_TIMEOUT_S = 20.0

# A daemon is alive if /proc shows it and it is not a zombie (the node's init
# may not reap it) and its argv names our mountpoint (pids are reused).
_DAEMON = r"""
mp=%(mountpoint)s; pf=%(pidfile)s
pid=$(head -c 32 "$pf" 2>/dev/null | tr -dc 0-9)
alive() {
  [ -n "$pid" ] || return 1
  st=$(cat /proc/$pid/stat 2>/dev/null) || return 1
  rest=${st##*") "}; set -- $rest; [ "$1" != Z ] || return 1
  tr '\0' ' ' < /proc/$pid/cmdline 2>/dev/null | grep -qF -- "--mountpoint $mp "
}
"""

_UNMOUNT = _DAEMON + r"""
fusermount3 -u "$mp" 2>/dev/null || fusermount3 -u -z "$mp" 2>/dev/null
i=0; while alive && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
alive && kill -9 "$pid" 2>/dev/null
i=0; while alive && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
alive && echo "daemon=alive" || echo "daemon=gone"
"""

_RUNNING = _DAEMON + r"""
alive && echo yes || echo no
"""


def state_dir(workdir: str) -> str:
    """Where a node keeps the lazyfs program, its live tree and durable image."""
    return posixpath.join(workdir, "lazyfs")


def _lib(workdir: str) -> str:
    return posixpath.join(state_dir(workdir), "lib")


def _program(workdir: str, command: str, mountpoint: str, *extra: str) -> list[str]:
    return ["python3", posixpath.join(_lib(workdir), NODE_PROGRAM.name), command,
            "--mountpoint", mountpoint, *extra]


def install(pool: Any, node: str, workdir: str) -> None:
    """Upload the FUSE program and the binding to the node."""
    import mfusepy  # the binding the node runs: the harness's own copy
    lib = _lib(workdir)
    pool.run(node, ["mkdir", "-p", lib])
    for path in (NODE_PROGRAM, *NODE_MODULES):
        pool.put(node, path, posixpath.join(lib, path.name))
    pool.put(node, mfusepy.__file__, posixpath.join(lib, "mfusepy.py"))


def mounted(pool: Any, node: str, workdir: str, mountpoint: str) -> bool:
    """Is a lazyfs mounted at `mountpoint` on the node (in its mount namespace)?"""
    if not _installed(pool, node, workdir):
        return False  # never mounted by us here
    result = sh(pool, node, shlex.join(_program(workdir, "mounted", mountpoint)))
    if result.exited != 0 or result.stdout.strip() not in ("yes", "no"):
        raise NucleusError(f"node {node}: cannot tell whether {mountpoint} is mounted: "
                           f"{(result.stderr or result.stdout).strip()[:200]}")
    return result.stdout.strip() == "yes"


def mount(pool: Any, journal: Journal, node: str, workdir: str, mountpoint: str,
          dirty_expire: float | None = None) -> JournalEntry:
    """Mount a fresh lazyfs at `mountpoint` (journaled first) and wait until it serves.

    With `dirty_expire` (seconds) the daemon writes back what has been dirty that long,
    as a kernel's flusher does; without, only an fsync makes data durable (LazyFS's model).
    The journal entry records which (`dirty_expire_s`). A lazyfs a killed run left at the
    same place is unmounted first.
    """
    install(pool, node, workdir)
    base = state_dir(workdir)
    pidfile, logfile = _pidfile(workdir), posixpath.join(base, "lazyfs.log")
    _unmount_script(pool, node, mountpoint, pidfile)
    if mounted(pool, node, workdir, mountpoint):
        raise NucleusError(f"node {node}: {mountpoint} still has a lazyfs mounted that cannot be removed")
    state = posixpath.join(base, "state")
    made = sh(pool, node, f"rm -rf {shlex.quote(state)} && mkdir -p {shlex.quote(mountpoint)}")
    if made.exited != 0:
        raise NucleusError(f"node {node}: cannot make the lazyfs mountpoint {mountpoint}: "
                           f"{made.stderr.strip()[-200:]}")
    entry = journal.record("mount", node, mountpoint=mountpoint, workdir=workdir, pidfile=pidfile,
                           logfile=logfile, dirty_expire_s=dirty_expire)
    writeback = () if dirty_expire is None else ("--dirty-expire", repr(float(dirty_expire)))
    pool.start_detached(node, [*_program(workdir, "serve", mountpoint, "--state", state, *writeback)],
                        pidfile, logfile, cwd=base, env={"PYTHONPATH": _lib(workdir)})
    deadline = time.monotonic() + MOUNT_TIMEOUT_S
    while not mounted(pool, node, workdir, mountpoint):
        died = not daemon_running(pool, node, workdir, mountpoint)
        if died or time.monotonic() > deadline:
            why = "its daemon exited" if died else f"not mounted within {MOUNT_TIMEOUT_S:g} s"
            tail = _tail(pool, node, logfile)
            try:
                unmount(pool, journal, entry)
            except NucleusError:
                pass  # the heal at the end retries; the mount error matters here
            raise NucleusError(f"node {node}: lazyfs did not mount at {mountpoint} ({why}): {tail}")
        time.sleep(0.1)
    return entry


def unmount(pool: Any, journal: Journal, entry: JournalEntry) -> None:
    """Unmount a journaled lazyfs (lazily if busy), stop its daemon, verify both gone."""
    params = entry.params
    daemon = _unmount_script(pool, entry.node, params["mountpoint"], params["pidfile"])
    if daemon != "gone" or mounted(pool, entry.node, params["workdir"], params["mountpoint"]):
        raise NucleusError(f"node {entry.node}: lazyfs at {params['mountpoint']} is still mounted "
                           f"or its daemon still runs (daemon {daemon})")
    journal.mark_undone(entry)


def sweep(pool: Any, node: str, workdir: str) -> list[str]:
    """Unmount a lazyfs on the node's data root without a journal (`chaos heal
    --inventory`); returns one line per mount removed."""
    mountpoint = data_mountpoint(workdir)
    if not (mounted(pool, node, workdir, mountpoint) or daemon_running(pool, node, workdir, mountpoint)):
        return []
    daemon = _unmount_script(pool, node, mountpoint, _pidfile(workdir))
    if daemon != "gone" or mounted(pool, node, workdir, mountpoint):
        raise NucleusError(f"node {node}: lazyfs at {mountpoint} is still mounted or its daemon still runs")
    return [f"{node}: unmounted the crash file system at {mountpoint}"]


def data_mountpoint(workdir: str) -> str:
    """Where the run mounts the crash file system: the node's data root (the same
    place as sut.deploy.Placement.data_root; nuclei may not import sut)."""
    return posixpath.join(workdir, "data")


def lose_unsynced(pool: Any, node: str, workdir: str, mountpoint: str,
                  torn_seed: int | None = None) -> dict[str, Any]:
    """Drop every write, create and rename not yet fsynced; returns what was lost. With
    `torn_seed`, each file first keeps a seeded prefix of its last unsynced range (a torn
    write); the reply's `torn` lists them (file, offset, bytes kept and lost)."""
    extra = () if torn_seed is None else ("--torn-seed", str(int(torn_seed)))
    return ask(pool, node, workdir, mountpoint, "lose", *extra)


def status(pool: Any, node: str, workdir: str, mountpoint: str, writeback: bool = False) -> dict[str, Any]:
    """Unsynced files and bytes right now, and the losses so far; with `writeback`, dirty
    pages of memory-mapped files (RocketMQ's commitlog) are written to the daemon first,
    so that they count (as unsynced: a writeback is no fsync)."""
    return ask(pool, node, workdir, mountpoint, "status", *(["--writeback"] if writeback else []))


def ask(pool: Any, node: str, workdir: str, mountpoint: str, command: str, *extra: str) -> dict[str, Any]:
    """One command to the daemon of `mountpoint` (lazyfs_node.py's commands); its JSON reply."""
    result = sh(pool, node, shlex.join(_program(workdir, command, mountpoint, *extra)), timeout=120)
    try:
        reply = json.loads(result.stdout)
    except ValueError:
        reply = None
    if result.exited != 0 or not isinstance(reply, dict) or not reply.get("ok"):
        why = reply.get("error") if isinstance(reply, dict) and reply.get("error") else (result.stderr or result.stdout)
        raise NucleusError(f"node {node}: lazyfs {command} at {mountpoint} failed: {str(why).strip()[:200]}")
    reply.pop("ok")
    return reply


def _unmount_script(pool: Any, node: str, mountpoint: str, pidfile: str) -> str:
    result = sh(pool, node, _UNMOUNT % {"mountpoint": shlex.quote(mountpoint),
                                        "pidfile": shlex.quote(pidfile)}, timeout=60)
    facts = dict(line.split("=", 1) for line in result.stdout.split() if "=" in line)
    return facts.get("daemon", "unknown")


def daemon_running(pool: Any, node: str, workdir: str, mountpoint: str) -> bool:
    """Does the lazyfs daemon of `mountpoint` still run on the node?"""
    result = sh(pool, node, _RUNNING % {"mountpoint": shlex.quote(mountpoint),
                                        "pidfile": shlex.quote(_pidfile(workdir))})
    return result.stdout.strip() == "yes"


def _installed(pool: Any, node: str, workdir: str) -> bool:
    program = posixpath.join(_lib(workdir), NODE_PROGRAM.name)
    return sh(pool, node, f"test -f {shlex.quote(program)}").exited == 0


def _pidfile(workdir: str) -> str:
    return posixpath.join(state_dir(workdir), "lazyfs.pid")


def _tail(pool: Any, node: str, path: str) -> str:
    result = sh(pool, node, f"tail -n 5 {shlex.quote(path)} 2>/dev/null")
    return " | ".join(result.stdout.strip().splitlines())[-300:] or "no output"
