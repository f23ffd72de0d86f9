"""The `register` workload: read / write / compare-and-set on a few Raft KV keys.

Each key is an independent register (the history `key`), so the checker runs
the cas-register model per key (P-compositional). Registers start as null.
Values are small integers (0-4) so that compare-and-set succeeds often enough
to matter. A cas that the state machine rejects because the current value
differs is a definite `fail` with error "cas-mismatch" (the checkers count
it as an answer for availability); a write or cas without an answer is `info`.
The final phase reads every key once.
"""
from __future__ import annotations

import random
from typing import Any

from sut.profiles import PROFILES, ProcessSpec
from workloads.base import Completion, OpRunner, Workload, spread, weighted_choice
from workloads.clients import Endpoints, RegisterClient
from workloads.registry import Route, register

VALUES = 5


def serves_kv(process: ProcessSpec) -> bool:
    """DLedger brokers serve the Raft KV store on their broker port (sut/dledger.py)."""
    return process.role == "broker" and process.config.get("ha_mode") == "dledger"


def kv_profiles() -> list[str]:
    """The profiles the register workload can run on (the model's: the Raft KV is ours)."""
    return sorted(name for name, profile in PROFILES.items() if any(map(serves_kv, profile.processes)))


def key_name(key: int) -> str:
    """The key in the SUT's key-value store for register `key`."""
    return f"register-{key}"


@register
class RegisterWorkload(Workload):
    name = "register"
    route = Route(frozenset({"write", "cas"}), model="cas-register")
    description = "read, write and compare-and-set on Raft KV keys; checked with cas-register per key"
    default_mix = {"read": 2.0, "write": 1.0, "cas": 1.0}

    @classmethod
    def unsupported(cls, profile: str) -> str | None:
        known = kv_profiles()
        refused = super().unsupported(profile)
        if refused:
            return f"{refused}; or a profile with a Raft key-value store: {', '.join(known) or 'none available'}"
        if profile not in known:
            return (f"workload register needs a profile with a Raft key-value store "
                    f"({', '.join(known) or 'none available'}), not {profile!r}")
        return None

    def plan_op(self, rng: random.Random, index: int, worker: int, concurrency: int) -> tuple[str, Any, Any]:
        f = weighted_choice(rng, self.mix)
        key = rng.randrange(self.options.keys)
        if f == "write":
            return f, key, rng.randrange(VALUES)
        if f == "cas":
            return f, key, [rng.randrange(VALUES), rng.randrange(VALUES)]
        return f, key, None

    def client(self, endpoints: Endpoints, node_names: dict[str, str] | None = None) -> RegisterClient:
        return RegisterClient(endpoints, self.options.op_timeout, node_names)

    async def execute(self, client: Any, worker: int, f: str, key: Any, value: Any) -> Completion:
        name = key_name(key)
        if f == "read":
            return await client.read(name)
        if f == "write":
            done = await client.write(name, value)
            return Completion(done.type, value, done.node, done.error)
        if f == "cas":
            done = await client.cas(name, value[0], value[1])
            return Completion(done.type, value, done.node, done.error)
        raise ValueError(f"register workload: unknown operation {f!r}")

    async def final_phase(self, run: OpRunner) -> None:
        await spread(self.options.concurrency, range(self.options.keys),
                     lambda worker, key: run(worker, "read", key, None))
