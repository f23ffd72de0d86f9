"""The registry of RocketMQ's historic HA bugs (sut/rocketmq/bugs.yaml, docs/rocketmq-bugs.md).

Validated here so that a bug names served releases in the right order, anomaly
classes the checkers report, and a recipe that `chaos run` accepts on both of its
releases; the teeth of real RocketMQ read it through `load`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from harness.shrink.failure import PRIORITY as ANOMALY_CLASSES
from sut.rocketmq.release import SERVED, key

REGISTRY = Path(__file__).resolve().parents[2] / "sut" / "rocketmq" / "bugs.yaml"


class RegistryError(ValueError):
    """The registry cannot be used (one line)."""


class Recipe(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    profile: str
    faults: tuple[str, ...] = Field(min_length=1)
    targets: tuple[str, ...] = ()
    timing: str = "fast"
    time: float = Field(60, gt=0)
    # Quiet time before each fault and each fault's length; None: the profile's defaults.
    # A killed RocketMQ JVM takes 20-40 s to serve again here, so kills need long quiet times.
    interval: float | None = Field(None, gt=0)
    duration: float | None = Field(None, gt=0)
    recovery: float | None = Field(None, gt=0)
    workload: str = "queue"
    # Sends per second and clients in flight; None: the regressions file's. A race the recipe
    # must win needs more puts in flight at the instant than a kill recipe wants load on the box.
    rate: float | None = Field(None, gt=0)
    concurrency: int | None = Field(None, ge=1, le=512)

    def spec_values(self, version: str) -> dict[str, Any]:
        """`chaos run` values of the recipe on one release (the caller adds store, seed, ...)."""
        shape = {k: v for k, v in (("interval", self.interval), ("duration", self.duration),
                                   ("recovery", self.recovery), ("rate", self.rate),
                                   ("concurrency", self.concurrency)) if v is not None}
        return {"profile": self.profile, "faults": list(self.faults), "targets": list(self.targets),
                "timing": self.timing, "time": self.time, "workload": self.workload, "rocketmq_version": version,
                **shape}


class HistoricBug(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{2,80}$")
    issue: int
    fix: str
    title: str
    mode: str
    buggy_version: str
    fixed_version: str
    evidence: dict[str, str]
    recipe: Recipe
    anomalies: tuple[str, ...] = Field(min_length=1)
    reachable: bool
    needs: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> "HistoricBug":
        for which in ("buggy_version", "fixed_version"):
            if getattr(self, which) not in SERVED:
                raise ValueError(f"{which} {getattr(self, which)} is not a served release ({', '.join(SERVED)})")
        if key(self.buggy_version) >= key(self.fixed_version):
            raise ValueError(f"buggy_version {self.buggy_version} is not older than fixed_version {self.fixed_version}")
        unknown = sorted(set(self.anomalies) - set(ANOMALY_CLASSES))
        if unknown:
            raise ValueError(f"anomalies {', '.join(unknown)} are no checker's (known: {', '.join(ANOMALY_CLASSES)})")
        if set(self.evidence) != {"buggy", "fixed"}:
            raise ValueError("evidence gives exactly `buggy` and `fixed` (file:lines @ tag)")
        if not self.reachable and not self.needs:
            raise ValueError("an unreachable bug says in `needs` what is missing")
        return self


class Registry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: int = 1
    bugs: tuple[HistoricBug, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> "Registry":
        ids = [bug.id for bug in self.bugs]
        if len(set(ids)) != len(ids):
            raise ValueError("a bug id is listed twice")
        return self

    def get(self, bug_id: str) -> HistoricBug:
        for bug in self.bugs:
            if bug.id == bug_id:
                return bug
        raise RegistryError(f"no historic RocketMQ bug {bug_id!r}; known: {', '.join(b.id for b in self.bugs)}")


def load(path: Path = REGISTRY) -> Registry:
    try:
        return Registry.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    except OSError as exc:
        raise RegistryError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise RegistryError(f"{path}: not valid YAML: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise RegistryError(f"{path}: {where}: {first['msg']}") from None
