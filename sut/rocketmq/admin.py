"""Asking a RocketMQ cluster about itself through RocketMQ's own admin API.

The questions go to the driver JVM (sut/rocketmq/driver.py: DefaultMQAdminExt
inside), one process kept for a minute after its last question, so health
polls and the leader lookups of leader-* faults cost a request, not a JVM start.
"""
from __future__ import annotations

from dataclasses import dataclass

from sut.rocketmq.driver import DriverDied, DriverError, DriverMissing, SharedDriver

_ADMIN = SharedDriver(linger_s=60.0)


class AdminError(Exception):
    """The admin request failed or timed out (one line)."""


def ask(op: str, timeout: float, **args: object) -> object:
    try:
        driver = _ADMIN.acquire()
    except (DriverDied, DriverMissing, OSError) as exc:
        raise AdminError(f"RocketMQ admin unavailable: {exc}") from None
    try:
        return driver.call(op, timeout=timeout + 2.0, timeout_ms=int(timeout * 1000), **args)
    except (DriverError, DriverDied, TimeoutError) as exc:
        raise AdminError(f"RocketMQ admin {op}: {exc}") from None
    finally:
        _ADMIN.release()


def close() -> None:
    """End the admin JVM now (the next question starts it again)."""
    _ADMIN.close()


@dataclass(frozen=True)
class BrokerEntry:
    broker_name: str
    broker_id: int
    address: str


def cluster_list(namesrv: str, timeout: float = 5.0) -> list[BrokerEntry]:
    """The brokers the nameserver routes to: brokerId 0 is a group's master."""
    info = ask("cluster", timeout, namesrv=namesrv)
    brokers = info.get("brokers", {}) if isinstance(info, dict) else {}
    return [BrokerEntry(name, int(broker_id), address)
            for name, ids in sorted(brokers.items()) for broker_id, address in sorted(ids.items())]


def controller_leader(namesrv: str, controller: str, timeout: float = 5.0) -> str | None:
    """The controllers' Raft leader's address, as the asked controller sees it."""
    meta = ask("controller_meta", timeout, namesrv=namesrv, controller=controller)
    leader = meta.get("leader_addr") if isinstance(meta, dict) else None
    return leader or None


def sync_state(namesrv: str, controller: str, groups: list[str], timeout: float = 5.0) -> dict:
    """The controller's view of each broker group: master, epochs, SyncStateSet."""
    state = ask("sync_state", timeout, namesrv=namesrv, controller=controller, brokers=groups)
    return state if isinstance(state, dict) else {}
