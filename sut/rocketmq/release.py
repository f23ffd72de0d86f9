"""RocketMQ releases on the control node: which ones, where they are, and getting them.

scripts/fetch-rocketmq.sh assembles a release from Maven Central into
build/rocketmq-<version>/ (idempotent; a second call only checks a stamp).
Its id on the nodes is the stamp (the resolved pom's digest): a node that has
that directory already has exactly this release.

What differs between releases and matters to the deployer is here too, as
data (`Features`): the deployer and the run spec ask it, nobody compares
version strings elsewhere.
"""
from __future__ import annotations

import hashlib
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sut.profiles import Profile

REPO = Path(__file__).resolve().parents[2]
FETCH = REPO / "scripts" / "fetch-rocketmq.sh"
POM = REPO / "scripts" / "rocketmq" / "pom.xml"

# The 5.x releases Maven Central serves whole (every module the deployer and the client
# need: namesrv, broker, controller, client, tools). 5.0.0 predates the standalone
# controller's current protocol; 5.1.2 was never published.
SERVED = ("5.1.0", "5.1.1", "5.1.4", "5.2.0", "5.3.3", "5.4.0", "5.5.0")
# Published in part only (checked 2026-11-29 with `mvn -U dependency:copy-dependencies` of
# scripts/rocketmq/pom.xml): why each cannot run.
INCOMPLETE = {
    "5.1.3": "Maven Central has no rocketmq-namesrv or rocketmq-controller of it",
    "5.3.0": "Maven Central has no rocketmq-namesrv, rocketmq-controller or rocketmq-tools of it",
    "5.3.1": "Maven Central has no rocketmq-namesrv of it",
    "5.3.2": "Maven Central has no rocketmq-namesrv, rocketmq-controller or rocketmq-tools of it",
    "5.5.1": "Maven Central has only its broker and controller modules, no rocketmq-namesrv, "
             "rocketmq-client or rocketmq-tools",
}


class ReleaseError(Exception):
    """RocketMQ cannot be had on this machine, or not this release (one line: what is missing)."""


def key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


@dataclass(frozen=True)
class Features:
    """What one release can do, read in its tagged sources (docs/rocketmq.md, "Releases")."""

    version: str

    @property
    def jraft_controller(self) -> bool:
        """`controllerType=jRaft` (ControllerConfig.JRAFT_CONTROLLER) exists from 5.2.0."""
        return key(self.version) >= (5, 2, 0)


def pinned() -> str:
    """The release scripts/rocketmq/pom.xml pins: the default of every rmq-* run."""
    text = POM.read_text()
    start = text.index("<rocketmq.version>") + len("<rocketmq.version>")
    return text[start:text.index("</rocketmq.version>", start)]


def version() -> str:
    return pinned()


def check_version(version: str) -> str:
    """The version if this harness can run it; ReleaseError (one line) otherwise."""
    if version in SERVED:
        return version
    if version in INCOMPLETE:
        raise ReleaseError(f"RocketMQ {version} cannot run: {INCOMPLETE[version]}; "
                           f"served releases: {', '.join(SERVED)}")
    raise ReleaseError(f"RocketMQ {version!r} is not a release Maven Central serves whole; "
                       f"served releases: {', '.join(SERVED)}")


def local_dir(version: str | None = None) -> Path:
    return REPO / "build" / f"rocketmq-{version or pinned()}"


def stamp(version: str) -> str:
    """The digest scripts/fetch-rocketmq.sh writes into the release's .stamp: of the pom with
    its rocketmq.version set to `version`. Known before the release is fetched."""
    text = POM.read_text()
    tag = "<rocketmq.version>{}</rocketmq.version>"
    return hashlib.sha256(text.replace(tag.format(pinned()), tag.format(version), 1).encode()).hexdigest()


def release_id(version: str) -> str:
    """rocketmq-<version>-<first 12 of the pom digest>: names the upload on the nodes. It
    does not need the release here, so processes rendered before the fetch point at the
    directory the fetch is uploaded to."""
    return f"{local_dir(version).name}-{stamp(version)[:12]}"


def _is_fetched(home: Path, version: str) -> bool:
    stamp_file = home / ".stamp"
    return stamp_file.is_file() and stamp_file.read_text().strip() == stamp(version) and (home / "lib").is_dir()


def ensure(version: str | None = None) -> Path:
    """The assembled release (resolving it once if needed); ReleaseError says what is missing."""
    version = check_version(version or pinned())
    home = local_dir(version)
    if _is_fetched(home, version):
        return home
    if shutil.which("java") is None:
        raise ReleaseError("real RocketMQ needs a JDK 17+ on the control node: 'java' is not on PATH "
                           "(install openjdk-17-jdk-headless)")
    try:
        result = subprocess.run(["bash", str(FETCH), version], capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        raise ReleaseError(f"resolving RocketMQ {version} from Maven Central took over 15 minutes "
                           f"(registry unreachable?): run bash scripts/fetch-rocketmq.sh {version}") from None
    if result.returncode != 0:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        raise ReleaseError((lines[-1] if lines else "scripts/fetch-rocketmq.sh failed").removeprefix("[rocketmq] "))
    return home


def profile_refusal(profile: "Profile", version: str) -> str | None:
    """Why this release cannot run this rmq-* profile (one line), or None."""
    features = Features(version)
    controllers = [p for p in profile.processes if p.role == "controller"]
    if any(p.config.get("raft") == "jraft" for p in controllers) and not features.jraft_controller:
        return (f"profile {profile.name} cannot run on RocketMQ {version}: JRaft controllers "
                f"(controllerType=jRaft) exist from 5.2.0; use the DLedger-controller profile or 5.2.0 or newer")
    return None


def refusal(profile: "Profile", version: str) -> str | None:
    """Why the profile cannot run at `version`: not a release served whole, or one that
    cannot run this profile (sut/systems.py: the `release_refusal` of real RocketMQ)."""
    try:
        check_version(version)
    except ReleaseError as exc:
        return str(exc)
    return profile_refusal(profile, version)


def problem(version: str | None = None) -> str | None:
    """What keeps the release (None: the pinned one) from this machine (one line), or None
    once it is here (fetched now if it can be)."""
    try:
        ensure(version)
    except ReleaseError as exc:
        return str(exc)
    return None
