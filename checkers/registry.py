"""The one list of checkers: the built-ins, decorated classes and `chaos.checkers` plugins.

A checker is any object (or class, made without arguments) with `name`,
`sections`, `applies_to(run)` and `check(ctx, runs)`. `@register` adds it
here; a third-party package adds its own by declaring an entry point in the
group `chaos.checkers` that points at the class (or at a module whose import
registers classes). Every `check_runs` call runs them all, in registration
order: the built-ins first.

Importing this module imports no Spark: a plugin may import it cheaply.
"""
from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from plugins import PluginGroup

if TYPE_CHECKING:
    from .context import CheckContext, RunFacts

ENTRY_POINT_GROUP = "chaos.checkers"
BUILTIN = "builtin"
_BUILTIN_MODULE = "checkers.builtin"

Sections = dict[str, dict[str, Any]]  # results.json section name -> section


@runtime_checkable
class Checker(Protocol):
    """The whole protocol: a name, the sections it fills, which runs it applies to, and the check.

    `check(ctx, runs)` gets the runs `applies_to` accepted (never none) and
    returns one {section: result} per run, in order, naming exactly
    `sections`; each result holds at least `valid` (True, False or
    "unknown"). Every other run gets `not_applicable(run)` if the checker
    has that method, else a valid, unchecked section saying why.
    """

    name: str
    sections: tuple[str, ...]

    def applies_to(self, run: RunFacts) -> bool: ...

    def check(self, ctx: CheckContext, runs: list[RunFacts]) -> list[Sections]: ...


class CheckerError(ValueError):
    """A checker that cannot be registered (one line: which and why)."""


@dataclass(frozen=True)
class Registration:
    """A registered checker and where it came from."""

    checker: Checker
    origin: str

    @property
    def name(self) -> str:
        return self.checker.name


def not_applicable(checker: Checker, run: RunFacts) -> Sections:
    """The sections of a run `checker` does not apply to: its own `not_applicable(run)`
    if it has one, else valid and unchecked, saying why."""
    own = getattr(checker, "not_applicable", None)
    if own is not None:
        return own(run)
    reason = f"not applicable to workload {run.workload!r}"
    return {name: {"valid": True, "checked": False, "reason": reason} for name in checker.sections}


_registry: dict[str, Registration] = {}


def register(target: Any = None, *, origin: str | None = None) -> Any:
    """Register a checker: `@register` on a class (made without arguments) or
    `register(instance)`. Returns the target unchanged."""
    def add(given: Any) -> Any:
        if inspect.isclass(given):
            known = _registry.get(getattr(given, "name", None))
            if known is not None and type(known.checker) is given:
                return given  # the same class again (decorated and named by an entry point)
        checker = given() if inspect.isclass(given) else given
        where = origin or getattr(given, "__module__", "?")
        name = _validated(checker)
        known = _registry.get(name)
        if known is not None:
            raise CheckerError(f"checker name {name!r} is taken by {known.origin}; {where} cannot register it again")
        for other in _registry.values():
            shared = sorted(set(other.checker.sections) & set(checker.sections))
            if shared:
                raise CheckerError(f"checker {name}: section(s) {', '.join(shared)} already filled by "
                                   f"checker {other.name} ({other.origin})")
        _registry[name] = Registration(checker, where)
        return given

    return add if target is None else add(target)


def _validated(checker: Any) -> str:
    """The checker's name once it has everything the protocol asks for."""
    name = getattr(checker, "name", None)
    if not name or not isinstance(name, str):
        raise CheckerError(f"{checker!r}: a checker needs a `name` to be registered")
    sections = getattr(checker, "sections", None)
    if (not isinstance(sections, tuple) or not sections
            or not all(isinstance(s, str) and s for s in sections)):
        raise CheckerError(f"checker {name}: `sections` must be a non-empty tuple of section names")
    for method in ("applies_to", "check"):
        if not callable(getattr(checker, method, None)):
            raise CheckerError(f"checker {name}: missing the {method}() method")
    return name


def known() -> list[Registration]:
    """Every checker, in the order they run: the built-ins, then the others as registered."""
    importlib.import_module(_BUILTIN_MODULE)
    load_plugins()
    return list(_registry.values())


def plugin_errors() -> list[str]:
    """Plugins that failed to load (one line each); their checkers do not run."""
    return _plugins.errors()


def load_plugins(reload: bool = False) -> None:
    """Import every `chaos.checkers` entry point once (again with `reload`)."""
    _plugins.load(reload)


_plugins = PluginGroup(ENTRY_POINT_GROUP, lambda cls, origin: register(cls, origin=origin),
                       before=lambda: importlib.import_module(_BUILTIN_MODULE))  # built-ins first
