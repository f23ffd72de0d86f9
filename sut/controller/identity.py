"""The broker's controller-assigned id, persisted so a restarted broker keeps it.

Applying for an id is a two-step dance that survives a crash at any point:
the broker writes the id it is about to claim, with a random check code, to a
*pending* file; asks the controller to apply it (retrying with the same check
code is idempotent); then writes the *final* file and removes the pending one.
A broker that restarts with only a pending file retries the same claim.
Both files are written temp-then-rename, so they are never half written.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from sut.store.metadata import write_atomic


class IdentityError(Exception):
    """An identity file exists but is unreadable or belongs to another broker group."""


@dataclass(frozen=True)
class BrokerIdentity:
    cluster: str
    broker_name: str
    broker_id: int
    check_code: str


class IdentityStore:
    """`<dir>/broker_identity.json` (final) and `<dir>/broker_identity.pending.json`."""

    def __init__(self, directory: str | os.PathLike, cluster: str, broker_name: str) -> None:
        self.dir = Path(directory)
        self.cluster, self.broker_name = cluster, broker_name
        self.final_path = self.dir / "broker_identity.json"
        self.pending_path = self.dir / "broker_identity.pending.json"

    def _read(self, path: Path) -> BrokerIdentity | None:
        if not path.exists():
            return None
        try:
            raw = json.loads(path.read_text())
            identity = BrokerIdentity(str(raw["cluster"]), str(raw["broker_name"]),
                                      int(raw["broker_id"]), str(raw["check_code"]))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise IdentityError(f"{path}: unreadable broker identity: {exc}") from None
        if (identity.cluster, identity.broker_name) != (self.cluster, self.broker_name):
            raise IdentityError(f"{path}: identity of {identity.cluster}/{identity.broker_name}, "
                                f"but this broker is {self.cluster}/{self.broker_name}")
        return identity

    def load_final(self) -> BrokerIdentity | None:
        return self._read(self.final_path)

    def load_pending(self) -> BrokerIdentity | None:
        return self._read(self.pending_path)

    def save_pending(self, identity: BrokerIdentity) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        write_atomic(self.pending_path, json.dumps(asdict(identity)).encode())

    def commit(self, identity: BrokerIdentity) -> None:
        """The controller accepted the claim: make it final, drop the pending file."""
        self.dir.mkdir(parents=True, exist_ok=True)
        write_atomic(self.final_path, json.dumps(asdict(identity)).encode())
        self.discard_pending()

    def discard_pending(self) -> None:
        self.pending_path.unlink(missing_ok=True)
