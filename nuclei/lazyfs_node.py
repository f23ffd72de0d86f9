"""The crash file system that runs on a node (the idea of Jepsen's LazyFS).

A FUSE pass-through over `<state>/live` that also keeps a second, *durable*
image of the tree: what a machine would still have after losing power. Every
write goes to the live tree at once (so reads see it) and is remembered as a
dirty byte range; `fsync`/`fdatasync` of a file copies its dirty ranges into
the durable image; `fsync` of a directory makes its current entries (creates,
renames, unlinks, mkdirs) durable. The `lose` command rebuilds the live tree
from the durable image: every write, create and rename not yet synced is gone.
`lose --torn-seed N` is a power loss in the middle of writeback: before the
rebuild, each file with unsynced writes (and a durable name) keeps a seeded
prefix of its last unsynced byte range, so it can end in a partial record.

That durable image is LazyFS's strict model: nothing is durable before an fsync.
`serve --dirty-expire S` adds what a Linux kernel does on its own: a flusher thread
wakes every min(5, S) seconds (`dirty_writeback_centisecs`) and writes back, as an
fsync would, every file whose first unsynced change is at least S seconds old (the
inode's `dirtied_when` against `dirty_expire_centisecs`: written back whole, then
clean until its next write), and makes durable every directory whose entries
changed at least S seconds ago. The flusher is the kernel, not the application:
it bypasses the injected disk faults (an fsync rule does not fail it, a slow rule
does not delay it), so with both on, data whose fsync failed still becomes durable
at its expiry (a real kernel may drop pages whose writeback failed).

Run on the node with its system `python3` and the uploaded `mfusepy` module
(stdlib + the binding only, like the SUT):

    python3 lazyfs_node.py serve --state DIR --mountpoint DIR [--dirty-expire S]
    python3 lazyfs_node.py lose|status --mountpoint DIR
    python3 lazyfs_node.py mounted --mountpoint DIR

Commands reach the daemon over an abstract UNIX socket named after the
mountpoint (per network namespace, gone with the daemon: nothing to clean).
"""
from __future__ import annotations

import argparse
import bisect
import errno
import hashlib
import json
import os
import random
import shutil
import socket
import stat
import struct
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

try:  # on a node the uploaded modules sit side by side; in the harness they are a package
    from diskfault_node import DiskFaults
except ImportError:
    from nuclei.diskfault_node import DiskFaults

FSTYPE = "fuse.lazyfs"
ROOT_FID = 0
FLUSH_PERIOD_S = 5.0  # the kernel's flusher wakes every dirty_writeback_centisecs (5 s by default)


def control_address(mountpoint: str) -> str:
    """The abstract socket name of the daemon serving `mountpoint`."""
    digest = hashlib.sha256(os.path.abspath(mountpoint).encode()).hexdigest()[:24]
    return f"\0lazyfs-{digest}"


@dataclass
class Dirty:
    """What changed in one file since its last fsync: written ranges, smallest size."""

    ranges: list[tuple[int, int]] = field(default_factory=list)  # sorted, disjoint [start, end)
    min_size: int | None = None

    def write(self, start: int, end: int) -> None:
        """Add [start, end), merging with every range it touches."""
        if end <= start:
            return
        i = bisect.bisect_left(self.ranges, (start, start))
        if i > 0 and self.ranges[i - 1][1] >= start:
            i -= 1
        j = i
        while j < len(self.ranges) and self.ranges[j][0] <= end:
            start, end = min(start, self.ranges[j][0]), max(end, self.ranges[j][1])
            j += 1
        self.ranges[i:j] = [(start, end)]

    def truncate(self, size: int) -> None:
        self.min_size = size if self.min_size is None else min(self.min_size, size)
        self.ranges = [(s, min(e, size)) for s, e in self.ranges if s < size]

    @property
    def bytes(self) -> int:
        return sum(end - start for start, end in self.ranges)


class CrashState:
    """The live tree, the durable image and the map between them (no FUSE in here,
    so the model is testable alone). Files and directories are named by a fid of
    ours, not the inode number: the backing file system reuses inode numbers."""

    def __init__(self, state_dir: str, dirty_expire: float | None = None) -> None:
        self.state_dir = os.path.abspath(state_dir)
        self.dirty_expire = dirty_expire  # seconds after which the flusher writes back; None: never
        self.written_back = {"files": 0, "dirs": 0}  # by the flusher, over the whole mount
        self.live = os.path.join(self.state_dir, "live")
        self.store = os.path.join(self.state_dir, "durable")
        self.lock = threading.RLock()
        self.generation = 0
        self.losses: list[dict[str, int]] = []
        self.disk = DiskFaults()  # injected errors, a full disk, slow operations (nuclei.diskfault)
        os.makedirs(self.live, exist_ok=True)
        self._snapshot_live()

    # -- identities ----------------------------------------------------------------------
    def _reset(self) -> None:
        self.fids: dict[int, int] = {os.lstat(self.live).st_ino: ROOT_FID}
        self.next_fid = ROOT_FID + 1
        self.durable_dirs: dict[int, dict[str, tuple[int, str]]] = {ROOT_FID: {}}  # fid -> name -> (fid, kind)
        self.durable_files: set[int] = set()
        self.dirty: dict[int, Dirty] = {}
        # With dirty_expire: when each file / directory went from clean to dirty (monotonic).
        self.dirtied_when: dict[int, float] = {}
        self.dir_dirtied_when: dict[int, float] = {}

    def path(self, path: str) -> str:
        return os.path.join(self.live, path.lstrip("/"))

    def fid(self, live_path: str, new: bool = False) -> int:
        """Our id of what lives at `live_path` (a fresh one with `new`)."""
        ino = os.lstat(live_path).st_ino
        if new or ino not in self.fids:
            self.fids[ino] = self.next_fid
            self.next_fid += 1
        return self.fids[ino]

    def forget(self, live_path: str) -> None:
        """Drop the inode -> fid map of a name about to disappear for good."""
        try:
            st = os.lstat(live_path)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(st.st_mode) or st.st_nlink <= 1:
            self.fids.pop(st.st_ino, None)

    # -- changes ---------------------------------------------------------------------------
    def wrote(self, fid: int, start: int, end: int) -> None:
        self.dirty.setdefault(fid, Dirty()).write(start, end)
        self._dirtied(self.dirtied_when, fid)

    def truncated(self, fid: int, size: int) -> None:
        self.dirty.setdefault(fid, Dirty()).truncate(size)
        self._dirtied(self.dirtied_when, fid)

    def entry_changed(self, path: str) -> None:
        """A create, unlink, rename or mkdir/rmdir of `path` (under the mount) changed its
        directory's entries: the directory is dirty from now if it was clean."""
        if self.dirty_expire is not None:
            self._dirtied(self.dir_dirtied_when, self.fid(self.path(os.path.dirname(path.rstrip("/")) or "/")))

    def _dirtied(self, when: dict[int, float], fid: int) -> None:
        if self.dirty_expire is not None and fid not in when:
            when[fid] = time.monotonic()

    def sync_file(self, fid: int, fd: int) -> None:
        """fsync: the durable copy of the file becomes its live content."""
        dirty = self.dirty.pop(fid, Dirty())
        self.dirtied_when.pop(fid, None)
        live_size = os.fstat(fd).st_size
        target = os.open(self._content(fid), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = os.fstat(target).st_size
            os.ftruncate(target, min(size, dirty.min_size if dirty.min_size is not None else size))
            os.ftruncate(target, live_size)
            for start, end in dirty.ranges:
                end = min(end, live_size)
                while start < end:
                    chunk = os.pread(fd, min(end - start, 1 << 20), start)
                    if not chunk:
                        break
                    os.pwrite(target, chunk, start)
                    start += len(chunk)
        finally:
            os.close(target)
        self.durable_files.add(fid)

    def sync_dir(self, path: str) -> None:
        """fsync of a directory: its current entries become the durable ones."""
        live_dir = self.path(path)
        entries = {}
        for name in os.listdir(live_dir):
            child = os.path.join(live_dir, name)
            kind = "d" if stat.S_ISDIR(os.lstat(child).st_mode) else "f"
            entries[name] = (self.fid(child), kind)
        fid = self.fid(live_dir)
        self.durable_dirs[fid] = entries
        self.dir_dirtied_when.pop(fid, None)

    def write_back_expired(self, now: float | None = None) -> dict[str, int]:
        """One wake-up of the kernel's flusher (with `dirty_expire`): every file dirty since
        `now - dirty_expire` or earlier is written back as its fsync would, every directory
        whose entries changed that long ago is made durable as its fsync would. Returns what
        this wake-up wrote back. A file or directory gone from the live tree since (unlinked,
        removed) is forgotten; one that fails (the backing disk) is logged and tried again
        at the next wake-up. Injected disk faults do not apply: this is not the application."""
        done = {"files": 0, "dirs": 0}
        if self.dirty_expire is None:
            return done
        cutoff = (time.monotonic() if now is None else now) - self.dirty_expire
        with self.lock:
            files = [fid for fid, when in self.dirtied_when.items() if when <= cutoff]
            dirs = [fid for fid, when in self.dir_dirtied_when.items() if when <= cutoff]
            if not files and not dirs:
                return done
            live_files, live_dirs = self._live_fids()
            for fid in files:
                self._write_back("files", fid, live_files.get(fid), done)
            for fid in dirs:
                self._write_back("dirs", fid, live_dirs.get(fid), done)
        return done

    def _write_back(self, kind: str, fid: int, live: str | None, done: dict[str, int]) -> None:
        when = self.dir_dirtied_when if kind == "dirs" else self.dirtied_when
        try:
            if live is None:
                raise FileNotFoundError(fid)
            if kind == "dirs":
                self.sync_dir("/" + os.path.relpath(live, self.live))
            else:
                fd = os.open(live, os.O_RDONLY)
                try:
                    self.sync_file(fid, fd)
                finally:
                    os.close(fd)
        except FileNotFoundError:
            when.pop(fid, None)  # gone from the live tree: nothing names it any more
            return
        except OSError as error:
            print(f"lazyfs flusher: writing back {live}: {error}", file=sys.stderr, flush=True)
            return
        done[kind] += 1
        self.written_back[kind] += 1

    def _content(self, fid: int) -> str:
        return os.path.join(self.store, str(fid))

    # -- the crash ---------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        return {"generation": self.generation, "unsynced_files": len(self.dirty),
                "unsynced_bytes": sum(d.bytes for d in self.dirty.values()), "losses": self.losses,
                "unsynced_by_dir": self.unsynced_by_dir(), "dirty_expire_s": self.dirty_expire,
                "written_back": dict(self.written_back)}

    def unsynced_by_dir(self) -> dict[str, int]:
        """Unsynced bytes per directory, by its path under the mount (`broker-a-0/store/commitlog`,
        `.../dledger-n0/data`): a crash that should take acknowledged data back needs them
        in the log that holds it, and some logs are known by their parent's name too."""
        found: dict[str, int] = {}
        with self.lock:
            for here, _dirs, files in os.walk(self.live):
                for name in files:
                    dirty = self.dirty.get(self.fids.get(os.lstat(os.path.join(here, name)).st_ino, -1))
                    if dirty is not None and dirty.bytes:
                        key = os.path.relpath(here, self.live).replace(os.sep, "/")
                        found[key] = found.get(key, 0) + dirty.bytes
        return found

    def lose(self, torn_seed: int | None = None) -> dict[str, Any]:
        """Rebuild the live tree from the durable image; returns what was dropped (and,
        with `torn_seed`, what each torn file kept)."""
        lost: dict[str, Any] = {"unsynced_files": len(self.dirty),
                                "unsynced_bytes": sum(d.bytes for d in self.dirty.values())}
        if torn_seed is not None:
            lost["torn_seed"] = torn_seed
            lost["torn"] = self.tear(random.Random(torn_seed))
        fresh = self.live + ".rebuild"
        shutil.rmtree(fresh, ignore_errors=True)
        os.makedirs(fresh)
        self._rebuild(ROOT_FID, fresh)
        old = self.live + ".old"
        shutil.rmtree(old, ignore_errors=True)
        os.rename(self.live, old)
        os.rename(fresh, self.live)
        shutil.rmtree(old, ignore_errors=True)
        self.generation += 1
        self._snapshot_live()
        lost["generation"] = self.generation
        self.losses.append(lost)
        return lost

    def tear(self, rng: random.Random) -> list[dict[str, Any]]:
        """Make a strict prefix of each file's last unsynced range durable (1 to n-1 of its
        n bytes, drawn from `rng`): what a disk that lost power while writing back the tail
        of a log persists. Only files whose name is durable (a crash keeps no other) and
        whose range has two bytes or more are torn; earlier unsynced ranges and unsynced
        truncations are lost as in a plain crash."""
        durable, live = self._durable_paths(), self._live_fids()[0]
        torn = []
        for fid in sorted(self.dirty):
            ranges = self.dirty[fid].ranges
            if fid not in durable or fid not in live or not ranges or ranges[-1][1] - ranges[-1][0] < 2:
                continue
            start, end = ranges[-1]
            with open(live[fid], "rb") as source:
                source.seek(start)
                kept = source.read(rng.randrange(1, end - start))
            if not kept:
                continue
            target = os.open(self._content(fid), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                os.pwrite(target, kept, start)
            finally:
                os.close(target)
            self.durable_files.add(fid)
            torn.append({"file": durable[fid], "offset": start, "bytes_kept": len(kept),
                         "bytes_lost": end - start - len(kept)})
        return torn

    def _durable_paths(self) -> dict[int, str]:
        """fid -> its durable name under the mount, for every file a rebuild would make."""
        found: dict[int, str] = {}

        def walk(dir_fid: int, prefix: str) -> None:
            for name, (fid, kind) in sorted(self.durable_dirs.get(dir_fid, {}).items()):
                if kind == "d":
                    walk(fid, f"{prefix}{name}/")
                else:
                    found.setdefault(fid, f"{prefix}{name}")
        walk(ROOT_FID, "")
        return found

    def _live_fids(self) -> tuple[dict[int, str], dict[int, str]]:
        """fid -> a live path, of every file and of every directory of ours in the live tree."""
        files: dict[int, str] = {}
        dirs: dict[int, str] = {}
        for here, _dirs, names in os.walk(self.live):
            for found, path in ((dirs, here), *((files, os.path.join(here, name)) for name in names)):
                fid = self.fids.get(os.lstat(path).st_ino)
                if fid is not None:
                    found.setdefault(fid, path)
        return files, dirs

    def _rebuild(self, dir_fid: int, target: str) -> None:
        for name, (fid, kind) in self.durable_dirs.get(dir_fid, {}).items():
            path = os.path.join(target, name)
            if kind == "d":
                os.mkdir(path)
                self._rebuild(fid, path)
            elif fid in self.durable_files:
                shutil.copyfile(self._content(fid), path)
            else:
                open(path, "wb").close()  # the name was synced, the data never was

    def _snapshot_live(self) -> None:
        """Everything in the live tree now is durable (at start and after a loss)."""
        shutil.rmtree(self.store, ignore_errors=True)
        os.makedirs(self.store)
        self._reset()
        for here, dirs, files in os.walk(self.live):
            rel = "/" + os.path.relpath(here, self.live)
            for name in files:
                fid = self.fid(os.path.join(here, name))
                shutil.copyfile(os.path.join(here, name), self._content(fid))
                self.durable_files.add(fid)
            self.sync_dir(rel)
            for name in dirs:
                self.sync_dir(os.path.join(rel, name))


# Which disk-fault operation each FUSE call is (a full disk refuses creates and growth too).
_FAULT_OPS = {"read": "read", "write": "write", "truncate": "write", "create": "write", "mkdir": "write",
              "fsync": "fsync", "fsyncdir": "fsync"}


def _operations(state: CrashState) -> Any:
    """The FUSE operations over a CrashState (mfusepy's high-level, path-based API)."""
    import mfusepy

    def oserror(error: OSError) -> mfusepy.FuseOSError:
        return mfusepy.FuseOSError(error.errno or errno.EIO)

    def guarded(method):
        # One lock for every operation: a `lose` must see the tree standing still.
        fault_op = _FAULT_OPS.get(method.__name__)

        def run(self, *args):
            with state.lock:
                try:
                    if fault_op:
                        state.disk.check(fault_op, args[0])
                    return method(self, *args)
                except OSError as error:
                    if isinstance(error, mfusepy.FuseOSError):
                        raise
                    raise oserror(error) from None
        run.__name__ = method.__name__
        return run

    class LazyFS(mfusepy.Operations):
        use_ns = True

        def __init__(self) -> None:
            self.handles: dict[int, tuple[int, int, bool]] = {}  # fh -> (fd, fid, append)
            self.next_fh = 1

        def _handle(self, fh: int) -> tuple[int, int, bool]:
            if fh not in self.handles:
                raise mfusepy.FuseOSError(errno.EBADF)  # opened before a `lose`
            return self.handles[fh]

        def _open(self, live: str, flags: int, fid: int, mode: int = 0o644) -> int:
            fd = os.open(live, flags & ~os.O_TRUNC, mode)
            if flags & os.O_TRUNC:
                os.ftruncate(fd, 0)
                state.truncated(fid, 0)
            fh, self.next_fh = self.next_fh, self.next_fh + 1
            self.handles[fh] = (fd, fid, bool(flags & os.O_APPEND))
            return fh

        @guarded
        def getattr(self, path, fh=None):
            st = os.lstat(state.path(path))
            times = {"st_atime": st.st_atime_ns, "st_mtime": st.st_mtime_ns, "st_ctime": st.st_ctime_ns}
            return {key: getattr(st, key) for key in (
                "st_mode", "st_nlink", "st_size", "st_uid", "st_gid", "st_ino", "st_blocks")} | times

        @guarded
        def readdir(self, path, fh):
            return [".", "..", *os.listdir(state.path(path))]

        @guarded
        def mkdir(self, path, mode):
            os.mkdir(state.path(path), mode)
            state.fid(state.path(path), new=True)
            state.entry_changed(path)
            return 0

        @guarded
        def rmdir(self, path):
            state.forget(state.path(path))
            os.rmdir(state.path(path))
            state.entry_changed(path)
            return 0

        @guarded
        def unlink(self, path):
            state.forget(state.path(path))
            os.unlink(state.path(path))
            state.entry_changed(path)
            return 0

        @guarded
        def rename(self, old, new):
            if os.path.lexists(state.path(new)):
                state.forget(state.path(new))
            os.rename(state.path(old), state.path(new))
            state.entry_changed(old)
            state.entry_changed(new)
            return 0

        @guarded
        def create(self, path, mode, fi=None):
            live = state.path(path)
            existed = os.path.lexists(live)
            fd = os.open(live, os.O_RDWR | os.O_CREAT, mode)
            os.close(fd)
            if not existed:
                state.entry_changed(path)
            return self._open(live, os.O_RDWR, state.fid(live, new=not existed))

        @guarded
        def open(self, path, flags):
            live = state.path(path)
            return self._open(live, flags & ~os.O_CREAT, state.fid(live))

        @guarded
        def read(self, path, size, offset, fh):
            return os.pread(self._handle(fh)[0], size, offset)

        @guarded
        def write(self, path, data, offset, fh):
            fd, fid, append = self._handle(fh)
            written = os.pwrite(fd, data, offset)
            if append:  # pwrite on an O_APPEND fd writes at the end, whatever the offset
                offset = os.fstat(fd).st_size - written
            state.wrote(fid, offset, offset + written)
            return written

        @guarded
        def truncate(self, path, length, fh=None):
            if fh is not None and fh in self.handles:
                fd, fid, _ = self.handles[fh]
                os.ftruncate(fd, length)
            else:
                live = state.path(path)
                os.truncate(live, length)
                fid = state.fid(live)
            state.truncated(fid, length)
            return 0

        @guarded
        def fsync(self, path, datasync, fh):
            fd, fid, _ = self._handle(fh)
            state.sync_file(fid, fd)
            return 0

        @guarded
        def fsyncdir(self, path, datasync, fh):
            state.sync_dir(path)
            return 0

        @guarded
        def release(self, path, fh):
            entry = self.handles.pop(fh, None)
            if entry is not None:
                os.close(entry[0])
            return 0

        def flush(self, path, fh):
            return 0

        def opendir(self, path):
            return 0

        def releasedir(self, path, fh):
            return 0

        @guarded
        def chmod(self, path, mode):
            os.chmod(state.path(path), mode)
            return 0

        @guarded
        def chown(self, path, uid, gid):
            os.chown(state.path(path), uid, gid, follow_symlinks=False)
            return 0

        @guarded
        def utimens(self, path, times=None):
            os.utime(state.path(path), ns=times, follow_symlinks=False)
            return 0

        @guarded
        def statfs(self, path):
            st = os.statvfs(state.path(path))
            found = {key: getattr(st, key) for key in (
                "f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files",
                "f_flag", "f_frsize", "f_namemax")}
            if state.disk.full():  # what a disk check (RocketMQ's, the model's) reads
                found.update(f_bavail=0, f_bfree=0)
            return found

        def drop_handles(self) -> None:
            """A crash closes every file: handles opened before a `lose` are dead."""
            for fd, _, _ in self.handles.values():
                os.close(fd)
            self.handles.clear()

    return LazyFS()


CONTROL_TIMEOUT_S = 30.0
CONTROL_LINE_BYTES = 1 << 16  # a client that neither sends nor reads holds the control socket no longer
_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


def serve_control(state: CrashState, operations: Any, mountpoint: str) -> None:
    """Answer `lose` and `status` on the abstract socket (a daemon thread).

    An abstract socket has no file permissions: only the daemon's own uid (the
    harness's, which started it) is answered. One connection's failure (a client
    gone, ENOSPC while copying) is logged and the next is served: the loop lives
    as long as the mount.
    """
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(control_address(mountpoint))
    server.listen(4)

    def loop() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError as error:
                print(f"lazyfs control: accept failed: {error}", file=sys.stderr, flush=True)
                continue
            with conn:
                try:
                    conn.settimeout(CONTROL_TIMEOUT_S)
                    _answer(conn, state, operations)
                except Exception as error:  # noqa: BLE001 - one bad client must not end the loop
                    print(f"lazyfs control: {type(error).__name__}: {error}", file=sys.stderr, flush=True)

    threading.Thread(target=loop, name="lazyfs-control", daemon=True).start()


def _answer(conn: socket.socket, state: CrashState, operations: Any) -> None:
    _, uid, _ = _PEERCRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
    if uid != os.geteuid():
        print(f"lazyfs control: refused a client of uid {uid}", file=sys.stderr, flush=True)
        return
    line = b""
    while not line.endswith(b"\n") and len(line) < CONTROL_LINE_BYTES:
        chunk = conn.recv(4096)
        if not chunk:
            break
        line += chunk
    command, _, argument = line.decode(errors="replace").strip().partition(" ")
    if command.startswith("disk-"):  # not under the tree's lock: a slow operation may hold it
        conn.sendall(json.dumps(_answer_disk(state, command, argument)).encode() + b"\n")
        return
    with state.lock:
        if command == "lose":
            operations.drop_handles()
            reply = {"ok": True, **state.lose(torn_seed=int(argument) if argument.strip() else None)}
        elif command == "status":
            reply = {"ok": True, **state.status()}
        else:
            reply = {"ok": False, "error": f"unknown command {command!r}"}
    conn.sendall(json.dumps(reply).encode() + b"\n")


def _answer_disk(state: CrashState, command: str, argument: str) -> dict[str, Any]:
    """`disk-set <json rules>`, `disk-clear`, `disk-status`."""
    try:
        if command == "disk-set":
            state.disk.set(json.loads(argument))
            return {"ok": True, **state.disk.status()}
        if command == "disk-clear":
            return {"ok": True, "counts": state.disk.clear()}
        if command == "disk-status":
            return {"ok": True, **state.disk.status()}
    except (ValueError, TypeError, AttributeError) as error:
        return {"ok": False, "error": f"{command}: {error}"}
    return {"ok": False, "error": f"unknown command {command!r}"}


def ask(mountpoint: str, command: str, timeout: float = 60.0) -> dict[str, Any]:
    """Send one command to the daemon of `mountpoint`; its JSON reply."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        conn.connect(control_address(mountpoint))
        conn.sendall(command.encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
    return json.loads(data)


def write_back(mountpoint: str) -> None:
    """Have the kernel write the mount's dirty pages to the daemon without an fsync (syncfs
    sends no FUSE fsync): memory-mapped writes a live process has not msync'ed reach the
    daemon only at writeback, and until then a status would not count them as unsynced."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(mountpoint, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if libc.syncfs(fd) != 0:
            error = ctypes.get_errno()
            raise OSError(error, os.strerror(error))
    finally:
        os.close(fd)


def mounted(mountpoint: str) -> bool:
    """Is a lazyfs mounted at `mountpoint` in this mount namespace? (Reads
    /proc/self/mountinfo: stat() on a mount whose daemon died fails.)"""
    target = os.path.abspath(mountpoint)
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
        for line in f:
            fields = line.split()
            point = fields[4].encode().decode("unicode_escape")  # octal escapes of spaces etc.
            fstype = fields[fields.index("-") + 1]
            if point == target and fstype == FSTYPE:
                return True
    return False


WATCH_S = 1.0  # how often the daemon looks for its state directory


def exit_when_gone(state_dir: str, mountpoint: str) -> None:
    """End the daemon (unmounting lazily) once its state directory is gone: the run that
    mounted it was removed (a cluster taken down, a work directory wiped), and a daemon
    left serving an empty tree would hold the mount and its memory until the node reboots."""
    import subprocess
    import time

    def watch() -> None:
        while os.path.isdir(state_dir):
            time.sleep(WATCH_S)
        print(f"lazyfs: {state_dir} is gone: unmounting {mountpoint} and exiting", file=sys.stderr, flush=True)
        for command in (["fusermount3", "-u", "-z", mountpoint], ["umount", "-l", mountpoint]):
            try:
                if subprocess.run(command, capture_output=True, timeout=10).returncode == 0:
                    break
            except (OSError, subprocess.SubprocessError):
                continue
        os._exit(0)

    threading.Thread(target=watch, name="lazyfs-watch", daemon=True).start()


def start_flusher(state: CrashState, stop: threading.Event) -> threading.Thread | None:
    """The kernel's periodic writeback (with `state.dirty_expire`; None without): a thread
    that wakes every min(FLUSH_PERIOD_S, dirty_expire) seconds until `stop` is set. A failed
    wake-up is logged and the next one comes: the flusher never ends the daemon."""
    if state.dirty_expire is None:
        return None
    period = min(FLUSH_PERIOD_S, state.dirty_expire)

    def loop() -> None:
        while not stop.wait(period):
            try:
                state.write_back_expired()
            except Exception as error:  # noqa: BLE001 - one bad wake-up must not end the writeback
                print(f"lazyfs flusher: {type(error).__name__}: {error}", file=sys.stderr, flush=True)

    thread = threading.Thread(target=loop, name="lazyfs-flusher", daemon=True)
    thread.start()
    return thread


def serve(state_dir: str, mountpoint: str, dirty_expire: float | None = None) -> None:
    import mfusepy
    state = CrashState(state_dir, dirty_expire=dirty_expire)
    operations = _operations(state)
    serve_control(state, operations, mountpoint)
    exit_when_gone(state_dir, mountpoint)
    stop = threading.Event()
    flusher = start_flusher(state, stop)
    try:
        # Cached attributes or names would hide a `lose` from the kernel: none are kept.
        mfusepy.FUSE(operations, mountpoint, foreground=True, nothreads=True, fsname="lazyfs",
                     subtype="lazyfs", attr_timeout=0, entry_timeout=0, negative_timeout=0)
    finally:
        stop.set()
        if flusher is not None:
            flusher.join(timeout=CONTROL_TIMEOUT_S)


def _dirty_expire(text: str) -> float:
    value = float(text)
    if not (value > 0 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"must be seconds > 0, got {text}")
    return value


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="lazyfs_node.py", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["serve", "lose", "status", "mounted", "disk-set", "disk-clear",
                                            "disk-status"])
    parser.add_argument("--rules", default="[]", help="disk-set: the rules, a JSON list")
    parser.add_argument("--mountpoint", required=True)
    parser.add_argument("--torn-seed", type=int, help="lose: tear the last unsynced range of each file (seeded)")
    parser.add_argument("--state", help="directory for the live tree and the durable image (serve)")
    parser.add_argument("--dirty-expire", type=_dirty_expire, metavar="S",
                        help="serve: write back what has been dirty for S seconds, as the kernel's flusher "
                             "(default: never, only fsync makes data durable)")
    parser.add_argument("--writeback", action="store_true",
                        help="status: first write the mount's dirty (memory-mapped) pages to the daemon")
    args = parser.parse_args(argv)
    if args.command == "serve":
        if not args.state:
            parser.error("serve needs --state")
        serve(args.state, args.mountpoint, args.dirty_expire)
        return 0
    if args.command == "mounted":
        print("yes" if mounted(args.mountpoint) else "no")
        return 0
    try:
        if args.writeback and args.command == "status":
            write_back(args.mountpoint)
        command = f"{args.command} {args.rules}" if args.command == "disk-set" else args.command
        if args.command == "lose" and args.torn_seed is not None:
            command = f"lose {args.torn_seed}"
        print(json.dumps(ask(args.mountpoint, command)))
    except OSError as error:
        print(f"lazyfs at {args.mountpoint}: no daemon answers ({error.strerror or error})", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
