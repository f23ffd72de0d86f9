"""Loading third-party plugins from an entry-point group, shared by the nemesis and checker
registries so that both treat a broken plugin the same way: reported, never fatal."""
from __future__ import annotations

import inspect
from collections.abc import Callable
from importlib.metadata import entry_points


def load_group(group: str, register: Callable[..., object]) -> list[str]:
    """Import every entry point of `group` and pass each class it names to
    `register(cls, origin=...)`. Returns one line per plugin that failed, so one bad plugin
    never hides the others."""
    errors = []
    for point in entry_points(group=group):
        origin = f"plugin {point.dist.name if point.dist else point.value}"
        try:
            loaded = point.load()
            if inspect.isclass(loaded):
                register(loaded, origin=origin)
        # SystemExit too: a plugin calling sys.exit() at import must not end the harness
        except (Exception, SystemExit) as error:  # noqa: BLE001 - reported to the user as one line
            errors.append(f"entry point {point.name} = {point.value} ({origin}): "
                          f"{type(error).__name__}: {error}")
    return errors


class PluginGroup:
    """An entry-point group imported once per process (again on `load(reload=True)`), with
    the lines of the plugins that failed."""

    def __init__(self, group: str, register: Callable[..., object],
                 before: Callable[[], object] = lambda: None) -> None:
        self.group, self._register, self._before = group, register, before
        self._loaded = False
        self._errors: list[str] = []

    def load(self, reload: bool = False) -> None:
        if self._loaded and not reload:
            return
        self._before()
        self._loaded = True
        self._errors = load_group(self.group, self._register)

    def errors(self) -> list[str]:
        self.load()
        return list(self._errors)
