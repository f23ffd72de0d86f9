"""Typed fault options: what `name:key=value` may say, checked before anything starts.

A nemesis declares its options as typed `__init__` parameters; the registry
validates every value given on the command line (or in a campaign file) against
that type and refuses a bad one with the fault, the option and what is allowed.
The types here are the ones the built-ins use and plugins may reuse: every value
that later reaches a remote command is one of a known, safe alphabet (a signal
from the real table, a node name, a number), so no user text ever reaches a
shell as code.
"""
from __future__ import annotations

import inspect
import math
import re
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import AfterValidator, BeforeValidator, Field, PydanticUserError, TypeAdapter, ValidationError

from inventory.model import NAME_PATTERN, PATH_PATTERN
from nuclei.process import signal_name
from nuclei.shape import check_rate

_NODE_NAME = re.compile(NAME_PATTERN)


def _kill_signal(value: Any) -> str:
    return signal_name(value, fatal=True)


def _any_signal(value: Any) -> str:
    return signal_name(value)


def _node_names(value: Any) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise ValueError(f"expected node names like n1,n2, got {value!r}")
    bad = [item for item in items if not isinstance(item, str) or not _NODE_NAME.fullmatch(item)]
    if bad:
        raise ValueError(f"{bad[0]!r} is not a node name (letters, digits, '.', '_', '-'; e.g. n1,n2)")
    return tuple(items)


def _probability(value: float) -> float:
    if not (math.isfinite(value) and 0 < value <= 1):
        raise ValueError(f"probability must be in (0, 1], got {value:g}")
    return value


def _rate(value: Any) -> str:
    try:
        return check_rate(value)
    except Exception as error:  # NucleusError: its text says what a rate looks like
        raise ValueError(str(error)) from None


DIRECTIONS = ("forward", "back", "random")


def _direction(value: Any) -> str:
    if value not in DIRECTIONS:
        raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)}, got {value!r}")
    return str(value)


def _clock_rate(value: float) -> float:
    if not (math.isfinite(value) and 0.5 <= value <= 2 and value != 1):
        raise ValueError(f"rate must be in [0.5, 2] and not 1 (1.05: 5 % fast, 0.95: 5 % slow), got {value:g}")
    return value


def _duration(value: float) -> float:
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"duration must be > 0 seconds, got {value:g}")
    return value


MAX_DIRTY_EXPIRE_S = 3600.0


def _dirty_expire(value: float) -> float:
    if not (math.isfinite(value) and 0 < value <= MAX_DIRTY_EXPIRE_S):
        raise ValueError(f"{value:g} s is out of range; allowed: seconds in (0, {MAX_DIRTY_EXPIRE_S:g}] "
                         f"(Linux's dirty_expire_centisecs is 30 s)")
    return value


# A signal by name (KILL, SIGTERM) or number (9) that ends a process; stored as its name.
KillSignal = Annotated[str, BeforeValidator(_kill_signal)]
# Any signal of the real table, by name or number; stored as its name.
Signal = Annotated[str, BeforeValidator(_any_signal)]
# A probability of loss: 0 (nothing lost) is no fault, so (0, 1].
Probability = Annotated[float, AfterValidator(_probability)]
# A duration in seconds, > 0.
Duration = Annotated[float, AfterValidator(_duration)]
# Milliseconds of added link delay, [0, 60000].
Milliseconds = Annotated[float, Field(ge=0, le=60_000, allow_inf_nan=False)]
# A clock jump in milliseconds, (0, 1 hour].
SkewMs = Annotated[float, Field(gt=0, le=3_600_000, allow_inf_nan=False)]
# Which way a clock jumps: forward, back, or either (drawn per node from the run's seed).
Direction = Annotated[str, BeforeValidator(_direction)]
# How fast a drifting clock runs against the true one: 1.05 gains 5 %, 0.95 loses 5 %.
ClockRate = Annotated[float, AfterValidator(_clock_rate)]
# Seconds between two flips of a strobing clock: libfaketime reads its file once a second.
StrobePeriod = Annotated[float, Field(ge=1, le=600, allow_inf_nan=False)]
# Seconds a dirty page may stay unwritten before the kernel writes it back, (0, 3600].
DirtyExpire = Annotated[float, AfterValidator(_dirty_expire)]
# A link rate in tc's syntax (1mbit, 500kbit, 2mbps).
Rate = Annotated[str, BeforeValidator(_rate)]
Port = Annotated[int, Field(ge=1, le=65535)]
# Node names (n1,n2); checked against the inventory before the run starts.
NodeNames = Annotated[tuple[str, ...], BeforeValidator(_node_names)]
RemotePath = Annotated[str, Field(pattern=PATH_PATTERN, max_length=4096)]

# How each type is shown in `chaos faults` and docs/nemeses.md.
_SHOWN = {
    "KillSignal": "signal that ends a process: name or number (KILL, TERM, 9)",
    "Signal": "signal: name or number",
    "Probability": "number in (0, 1]",
    "Duration": "seconds > 0",
    "Rate": "rate in tc syntax (1mbit, 500kbit, 2mbps)",
    "Milliseconds": "milliseconds in [0, 60000]",
    "SkewMs": "milliseconds in (0, 3600000]",
    "Direction": "forward, back or random",
    "ClockRate": "clock rate in [0.5, 2], not 1 (1.05 = 5 % fast)",
    "StrobePeriod": "seconds in [1, 600]",
    "DirtyExpire": "seconds in (0, 3600]",
    "Port": "port 1-65535",
    "NodeNames": "node names, comma-separated (n1,n2)",
    "RemotePath": "absolute path",
}
_NAMES = {id(KillSignal): "KillSignal", id(Signal): "Signal", id(Probability): "Probability",
          id(Duration): "Duration", id(Rate): "Rate", id(Milliseconds): "Milliseconds",
          id(Port): "Port", id(NodeNames): "NodeNames", id(RemotePath): "RemotePath",
          id(SkewMs): "SkewMs", id(Direction): "Direction", id(ClockRate): "ClockRate",
          id(StrobePeriod): "StrobePeriod", id(DirtyExpire): "DirtyExpire"}


def check(annotation: Any, value: Any) -> Any:
    """`value` converted to the option's type; ValueError says what is allowed."""
    if annotation is Any or annotation is None or isinstance(annotation, str):
        return value  # untyped, or a plugin's annotation that could not be resolved
    try:
        adapter = TypeAdapter(annotation)
    except PydanticUserError:
        return value  # not a type pydantic can check: the nemesis checks it itself
    try:
        return adapter.validate_python(value)
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        raise ValueError(first["msg"].removeprefix("Value error, ")) from None


def describe(annotation: Any) -> str:
    """A short description of what an option accepts, for help and docs."""
    name = _NAMES.get(id(annotation))
    if name is not None:
        return _SHOWN[name]
    if annotation is inspect.Parameter.empty:
        return "value"
    if get_origin(annotation) in (Union, UnionType):  # an option that may be left unset: `X | None`
        given = [arg for arg in get_args(annotation) if arg is not type(None)]
        if len(given) == 1:
            return describe(given[0])
    if get_origin(annotation) is Annotated:  # a nemesis's own option type: its description, else its base
        base, *extras = get_args(annotation)
        described = [extra.description for extra in extras if getattr(extra, "description", None)]
        return described[0] if described else describe(base)
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")
