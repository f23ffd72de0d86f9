"""The one list of workloads and the checks each gets: built-ins, decorated classes and
`chaos.workloads` plugins.

A workload is a class (workloads.base.Workload) with a `name` and a `route`: which
operation names identify its histories, how its queue section is filled and which
linearizability model checks it. `@register` adds it here; a third-party package adds
its own by declaring an entry point in the group `chaos.workloads` that points at the
class (docs/workloads.md, "A workload as a plugin"). The checkers read the routes from
here (checkers/routes.py), so a new workload touches this one list, as a new fault or
checker touches theirs.

Importing this module imports no workload: the checkers may import it cheaply.
"""
from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from typing import Any

from plugins import PluginGroup

ENTRY_POINT_GROUP = "chaos.workloads"
# Registered in this order, the order infer_workload tries them.
_BUILTIN_MODULES = ("workloads.queue", "workloads.log", "workloads.register", "workloads.group",
                     "workloads.ordered", "workloads.transactional", "workloads.delayed")

# How the `queue` section of a run is filled (checkers/anomalies.py): by
# following message ids (checkers/queue.py, which also fills `order`) or
# values at log offsets (checkers/logs.py).
MESSAGE_ANOMALIES = "messages"
LOG_ANOMALIES = "log"


@dataclass(frozen=True)
class Route:
    """How the checkers treat one workload."""

    functions: frozenset[str]  # operations that identify it when run.json does not name it
    anomalies: str | None = None  # MESSAGE_ANOMALIES, LOG_ANOMALIES or None: no queue section
    model: str | None = None  # the knossos model of the linearizable checker; None: not checked


class WorkloadError(ValueError):
    """A workload that cannot be registered (one line: which and why)."""


@dataclass(frozen=True)
class Registration:
    cls: Any
    origin: str

    @property
    def route(self) -> Route:
        return self.cls.route


_registry: dict[str, Registration] = {}


def register(cls: Any = None, *, origin: str | None = None) -> Any:
    """Register a workload class (`@register`); returns it unchanged."""
    def add(given: Any) -> Any:
        name = getattr(given, "name", None)
        where = origin or getattr(given, "__module__", "?")
        if not inspect.isclass(given) or not isinstance(name, str) or not name:
            raise WorkloadError(f"{given!r}: a workload is a class with a `name` to be registered")
        if not isinstance(getattr(given, "route", None), Route):
            raise WorkloadError(f"workload {name}: `route` must be a workloads.registry.Route")
        for method in ("plan_op", "client", "execute"):
            if not callable(getattr(given, method, None)):
                raise WorkloadError(f"workload {name}: missing the {method}() method")
        known = _registry.get(name)
        if known is not None and known.cls is given:
            return given  # the same class again (decorated and named by an entry point)
        if known is not None:
            raise WorkloadError(f"workload name {name!r} is taken by {known.origin}; {where} cannot register it again")
        _registry[name] = Registration(given, where)
        return given

    return add if cls is None else add(cls)


def _builtins() -> None:
    for module in _BUILTIN_MODULES:
        importlib.import_module(module)


def _in_order() -> list[tuple[str, Registration]]:
    """The built-ins in _BUILTIN_MODULES' order (whichever was imported first), then the
    others as registered."""
    load_plugins()
    builtin = {module: index for index, module in enumerate(_BUILTIN_MODULES)}
    return sorted(_registry.items(), key=lambda item: builtin.get(item[1].cls.__module__, len(builtin)))


def known() -> dict[str, Any]:
    """Every workload class by name, plugins included: the built-ins first, in order."""
    return {name: entry.cls for name, entry in _in_order()}


def routes() -> dict[str, Route]:
    """Every workload's route, in the order infer_workload tries them."""
    return {name: entry.route for name, entry in _in_order()}


def get(name: str) -> Any:
    """The workload class called `name`; KeyError names the known ones."""
    found = known()
    try:
        return found[name]
    except KeyError:
        raise KeyError(f"unknown workload {name!r}; known: {', '.join(sorted(found))}") from None


def plugin_errors() -> list[str]:
    """Plugins that failed to load (one line each); their workloads are missing from known()."""
    return _plugins.errors()


def load_plugins(reload: bool = False) -> None:
    """Import the built-ins, then every `chaos.workloads` entry point, once (again with `reload`)."""
    _plugins.load(reload)


_plugins = PluginGroup(ENTRY_POINT_GROUP, lambda cls, origin: register(cls, origin=origin), before=_builtins)
