"""The one list of fault names: built-ins, decorated classes and `chaos.faults` plugins.

A nemesis is any class with `name`, `description`, `start(ctx) -> handle` and
`stop(ctx, handle)`. `@register` adds it here; a third-party package adds its
own by declaring an entry point in the group `chaos.faults` that points at the
class (or at a module whose import registers classes).
"""
from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from faults import options as typed
from faults.context import FaultContext, FaultError
from plugins import PluginGroup

ENTRY_POINT_GROUP = "chaos.faults"


@runtime_checkable
class Nemesis(Protocol):
    """The whole protocol: name, description, start and stop."""

    name: str
    description: str

    def start(self, ctx: FaultContext) -> Any: ...

    def stop(self, ctx: FaultContext, handle: Any) -> None: ...


@dataclass(frozen=True)
class Registration:
    """A fault name and how to make its nemesis (`factory(**options)`)."""

    name: str
    description: str
    factory: Callable[..., Any]
    origin: str
    cls: Any = None

    def options(self) -> list[str]:
        """Option names the factory accepts (what `name:key=value` may set)."""
        return list(self.option_types())

    def option_types(self) -> dict[str, inspect.Parameter]:
        """Each option's parameter (its annotation is the option's type, see faults.options)."""
        params = _signature(self.factory).parameters.values()
        return {p.name: p for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}

    def checked(self, options: dict[str, Any]) -> dict[str, Any]:
        """The options converted to their types; FaultError names the fault, the option
        and what is allowed."""
        types = self.option_types()
        extra = [key for key in options if key not in types]
        if extra:
            allowed = ", ".join(types) or "none"
            shown = ", ".join(key if key.isidentifier() else repr(key) for key in extra)
            raise FaultError(f"fault {self.name}: unknown option(s) {shown} "
                             f"(options: {allowed})")
        values = {}
        for key, value in options.items():
            annotation = types[key].annotation
            try:
                values[key] = typed.check(None if annotation is inspect.Parameter.empty else annotation, value)
            except ValueError as error:
                allowed = "" if "allowed" in str(error) else f"; allowed: {typed.describe(annotation)}"
                raise FaultError(f"fault {self.name}: option {key}={value!r}: {error}{allowed}") from None
        return values


def _signature(target: Any) -> inspect.Signature:
    """The signature with string annotations resolved (modules use `from __future__
    import annotations`); unresolvable ones stay as they are."""
    try:
        return inspect.signature(target, eval_str=True)
    except (NameError, TypeError, SyntaxError):
        try:
            return inspect.signature(target)
        except (TypeError, ValueError):
            return inspect.Signature()
    except ValueError:
        return inspect.Signature()


_registry: dict[str, Registration] = {}


def register(target: Any = None, *, name: str | None = None, description: str | None = None,
             origin: str | None = None, **defaults: Any) -> Any:
    """Register a nemesis class: `@register`, `@register(name=...)`, or
    `register(Cls, name="x-kill", selector="x")` with default options (how the
    built-ins make several names from one class). Returns the class unchanged."""
    def add(cls: Any) -> Any:
        fault_name = name or getattr(cls, "name", None)
        if not fault_name or not isinstance(fault_name, str):
            raise FaultError(f"{cls!r}: a nemesis needs a `name` to be registered")
        for method in ("start", "stop"):
            if not callable(getattr(cls, method, None)):
                raise FaultError(f"nemesis {fault_name}: missing the {method}() method")
        text = description or getattr(cls, "description", None) or (inspect.getdoc(cls) or "").split("\n")[0]
        where = origin or getattr(cls, "__module__", "?")
        factory = _factory(cls, fault_name, defaults) if (defaults or name) else cls
        known = _registry.get(fault_name)
        if known is not None and known.cls is cls:
            return cls  # the same class again (decorated and named by an entry point)
        if known is not None:
            raise FaultError(f"fault name {fault_name!r} is taken by {known.origin}; "
                             f"{where} cannot register it again")
        _registry[fault_name] = Registration(fault_name, text, factory, where, cls)
        return cls

    return add if target is None else add(target)


def _factory(cls: Any, fault_name: str, defaults: dict[str, Any]) -> Callable[..., Any]:
    def make(**options: Any) -> Any:
        nemesis = cls(**{**defaults, **options})
        nemesis.name = fault_name
        return nemesis

    # Advertise the class's own options minus the ones the name fixes.
    signature = _signature(cls)
    make.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[p for p in signature.parameters.values() if p.name not in defaults])
    return make


def known() -> dict[str, Registration]:
    """Every fault name, plugins included, sorted by name."""
    load_plugins()
    return dict(sorted(_registry.items()))


def names() -> list[str]:
    """Every fault name, plugins included, sorted."""
    return list(known())


def plugin_errors() -> list[str]:
    """Plugins that failed to load (one line each); their names are missing from known()."""
    return _plugins.errors()


def load_plugins(reload: bool = False) -> None:
    """Import every `chaos.faults` entry point once (again with `reload`)."""
    _plugins.load(reload)


def unknown_fault(name: str) -> FaultError:
    """The error for a name nobody registered: lists the known ones."""
    return FaultError(f"unknown fault {name!r}; known faults: {', '.join(known())}")


def lookup(name: str) -> Registration:
    registration = known().get(name)
    if registration is None:
        raise unknown_fault(name)
    return registration


def create(name: str, **options: Any) -> Any:
    """A nemesis for `name` with options; errors name the fault and the bad option."""
    registration = lookup(name)
    values = registration.checked(options)
    try:
        return registration.factory(**values)
    except FaultError:
        raise
    except (TypeError, ValueError) as error:
        raise FaultError(f"fault {name}: {error}") from None


_plugins = PluginGroup(ENTRY_POINT_GROUP, lambda cls, origin: register(cls, origin=origin))
