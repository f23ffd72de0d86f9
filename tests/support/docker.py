"""Helpers of the docker provider tests: the engine, the `chaos` command, what is left over."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import require
from inventory import ProvisionError, docker

REPO = Path(__file__).resolve().parent.parent
CHAOS = str(Path(sys.executable).parent / "chaos")


def engine_or_skip() -> Any:
    """The engine's SDK client; skips locally and fails in CI without an engine or root."""
    try:
        client = docker.engine()
    except ProvisionError as error:
        require(False, f"needs a Docker engine ({error})")
    require(os.geteuid() == 0, "needs root: builds the node image with debootstrap")
    return client


def chaos(*args: str, home: Path, timeout: float = 600, **env: str) -> subprocess.CompletedProcess:
    """The `chaos` command as a user runs it, with its own CHAOS_HOME."""
    return subprocess.run([CHAOS, *args], capture_output=True, text=True, timeout=timeout, cwd=REPO,
                          env={**os.environ, "CHAOS_HOME": str(home), **env})


def leftovers(client: Any, home: Path) -> list[str]:
    """Names of the containers and networks labelled with `home`."""
    objects = docker.owned(client, home)
    return [c.name for c in objects["containers"]] + [n.name for n in objects["networks"]]
