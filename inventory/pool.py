"""SSH access to the nodes of an inventory: one small Fabric pool per node.

Everything the harness does on a node goes through here, for local namespaces
and real hosts alike, so the local cluster exercises the same code path as a
lab of VMs. Connections are opened lazily and reused; each node gets up to
`per_node` connections so that parallel callers (deployer, nemesis, checks)
do not queue behind one another.

Host keys are always verified when the inventory says so (the default): a
netns inventory points at the known_hosts file its provisioner wrote, an ssh
inventory at its own file or the system and user ones.
"""
from __future__ import annotations

import logging
import os
import shlex
import socket
import tarfile
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path, PurePosixPath

import paramiko
from fabric import Config, Connection
from invoke.exceptions import CommandTimedOut, ThreadException

from inventory.errors import CommandFailed, CommandTimeout, InventoryError, NodeUnreachable, one_line
from inventory.model import Inventory, Node

# Paramiko logs connection failures (with tracebacks) through the logging
# fallback handler; we report them as NodeUnreachable instead.
logging.getLogger("paramiko").addHandler(logging.NullHandler())

Command = str | Sequence[str]
NodeRef = Node | str

# A timed-out command gets SIGTERM on the node, then SIGKILL this much later.
KILL_GRACE_S = 5
# The client waits this much longer than the node-side timeout before it gives
# up on a node that does not answer at all (e.g. cut off by a partition).
CLIENT_SLACK_S = 15
# Exit status of coreutils `timeout` when it had to stop the command.
TIMEOUT_EXIT = 124
DEFAULT_EXCLUDES = ("__pycache__", "*.pyc")
_LINK_ERRORS = (paramiko.SSHException, EOFError, ThreadException, ConnectionError, socket.timeout)


@dataclass(frozen=True)
class Result:
    """What one command printed and how it exited."""

    node: str
    cmd: str
    exited: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exited == 0


def shell_command(cmd: Command) -> str:
    """A shell command line: argv words are quoted, a str is taken as shell text."""
    return cmd if isinstance(cmd, str) else shlex.join(cmd)


class _NodeConnections:
    """Open connections to one node, handed out to one caller at a time."""

    def __init__(self, node: Node, connect, limit: int) -> None:
        self.node = node
        self._connect = connect
        self._limit = limit
        self._idle: list[Connection] = []
        self._count = 0
        self._cond = threading.Condition()

    def acquire(self) -> Connection:
        with self._cond:
            while True:
                while self._idle:
                    conn = self._idle.pop()
                    if conn.is_connected:
                        return conn
                    self._discard_locked(conn)
                if self._count < self._limit:
                    self._count += 1
                    break
                self._cond.wait()
        try:
            return self._connect(self.node)
        except BaseException:
            with self._cond:
                self._count -= 1
                self._cond.notify()
            raise

    def release(self, conn: Connection, broken: bool) -> None:
        with self._cond:
            if broken or not conn.is_connected:
                self._discard_locked(conn)
            else:
                self._idle.append(conn)
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            for conn in self._idle:
                self._discard_locked(conn)
            self._idle.clear()

    def _discard_locked(self, conn: Connection) -> None:
        self._count -= 1
        try:
            conn.close()
        except Exception:  # closing a dead transport may fail; it is gone either way
            pass


class _ChannelWriter:
    """File-like adapter so tarfile can stream straight into an SSH channel."""

    def __init__(self, channel: paramiko.Channel) -> None:
        self._channel = channel

    def write(self, data: bytes) -> int:
        self._channel.sendall(data)
        return len(data)


class Pool:
    """Run commands, move files and start processes on the nodes of an inventory."""

    def __init__(self, inventory: Inventory, *, connect_timeout: float = 10, per_node: int = 4,
                 io_timeout: float = 60) -> None:
        self.inventory = inventory
        self.connect_timeout = connect_timeout
        # File transfers (SFTP) have no node-side `timeout`: a node that stops answering
        # in the middle of one is given up after this many seconds of silence.
        self.io_timeout = io_timeout
        self._known_hosts = _known_hosts_files(inventory)
        # A local cluster must not pick up the user's ~/.ssh/config (a
        # `Host *` ProxyJump there would break it); real hosts may need it.
        self._config = Config(ssh_config=paramiko.SSHConfig()) if inventory.kind == "netns" else Config()
        self._nodes = {n.name: _NodeConnections(n, self._connect, per_node) for n in inventory.nodes}
        self._closed = False

    # -- public API -------------------------------------------------------

    def node(self, node: NodeRef) -> Node:
        """The inventory's Node for a name (or Node)."""
        name = node.name if isinstance(node, Node) else node
        return self.inventory.node(name)

    def run(self, node: NodeRef, cmd: Command, timeout: float | None = 30, check: bool = True,
            sudo: bool | None = None) -> Result:
        """Run one command under /bin/sh; CommandFailed on non-zero exit when `check`.

        A command still running after `timeout` seconds is killed on the node
        and raises CommandTimeout (whatever `check` says).
        """
        target = self.node(node)
        text = shell_command(cmd)
        remote = self._wrap(target, text, timeout, sudo)
        client_timeout = None if timeout is None else timeout + KILL_GRACE_S + CLIENT_SLACK_S
        with self._session(target) as conn:
            try:
                raw = conn.run(remote, hide=True, warn=True, in_stream=False, timeout=client_timeout)
            except CommandTimedOut:
                conn.close()  # the node did not answer in time: do not reuse this link
                raise CommandTimeout(target.name, text, timeout) from None
        result = Result(target.name, text, raw.exited, raw.stdout, raw.stderr)
        if timeout is not None and result.exited == TIMEOUT_EXIT:
            raise CommandTimeout(target.name, text, timeout)
        if check and not result.ok:
            raise CommandFailed(target.name, text, result.exited, result.stderr)
        return result

    def run_many(self, nodes: Iterable[NodeRef], cmd: Command, timeout: float | None = 30,
                 check: bool = True) -> dict[str, Result]:
        """Run the same command on several nodes in parallel.

        Waits for all of them; then raises the first error (in the order the
        nodes were given) if any node failed.
        """
        targets = [self.node(n) for n in nodes]
        if not targets:
            return {}
        with ThreadPoolExecutor(max_workers=len(targets), thread_name_prefix="pool") as executor:
            futures = {t.name: executor.submit(self.run, t, cmd, timeout, check) for t in targets}
        results: dict[str, Result] = {}
        errors: list[InventoryError] = []
        for name, future in futures.items():
            try:
                results[name] = future.result()
            except InventoryError as error:
                errors.append(error)
        if errors:
            raise errors[0]
        return results

    def put(self, node: NodeRef, local_path: str | os.PathLike[str], remote_path: str) -> None:
        """Copy one local file to the node (parent directories are created)."""
        target = self.node(node)
        parent = str(PurePosixPath(remote_path).parent)
        self.run(target, ["mkdir", "-p", parent])
        with self._session(target) as conn:
            try:
                self._sftp(conn)  # Fabric's put uses the connection's (now bounded) SFTP session
                conn.put(str(local_path), remote=remote_path)
            except OSError as error:
                if _link_failed(conn, error):
                    raise
                raise CommandFailed(target.name, f"put {remote_path}", None, _os_reason(error)) from None

    def put_dir(self, node: NodeRef, local_dir: str | os.PathLike[str], remote_dir: str,
                exclude: Sequence[str] = DEFAULT_EXCLUDES, timeout: float = 300) -> None:
        """Copy a directory tree to `remote_dir` as one tar stream (fast for many small files).

        Names matching a pattern in `exclude` (byte-code caches by default)
        are skipped; existing remote files are overwritten.
        """
        target = self.node(node)
        source = Path(local_dir).resolve()   # a symlinked directory: copy what it points to
        if not source.is_dir():
            raise InventoryError(f"put_dir: {source} is not a directory")
        quoted = shlex.quote(remote_dir)
        remote = self._wrap(target, f"mkdir -p {quoted} && tar --no-same-owner -xf - -C {quoted}", timeout, None)
        with self._session(target) as conn:
            exited, stderr = _stream_tar(conn, remote, source, exclude, timeout + KILL_GRACE_S + CLIENT_SLACK_S)
        if exited == TIMEOUT_EXIT:
            raise CommandTimeout(target.name, f"put_dir {remote_dir}", timeout)
        if exited != 0:
            raise CommandFailed(target.name, f"put_dir {remote_dir}", exited, stderr)

    def start_detached(self, node: NodeRef, argv: Sequence[str], pidfile: str, logfile: str,
                       cwd: str | None = None, env: Mapping[str, str] | None = None) -> int:
        """Start a process that outlives the SSH session; returns its pid.

        `setsid` gives it a session of its own (no controlling terminal, so no
        SIGHUP when the connection closes); stdio goes to `logfile` (appended)
        and the pid to `pidfile` before this returns.
        """
        if not argv:
            raise ValueError("start_detached needs a non-empty argv")
        launch = shlex.join(["setsid", *_env_words(env), *argv])
        dirs = sorted({str(PurePosixPath(pidfile).parent), str(PurePosixPath(logfile).parent)})
        steps = [shlex.join(["mkdir", "-p", *dirs])]
        if cwd is not None:
            steps.append(shlex.join(["cd", cwd]))
        pid_q, log_q = shlex.quote(pidfile), shlex.quote(logfile)
        # Never overwrite a pidfile naming a live instance of this program: that would orphan it.
        # (Its last argv word, e.g. the config path, tells it from a stranger reusing the pid.)
        same = shlex.quote(argv[-1])
        steps.append(f"{{ old=$(head -c 32 {pid_q} 2>/dev/null | tr -dc 0-9); [ -z \"$old\" ] "
                     f"|| ! tr '\\0' '\\n' 2>/dev/null </proc/$old/cmdline | grep -qxF -- {same} "
                     f"|| {{ echo pidfile {pid_q} names the live pid \"$old\" >&2; false; }}; }}")
        steps.append(f"{{ {launch} </dev/null >>{log_q} 2>&1 & echo $! >{pid_q}; }}")
        steps.append(f"cat {pid_q}")
        result = self.run(node, " && ".join(steps))
        return int(result.stdout.strip())

    def read_file(self, node: NodeRef, path: str) -> bytes:
        """The bytes of a file on the node (CommandFailed if it cannot be read)."""
        target = self.node(node)
        with self._session(target) as conn:
            try:
                with self._sftp(conn).open(path, "rb") as remote_file:
                    remote_file.prefetch()
                    return remote_file.read()
            except OSError as error:
                if _link_failed(conn, error):
                    raise
                raise CommandFailed(target.name, f"read {path}", None, _os_reason(error)) from None

    def close(self) -> None:
        """Close every open connection (the pool can still be used afterwards)."""
        for connections in self._nodes.values():
            connections.close()

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- internals ----------------------------------------------------------

    def _wrap(self, node: Node, text: str, timeout: float | None, sudo: bool | None) -> str:
        """Add sudo and the node-side timeout around a shell command line.

        The command always runs under /bin/sh, whatever the login shell is, so
        it means the same on every node and with or without a timeout.
        """
        words: list[str] = []
        use_sudo = node.sudo if sudo is None else sudo
        if use_sudo and node.user != "root":
            words += ["sudo", "-n"]
        if timeout is not None:
            words += ["timeout", "-k", str(KILL_GRACE_S), f"{timeout:g}"]
        return shlex.join([*words, "sh", "-c", text])

    @contextmanager
    def _session(self, node: Node) -> Iterator[Connection]:
        """Borrow a connection; link failures become NodeUnreachable."""
        connections = self._nodes[node.name]
        conn = connections.acquire()
        broken = False
        try:
            yield conn
        except _LINK_ERRORS as error:
            broken = True
            raise NodeUnreachable(node.name, _link_reason(error)) from None
        except OSError as error:
            broken = not conn.is_connected
            if broken:
                raise NodeUnreachable(node.name, f"connection lost: {_os_reason(error)}") from None
            raise
        finally:
            connections.release(conn, broken)

    def _sftp(self, conn: Connection) -> paramiko.SFTPClient:
        """The connection's SFTP session, whose reads give up after `io_timeout` s of silence."""
        sftp = conn.sftp()
        sftp.get_channel().settimeout(self.io_timeout)
        return sftp

    def _connect(self, node: Node) -> Connection:
        """Open and verify a new connection to `node`."""
        conn = Connection(node.host, user=node.user, port=node.port, config=self._config,
                          connect_timeout=self.connect_timeout, connect_kwargs=self._auth(node))
        for path in self._known_hosts:
            conn.client.load_system_host_keys(str(path))
        strict = self.inventory.strict_host_keys
        conn.client.set_missing_host_key_policy(paramiko.RejectPolicy() if strict else paramiko.AutoAddPolicy())
        try:
            conn.open()
        except paramiko.BadHostKeyException:
            raise NodeUnreachable(node.name, f"host key of {node.host} does not match {self._known_hosts_text()}; "
                                  "if the host was reinstalled, update that file") from None
        except paramiko.AuthenticationException as error:
            key = node.key_file or "ssh-agent/default keys"
            raise NodeUnreachable(node.name, f"authentication as {node.user} with {key} failed: {error}") from None
        except paramiko.SSHException as error:
            if "not found in known_hosts" in str(error):
                raise NodeUnreachable(
                    node.name, f"host key of {node.host} is not in {self._known_hosts_text()}; add it "
                    "(ssh-keyscan) or set strict_host_keys: false in the inventory") from None
            raise NodeUnreachable(node.name, f"SSH handshake with {node.host}:{node.port} failed: {error}") from None
        except (OSError, EOFError) as error:
            raise NodeUnreachable(node.name, f"cannot connect to {node.host}:{node.port}: {_os_reason(error)}") from None
        # Small request/response messages: without this, delayed ACKs add
        # about 40 ms to every channel open.
        sock = conn.transport.sock
        if isinstance(sock, socket.socket):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    def _auth(self, node: Node) -> dict[str, object]:
        timeouts = {"banner_timeout": self.connect_timeout, "auth_timeout": self.connect_timeout}
        if node.key_file is not None:
            return {"key_filename": str(node.key_file), "look_for_keys": False, "allow_agent": False, **timeouts}
        return {"look_for_keys": True, "allow_agent": True, **timeouts}

    def _known_hosts_text(self) -> str:
        return ", ".join(str(p) for p in self._known_hosts) or "any known_hosts file (none found)"


def _known_hosts_files(inventory: Inventory) -> list[Path]:
    """The configured known_hosts file, else the user's and the system's."""
    if inventory.known_hosts is not None:
        return [inventory.known_hosts] if inventory.known_hosts.exists() else []
    candidates = [Path("~/.ssh/known_hosts").expanduser(), Path("/etc/ssh/ssh_known_hosts")]
    return [p for p in candidates if p.exists()]


def _env_words(env: Mapping[str, str] | None) -> list[str]:
    if not env:
        return []
    for key in env:
        if not key.isidentifier():
            raise ValueError(f"environment variable name {key!r} is not a valid identifier")
    return ["env", *(f"{k}={v}" for k, v in env.items())]


def _stream_tar(conn: Connection, remote: str, source: Path, exclude: Sequence[str],
                timeout: float) -> tuple[int, str]:
    """Pipe a tar of `source` into `remote` (a shell command reading stdin); a node
    silent for `timeout` s raises socket.timeout (the link is then given up)."""
    channel = conn.transport.open_session(timeout=timeout)
    channel.settimeout(timeout)
    try:
        channel.exec_command(remote)

        def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
            return None if any(fnmatch(Path(info.name).name, p) for p in exclude) else info

        try:
            with tarfile.open(fileobj=_ChannelWriter(channel), mode="w|") as archive:
                archive.add(source, arcname=".", filter=keep)
        except OSError:
            if not (channel.closed or channel.exit_status_ready()):
                raise  # a local read error, not the remote side giving up
        channel.shutdown_write()
        if not channel.status_event.wait(timeout):
            raise socket.timeout(f"no exit status within {timeout:g}s")
        exited = channel.recv_exit_status()
        stderr = channel.makefile_stderr("rb").read().decode(errors="replace")
        return exited, stderr
    finally:
        channel.close()


def _link_failed(conn: Connection, error: OSError) -> bool:
    """An error of the link (dropped, or silent past its timeout), not of the file."""
    return isinstance(error, socket.timeout) or not conn.is_connected


def _link_reason(error: BaseException) -> str:
    if isinstance(error, ThreadException):
        inner = [e.value for e in error.exceptions]
        return "connection lost: " + "; ".join(one_line(str(e) or type(e).__name__) for e in inner)
    return f"connection lost: {one_line(str(error)) or type(error).__name__}"


def _os_reason(error: BaseException) -> str:
    if isinstance(error, paramiko.ssh_exception.NoValidConnectionsError) and error.errors:
        error = next(iter(error.errors.values()))  # the socket error behind "Unable to connect"
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return one_line(str(error)) or type(error).__name__
