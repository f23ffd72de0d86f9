"""Process configuration: JSON files checked against dataclasses.

Every SUT process reads one JSON object. Each role describes its settings as
a dataclass; `parse` checks names and types so that a typo or a wrong type is
reported as one line naming the file and the field, instead of surfacing
later as a confusing failure on a remote node.
"""
from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any, Literal, TypeVar, Union

T = TypeVar("T")


class ConfigError(Exception):
    """A configuration problem; the message is one line saying what and where."""


def load_json(path: str | Path) -> dict[str, Any]:
    """Read a JSON object from a file, with one-line errors."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"config {path}: cannot read: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"config {path}: line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config {path}: the top level must be a JSON object")
    return data


def parse(cls: type[T], data: Any, where: str) -> T:
    """Build the dataclass `cls` from a JSON object, checking every field."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: must be an object, got {_kind(data)}")
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    for key in data:
        if key not in known:
            raise ConfigError(f"{where}: unknown field '{key}' (known: {', '.join(sorted(known))})")
    values = {}
    for name, f in known.items():
        if name in data:
            values[name] = _check(data[name], hints[name], f"{where}.{name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{where}: missing required field '{name}'")
    obj = cls(**values)
    validate = getattr(obj, "validate", None)
    if validate is not None:
        problem = validate()
        if problem:
            raise ConfigError(f"{where}: {problem}")
    return obj


def _check(value: Any, hint: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _check(value, arg, where)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[0] if len(errors) == 1 else f"{where}: unexpected {_kind(value)}")
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"{where}: must be one of {', '.join(map(repr, args))}, got {value!r}")
        return value
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{where}: must be a list, got {_kind(value)}")
        return [_check(v, args[0], f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: must be an object, got {_kind(value)}")
        return {k: _check(v, args[1], f"{where}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(hint):
        return parse(hint, value, where)
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: must be true or false, got {_kind(value)}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: must be an integer, got {_kind(value)}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: must be a number, got {_kind(value)}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: must be a string, got {_kind(value)}")
        return value
    raise TypeError(f"unsupported config type {hint!r} at {where}")  # a bug in a config class


def _kind(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "an object", type(None): "null"}.get(type(value), type(value).__name__)


def split_address(address: str, where: str) -> tuple[str, int]:
    """'host:port' -> (host, port), with a one-line error naming `where`."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"{where}: '{address}' is not a host:port address")
    return host, int(port)
