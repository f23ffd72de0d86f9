"""The store: one directory per run, Jepsen-like (docs/history-format.md).

    store/<campaign-id>/campaign.json
    store/<campaign-id>/runs/<run-id>/{run.json, history/, nemesis.jsonl,
                                       journal.jsonl, nodes/, checked/,
                                       results.json, report/}
    store/latest -> <campaign-id>

Stages meet here: every stage reads and writes files under a run directory,
so each one can be re-run alone. An ad-hoc `chaos run` is a campaign with one
run. Nothing secret is written: `redact` strips passwords, passphrases and
tokens from anything that goes into run.json or campaign.json.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import json
import os
import re
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_STORE = Path("store")
LATEST = "latest"
# A secret-looking key: one of these words as a whole part of the name (`api_token`,
# `ssh-password`, `privateKey`), not a word that merely contains one (`passed`, `tokens_per_s`).
_SECRET_KEY = re.compile(r"(^|[_\-.])(pass|password|passphrase|secret|token|private_?key|credentials?)$"
                         r"|privatekey$", re.I)
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class StoreError(Exception):
    """The store cannot be used (not writable, not a store, run missing): one line."""


def slug(text: str) -> str:
    """A file-name-safe form of a name (profile, fault list...)."""
    return _UNSAFE.sub("-", text).strip("-") or "x"


def new_campaign_id(now: _dt.datetime | None = None) -> str:
    """Sortable by time, unique enough for two runs started in the same second."""
    now = now or _dt.datetime.now(_dt.timezone.utc)
    return f"{now.strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(2)}"


def check_writable(root: Path) -> None:
    """Raise StoreError unless files can be created under `root` (created if missing)."""
    if root.exists() and not root.is_dir():
        raise StoreError(f"store {root}: exists and is not a directory")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"store {root}: cannot create directory: {exc.strerror or exc}") from None
    try:
        with tempfile.NamedTemporaryFile(dir=root, prefix=".write-test-"):
            pass
    except OSError as exc:
        raise StoreError(f"store {root}: not writable: {exc.strerror or exc}") from None


def redact(value: Any) -> Any:
    """A copy of `value` with every secret-looking field's value replaced."""
    if isinstance(value, dict):
        return {k: ("<redacted>" if isinstance(k, str) and _SECRET_KEY.search(k) and v is not None
                    else redact(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    return value


def write_text(path: Path, text: str) -> None:
    """Write a store file atomically: a uniquely named temp file beside it, fsynced,
    then renamed over it. A reader (or a crash) never sees half a file, and two
    writers never share a temp file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically (see write_text), secrets redacted."""
    write_text(path, json.dumps(redact(data), indent=2, sort_keys=False, default=str) + "\n")


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StoreError(f"{path}: no such file") from None
    except json.JSONDecodeError as exc:
        raise StoreError(f"{path}: malformed JSON at line {exc.lineno}: {exc.msg}") from None


@dataclass(frozen=True)
class RunDir:
    """The paths of one run's directory; creating it lays out the subdirectories."""

    path: Path

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def campaign_dir(self) -> Path:
        return self.path.parent.parent

    run_json = property(lambda self: self.path / "run.json")
    history_dir = property(lambda self: self.path / "history")
    nemesis_file = property(lambda self: self.path / "nemesis.jsonl")
    journal_file = property(lambda self: self.path / "journal.jsonl")
    nodes_dir = property(lambda self: self.path / "nodes")
    checked_dir = property(lambda self: self.path / "checked")
    results_file = property(lambda self: self.path / "results.json")
    report_dir = property(lambda self: self.path / "report")

    def create(self) -> "RunDir":
        for sub in (self.history_dir, self.nodes_dir):
            sub.mkdir(parents=True, exist_ok=True)
        return self


class Store:
    """A store root: campaigns, their runs, and the `latest` link."""

    def __init__(self, root: Path | str = DEFAULT_STORE) -> None:
        self.root = Path(root)

    def campaign_dir(self, campaign_id: str) -> Path:
        return self.root / campaign_id

    def new_campaign(self, suffix: str = "") -> str:
        """Claim a fresh campaign directory and return its id.

        Ids carry the start second and a short random tag; two campaigns started
        in the same second can draw the same tag, so the directory is created
        exclusively and a taken id is drawn again, never shared.
        """
        while True:
            campaign_id = f"{new_campaign_id()}{suffix}"
            try:
                self.campaign_dir(campaign_id).mkdir(parents=True)
                return campaign_id
            except FileExistsError:
                continue

    def new_run(self, campaign_id: str, run_id: str) -> RunDir:
        """Create runs/<run-id> in the campaign (suffix -2, -3... if taken) and point latest at it."""
        runs = self.campaign_dir(campaign_id) / "runs"
        runs.mkdir(parents=True, exist_ok=True)
        candidate, n = runs / run_id, 1
        while True:
            try:
                candidate.mkdir()
                break
            except FileExistsError:
                n += 1
                candidate = runs / f"{run_id}-{n}"
        self.set_latest(campaign_id)
        return RunDir(candidate).create()

    def set_latest(self, campaign_id: str) -> None:
        """Point store/latest at `campaign_id` unless it already names a newer campaign.

        Two runs writing to one store each call this; under a lock on the store,
        the link only moves forward (campaign ids sort by start time), so the
        slower of two runs never takes `latest` back from the newer one. The new
        link is made under a unique name and renamed over the old one (atomic,
        relative so the store can move).
        """
        link = self.root / LATEST
        with self._locked():
            current = os.readlink(link) if link.is_symlink() else None
            if current is not None and current > campaign_id and (self.root / current).is_dir():
                return
            tmp = self.root / f".{LATEST}.{os.getpid()}.{secrets.token_hex(4)}"
            os.symlink(campaign_id, tmp)
            os.replace(tmp, link)

    @contextlib.contextmanager
    def _locked(self) -> Any:
        """An exclusive flock on STORE/.lock (between processes and threads)."""
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def latest_campaign(self) -> Path | None:
        link = self.root / LATEST
        return link.resolve() if link.is_symlink() else None

    def runs(self, campaign_id: str) -> list[RunDir]:
        runs = self.campaign_dir(campaign_id) / "runs"
        return [RunDir(p) for p in sorted(runs.iterdir()) if p.is_dir()] if runs.is_dir() else []


def find_run_dir(path: Path | str) -> RunDir:
    """Resolve a user-given path to a run directory: a run dir, a campaign with one run, or a store."""
    p = Path(path)
    if (p / "run.json").is_file() or (p / "history").is_dir():
        return RunDir(p)
    if (p / LATEST).is_symlink():
        p = (p / LATEST).resolve()
    runs = sorted(d for d in (p / "runs").iterdir() if d.is_dir()) if (p / "runs").is_dir() else []
    if len(runs) == 1:
        return RunDir(runs[0])
    if len(runs) > 1:
        raise StoreError(f"{path}: campaign has {len(runs)} runs; name one of them "
                         f"(e.g. {runs[-1]})")
    raise StoreError(f"{path}: not a run directory (no run.json or history/)")
