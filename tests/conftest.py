"""Shared fixtures: real local clusters (network namespaces + sshd) for tests.

Usage in any test module::

    @pytest.mark.cluster
    def test_something(netns_cluster):
        inventory, pool = netns_cluster          # 3 nodes, shared by the module
        pool.run("n1", ["hostname"])

    @pytest.mark.cluster
    def test_bigger(make_cluster):
        inventory, pool = make_cluster(5)        # a fresh cluster of its own

Every cluster gets a unique name (pid + random suffix), so parallel test runs
do not collide, and is removed at the end of the module, also when tests fail.
Clusters are created non-persistent: if the test process dies without tearing
down, the next test session (or `chaos down`) sweeps them as stale.
"""
from __future__ import annotations

import os
import secrets
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from inventory import Inventory, Pool, netns

REPO = Path(__file__).resolve().parent.parent
ClusterFactory = Callable[..., tuple[Inventory, Pool]]
_CLUSTER_FIXTURES = {"make_cluster", "netns_cluster"}
_swept_stale = False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that use a cluster fixture carry the `cluster` marker even if they forget it."""
    for item in items:
        if _CLUSTER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.cluster)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked `root` or `cluster` needs root: skipped with the reason when
    not root, failed in CI (never a silent pass)."""
    if item.get_closest_marker("root") or item.get_closest_marker("cluster"):
        skip_unless_root()


def require(available: bool, reason: str) -> None:
    """Skip a test whose real part is missing, but fail it in CI (`CI` set): a test
    that needs root, /dev/fuse, Chromium, a Docker engine or ../shared must never
    pass there by skipping silently."""
    if available:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI: {reason}", pytrace=False)
    pytest.skip(reason)


def shared_dir() -> Path:
    """The project's shared data beside the repository (../shared), or $CHAOS_SHARED."""
    return Path(os.environ.get("CHAOS_SHARED") or REPO.parent / "shared")


def knossos_testdata() -> Path:
    return shared_dir() / "testdata" / "knossos"


def require_knossos_testdata() -> Path:
    """Knossos' test histories: skipped with the reason on a fresh clone, required in CI."""
    path = knossos_testdata()
    require(path.is_dir(), f"Knossos test histories not found at {path} (a fresh clone has no "
                           f"../shared; set CHAOS_SHARED to the shared directory)")
    return path


def finish(proc: subprocess.Popen, timeout: float) -> tuple[str, str]:
    """(stdout, stderr) of a `chaos` process once it exits. One still running after
    `timeout` s is asked for its threads' stacks (SIGUSR1, harness.cli), killed, and the
    test fails with those stacks: a hang says where it hangs."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGUSR1)
        time.sleep(2)
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"{proc.args[:3]} still running {timeout:g}s later; stdout:\n{out[-3000:]}\n"
                    f"stderr with its threads' stacks:\n{err[-12000:]}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def skip_unless_root() -> None:
    require(os.geteuid() == 0, "needs root: creates network namespaces, a bridge and sshd processes")


def unique_cluster_name(prefix: str = "t") -> str:
    return f"{prefix}{os.getpid()}-{secrets.token_hex(3)}"


def _sweep_stale_once() -> None:
    """Remove clusters of earlier test processes that died before their teardown."""
    global _swept_stale
    if not _swept_stale:
        netns.down_stale()
        _swept_stale = True


@pytest.fixture(scope="module")
def make_cluster() -> Iterator[ClusterFactory]:
    """Factory fixture: `make_cluster(n=3)` -> (inventory, pool) of a fresh local cluster."""
    skip_unless_root()
    _sweep_stale_once()
    created: list[tuple[str, Pool]] = []

    def factory(n: int = 3) -> tuple[Inventory, Pool]:
        name = unique_cluster_name()
        inventory = netns.up(name, n, persistent=False)
        pool = Pool(inventory)
        created.append((name, pool))
        return inventory, pool

    try:
        yield factory
    finally:
        errors = []
        for name, pool in reversed(created):
            pool.close()
            try:
                netns.down(name)
            except Exception as error:  # keep tearing down the others
                errors.append(error)
        if errors:
            raise errors[0]


@pytest.fixture(scope="module")
def netns_cluster(make_cluster: ClusterFactory) -> tuple[Inventory, Pool]:
    """A 3-node local cluster shared by the tests of one module."""
    return make_cluster(3)
