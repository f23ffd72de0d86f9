"""Broker replication strategies, selected by the broker config field `ha_mode`.

Each mode is an HAStrategy (sut/ha/base.py). Register a mode by adding one
line to HA_MODES ("module:class"); the class is imported only when a broker
uses it.
"""
from __future__ import annotations

import importlib

from sut.config import ConfigError
from sut.ha.base import BrokerContext, HAStrategy, PutResult, Role

HA_MODES: dict[str, str] = {
    "master-slave": "sut.ha.master_slave:MasterSlaveHA",
    "dledger": "sut.dledger:DLedgerHA",
    "controller": "sut.controller.broker_ha:ControllerHA",
}


def strategy_class(mode: str) -> type[HAStrategy]:
    """The HAStrategy class registered for `mode` (ConfigError if unknown)."""
    if mode not in HA_MODES:
        raise ConfigError(f"unknown ha_mode '{mode}' (known: {', '.join(sorted(HA_MODES))})")
    module, _, name = HA_MODES[mode].partition(":")
    return getattr(importlib.import_module(module), name)


__all__ = ["HA_MODES", "BrokerContext", "HAStrategy", "PutResult", "Role", "strategy_class"]
