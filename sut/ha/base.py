"""The seam between the broker and its replication (HA) design.

The broker handles requests, topics, consumer offsets and nameserver
registration the same way in every mode; what differs is behind HAStrategy:

- put(messages): append and decide when to acknowledge, with which status;
- role / broker_id / ready / replicating: master or slave now, the id to
  register with, whether to serve at all, whether replication is running;
- confirm_offset(): the log position consumers may read up to;
- registration() / on_registered(): what goes to the nameserver and what its
  answer to a registration or heartbeat (the master's addresses) means here;
- handlers(): extra request codes served on the broker port (e.g. Raft).

The status rules every strategy must keep (docs/ha-protocol.md, "Send statuses"),
because clients classify outcomes from the code alone (sut/outcome.py):
a definite failure code (NOT_MASTER, SERVICE_NOT_AVAILABLE, SYSTEM_BUSY,
PENDING_FULL, ...) only when nothing was appended; once anything was
appended, SUCCESS or an indeterminate code (FLUSH_DISK_TIMEOUT,
FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE, APPEND_TIMEOUT, SYSTEM_ERROR).
"""
from __future__ import annotations

import asyncio
import enum
import logging
from dataclasses import dataclass, field
from typing import Any, ClassVar, Coroutine, Protocol

from sut.message import Message
from sut.protocol import Handler, ResponseCode
from sut.store.message_store import AppendResult, MessageStore


class Role(str, enum.Enum):
    MASTER = "master"
    SLAVE = "slave"


@dataclass
class PutResult:
    """The outcome of a put: a response code, and where the messages went if appended."""

    code: ResponseCode
    appended: AppendResult | None = None
    error: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # mode-specific reply fields

    @classmethod
    def rejected(cls, code: ResponseCode, error: str) -> "PutResult":
        return cls(code, None, error)


class BrokerContext(Protocol):
    """What a strategy may use from its broker."""

    config: Any                 # sut.broker.BrokerConfig
    store: MessageStore
    log: logging.Logger

    @property
    def address(self) -> str: ...          # advertised host:port of the broker port

    @property
    def ha_address(self) -> str: ...       # advertised host:port of the HA port

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task: ...

    def registration_changed(self) -> None: ...  # re-register with the nameservers now


class HAStrategy:
    """Base class: a mode subclasses it and is listed in sut.ha.HA_MODES.

    `settings_class` is a dataclass parsed (sut.config.parse) from the
    broker config's `ha` object when the config is loaded, so a bad setting
    fails before the process starts.
    """

    mode: ClassVar[str] = ""
    settings_class: ClassVar[type] = object

    def __init__(self, broker: BrokerContext, settings: Any) -> None:
        self.broker = broker
        self.settings = settings
        self.store = broker.store
        self.log = broker.log

    @classmethod
    def check_config(cls, broker_config: Any, settings: Any) -> str | None:
        """A problem with this broker config for this mode, or None."""
        return None

    async def start(self) -> None:
        """Start replication; called after the store has recovered."""

    async def stop(self) -> None:
        """Stop replication; called before the store is closed."""

    @property
    def role(self) -> Role:
        raise NotImplementedError

    @property
    def broker_id(self) -> int:
        return self.broker.config.broker_id

    @property
    def ready(self) -> bool:
        """False while the broker must not serve yet (e.g. fenced until it knows its role)."""
        return True

    @property
    def replicating(self) -> bool:
        """True once replication runs as configured (deployers wait for it before a run)."""
        return True

    @property
    def registrable(self) -> bool:
        """False while the broker must stay out of the nameservers (controller mode: fenced)."""
        return True

    async def put(self, messages: list[Message]) -> PutResult:
        raise NotImplementedError

    def confirm_offset(self) -> int:
        """Consumers never read at or past this log position."""
        return self.store.max_offset

    def registration(self) -> dict[str, Any]:
        """Fields for REGISTER_BROKER beyond name/cluster/address."""
        return {"broker_id": self.broker_id, "role": self.role.value}

    def on_registered(self, fields: dict[str, Any]) -> None:
        """A nameserver answered a registration or heartbeat (master_addr, master_ha_addr)."""

    def handlers(self) -> dict[int, Handler]:
        return {}

    def status(self) -> dict[str, Any]:
        return {}

    async def append_local(self, messages: list[Message]) -> tuple[AppendResult, bool]:
        """Append to the local store and wait for the flush policy: (result, flushed in time)."""
        appended = self.store.append(messages)
        return appended, await self.store.wait_flushed(appended.end)


def status_after_append(flushed: bool, replicated: bool | None) -> ResponseCode:
    """The send status once appended (RocketMQ checks the disk first, then the slaves)."""
    if not flushed:
        return ResponseCode.FLUSH_DISK_TIMEOUT
    if replicated is False:
        return ResponseCode.FLUSH_SLAVE_TIMEOUT
    return ResponseCode.SUCCESS
