"""Making names durable: a created file, a rename or a new directory survives a
machine crash only once the directory holding it is fsynced (a file's own
fsync covers its data, not its name). Every store file goes through these.
"""
from __future__ import annotations

import os
from pathlib import Path

# How far up make_dirs syncs: a data dir is <root>/data/<process>/<part>, and
# the deployer makes <root>/data/<process> without any fsync.
SYNCED_LEVELS = 3


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """fsync a directory: its current entries (creates, renames, unlinks) become durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dirs(path: str | os.PathLike[str], levels: int = SYNCED_LEVELS) -> Path:
    """mkdir -p, then fsync the directory and its parents `levels` up, so the
    whole chain of names survives a crash (also dirs made earlier without a sync)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    for directory in [path, *path.parents][:levels + 1]:
        fsync_dir(directory)
    return path


def create_file(path: str | os.PathLike[str], flags: int = os.O_RDWR) -> tuple[int, bool]:
    """Open `path`, creating it if needed; a new file's name is made durable at once.
    Returns (fd, created)."""
    path = Path(path)
    try:
        return os.open(path, flags), False
    except FileNotFoundError:
        make_dirs(path.parent)
        fd = os.open(path, flags | os.O_CREAT, 0o644)
        fsync_dir(path.parent)
        return fd, True


def write_atomic(path: Path, data: bytes) -> None:
    """Replace `path` with `data` all or nothing: temp file, fsync, rename, fsync the directory."""
    make_dirs(path.parent, levels=1)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)
