"""The docker provider's node image: Debian with python3, sshd, iptables, iproute2,
procps and a Java runtime, built on this machine because no registry is reachable.

By default the image is a Debian root file system made with debootstrap (from the
mirror apt already uses) and imported; with another source, a Dockerfile on top of a
Debian-based image the user already has. The tag is a digest of the recipe, so a
second build finds it cached. Images carry the provider's labels, so
`remove_images` finds exactly ours.
"""
from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from inventory.errors import ProvisionError, one_line
from inventory.local import chaos_home

__all__ = ["DEBOOTSTRAP", "EXTRA_PACKAGES", "IMAGE_REPOSITORY", "build_dir", "build_image", "image_tag",
           "remove_images", "unmount_below"]

LABEL = "io.rocketmq-chaos"  # on every image, container and network of the provider
LABEL_ROLE = f"{LABEL}.role"
IMAGE_REPOSITORY = "rocketmq-chaos-node"
DEBOOTSTRAP = "debootstrap"  # image source: a Debian root file system built here
# default-jre-headless: the Java runtime real RocketMQ (rmq-* profiles) needs on every
# node; Debian 12's is OpenJDK 17, later releases' newer. libfaketime: clock faults.
PACKAGES = ("python3", "openssh-server", "iptables", "iproute2", "procps", "psmisc", "default-jre-headless",
            "libfaketime")
EXTRA_PACKAGES: tuple[str, ...] = ()  # crash faults add fuse3 here (docs/docker.md)
RECIPE_VERSION = "1"  # bump when the image recipe changes in a way the digest does not see
DEFAULT_MIRROR = "http://deb.debian.org/debian"
SETUP_HINT = "CHAOS_DOCKER=1 bash scripts/setup.sh"

# Installs the packages only if the base image lacks them (no network then).
_DOCKERFILE = """\
FROM {base}
RUN set -e; if ! dpkg -s {packages} >/dev/null 2>&1; then \\
      apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends {packages} \\
      && rm -rf /var/lib/apt/lists/*; fi; \\
    rm -f /etc/ssh/ssh_host_*; mkdir -p /run/sshd
"""


def build_image(client: Any, source: str = DEBOOTSTRAP, *, on_step: Callable[[str], None] | None = None) -> str:
    """The tag of the node image for `source`, built now unless it is cached."""
    from docker.errors import ImageNotFound
    tag = image_tag(source)
    try:
        client.images.get(tag)
        return tag
    except ImageNotFound:
        pass
    say = on_step or (lambda _step: None)
    if source == DEBOOTSTRAP:
        say("building the node image with debootstrap (a few minutes, once)")
        _import_debootstrap(client, tag)
    else:
        say(f"building the node image on top of {source}")
        _build_on(client, source, tag)
    return tag


def image_tag(source: str) -> str:
    """`rocketmq-chaos-node:<digest>` of everything that shapes the image."""
    recipe = "\n".join([RECIPE_VERSION, source, _suite() if source == DEBOOTSTRAP else "",
                        " ".join(PACKAGES + EXTRA_PACKAGES), _DOCKERFILE])
    return f"{IMAGE_REPOSITORY}:{hashlib.sha256(recipe.encode()).hexdigest()[:12]}"


def remove_images(client: Any) -> list[str]:
    """Remove every node image this provider built, and debootstrap's .deb cache."""
    removed = []
    for image in client.images.list(filters={"label": f"{LABEL_ROLE}=image"}):
        client.images.remove(image.id, force=True)
        removed.append(f"image {', '.join(image.tags) or image.short_id}: removed")
    if build_dir().exists():
        shutil.rmtree(build_dir())
        removed.append(f"build cache {build_dir()}: removed")
    return removed


def build_dir() -> Path:
    """Where debootstrap works and keeps its downloaded packages."""
    return chaos_home() / "docker-build"


def _image_labels() -> dict[str, str]:
    return {LABEL: "1", LABEL_ROLE: "image"}


def _import_debootstrap(client: Any, tag: str) -> None:
    if shutil.which("debootstrap") is None:
        raise ProvisionError(f"debootstrap not found: install it with `{SETUP_HINT}`, "
                             "or build on a local image with --image IMAGE")
    if os.geteuid() != 0:
        raise ProvisionError("root is needed to build the node image with debootstrap; run it as root")
    cache = build_dir() / "debs"
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=build_dir(), prefix="rootfs-") as tmp:
        rootfs, tarball = Path(tmp) / "rootfs", Path(tmp) / "rootfs.tar"
        try:
            _run_build_step(["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES + EXTRA_PACKAGES)}",
                             f"--cache-dir={cache}", _suite(), str(rootfs), _mirror()], "debootstrap")
        finally:
            unmount_below(rootfs)
        for key in (rootfs / "etc" / "ssh").glob("ssh_host_*"):
            key.unlink()  # every cluster brings its own host key
        (rootfs / "run" / "sshd").mkdir(parents=True, exist_ok=True)
        shutil.rmtree(rootfs / "var" / "lib" / "apt" / "lists", ignore_errors=True)
        _run_build_step(["tar", "--numeric-owner", "--xattrs", "-C", str(rootfs), "-cf", str(tarball), "."], "tar")
        repository, version = tag.split(":")
        changes = [f"LABEL {key}={value}" for key, value in _image_labels().items()]
        changes += ['CMD ["/usr/sbin/sshd", "-D", "-e"]']
        try:
            client.api.import_image(src=str(tarball), repository=repository, tag=version, changes=changes)
        except Exception as error:  # noqa: BLE001 - any engine error is a failed build
            raise ProvisionError(f"importing the node image into Docker failed: {one_line(str(error))}") from None


def _build_on(client: Any, base: str, tag: str) -> None:
    from docker.errors import BuildError, DockerException, ImageNotFound
    try:
        client.images.get(base)
    except ImageNotFound:
        raise ProvisionError(f"image {base!r} is not in the local Docker engine (no registry is reachable): "
                             f"load it first, or use --image {DEBOOTSTRAP}") from None
    dockerfile = _DOCKERFILE.format(base=base, packages=" ".join(PACKAGES + EXTRA_PACKAGES))
    try:
        client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, labels=_image_labels(),
                            pull=False, rm=True, forcerm=True)
    except BuildError as error:
        last = next((line.get("stream", "").strip() for line in reversed(list(error.build_log))
                     if line.get("stream", "").strip()), "")
        raise ProvisionError(f"building the node image on {base} failed: {one_line(error.msg, 160)}"
                             + (f" (last output: {one_line(last, 120)})" if last else "")) from None
    except DockerException as error:
        raise ProvisionError(f"building the node image on {base} failed: {one_line(str(error))}") from None


def unmount_below(root: Path) -> None:
    """Lazily unmount everything mounted below `root`, deepest first.

    debootstrap mounts /proc and /sys inside its target; one that failed or
    was stopped leaves them mounted, and removing the tree would then fail.
    """
    prefix = str(root.resolve()) + "/"
    try:
        points = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return
    for point in sorted((p for p in points if p.startswith(prefix)), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True)


def _run_build_step(argv: list[str], what: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-2:])
        raise ProvisionError(f"building the node image failed in {what} (exit {proc.returncode}): "
                             f"{one_line(tail, 200) or 'no output'}")


def _suite() -> str:
    """The Debian release of this host (its packages are what apt can reach)."""
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("VERSION_CODENAME="):
                return line.split("=", 1)[1].strip().strip('"') or "bookworm"
    except OSError:
        pass
    return "bookworm"


def _mirror() -> str:
    """The Debian mirror apt uses on this host (CHAOS_DEBIAN_MIRROR overrides it)."""
    if os.environ.get("CHAOS_DEBIAN_MIRROR"):
        return os.environ["CHAOS_DEBIAN_MIRROR"]
    sources = sorted(Path("/etc/apt/sources.list.d").glob("*.sources")) + [Path("/etc/apt/sources.list")]
    for path in sources:
        try:
            text = path.read_text()
        except OSError:
            continue
        match = re.search(r"^(?:URIs:\s*|deb\s+(?:\[[^]]*\]\s+)?)(\S+/debian)/?\s", text, re.MULTILINE)
        if match:
            return match.group(1)
    return DEFAULT_MIRROR
