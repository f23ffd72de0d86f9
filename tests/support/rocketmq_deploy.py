"""The 4-node local cluster that real-RocketMQ deployment tests share (rmq-* profiles
need 4 nodes); a missing release fails with its reason in CI, as conftest.require does."""
from __future__ import annotations

from typing import Any

from sut.rocketmq.release import ReleaseError, ensure
from conftest import require


def rocketmq_cluster(make_cluster: Any, version: str | None = None) -> tuple[Any, Any]:
    """(inventory, pool) of a fresh 4-node cluster, once the release (default: the pinned
    one) is assembled."""
    try:
        ensure(version)
    except ReleaseError as exc:
        require(False, f"real RocketMQ: {exc}")
    return make_cluster(4)
