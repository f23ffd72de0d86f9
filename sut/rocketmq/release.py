"""The pinned RocketMQ release on the control node: where it is, and getting it.

scripts/fetch-rocketmq.sh assembles it from Maven Central into
build/rocketmq-<version>/ (idempotent; a second call only checks a stamp).
Its id on the nodes is the stamp (the pom's digest): a node that has that
directory already has exactly this release.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FETCH = REPO / "scripts" / "fetch-rocketmq.sh"
POM = REPO / "scripts" / "rocketmq" / "pom.xml"


class ReleaseError(Exception):
    """RocketMQ cannot be had on this machine (one line: what is missing)."""


def version() -> str:
    text = POM.read_text()
    start = text.index("<rocketmq.version>") + len("<rocketmq.version>")
    return text[start:text.index("</rocketmq.version>", start)]


def local_dir() -> Path:
    return REPO / "build" / f"rocketmq-{version()}"


def release_id(home: Path) -> str:
    """rocketmq-<version>-<first 12 of the pom digest>: names the upload on the nodes."""
    return f"{home.name}-{(home / '.stamp').read_text().strip()[:12]}"


def ensure() -> Path:
    """The assembled release (resolving it once if needed); ReleaseError says what is missing."""
    home = local_dir()
    if (home / ".stamp").is_file() and (home / "lib").is_dir():
        return home
    if shutil.which("java") is None:
        raise ReleaseError("real RocketMQ needs a JDK 17+ on the control node: 'java' is not on PATH "
                           "(install openjdk-17-jdk-headless)")
    try:
        result = subprocess.run(["bash", str(FETCH)], capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        raise ReleaseError("resolving RocketMQ from Maven Central took over 15 minutes "
                           "(registry unreachable?): run bash scripts/fetch-rocketmq.sh") from None
    if result.returncode != 0:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        raise ReleaseError((lines[-1] if lines else "scripts/fetch-rocketmq.sh failed").removeprefix("[rocketmq] "))
    return home


def problem() -> str | None:
    """What keeps the release from this machine (one line), or None once it is here."""
    try:
        ensure()
    except ReleaseError as exc:
        return str(exc)
    return None
