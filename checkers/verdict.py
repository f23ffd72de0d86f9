"""Verdicts: merging validity the Jepsen way and turning crashes into `unknown`."""
from __future__ import annotations

import logging
from typing import Any, Callable, Iterable

Valid = bool | str  # True, False or "unknown"
UNKNOWN = "unknown"
_RANK = {False: 0, UNKNOWN: 1, True: 2}

log = logging.getLogger(__name__)


def is_verdict(value: Any, wanted: Valid) -> bool:
    """Whether `value` is the verdict `wanted`, compared by value and type.

    Never by identity: a verdict decoded from JSON is a new string object, so
    `value is "unknown"` is false for it. Never by `==` alone either: `0 == False`
    and `1 == True`, and a count is not a verdict.
    """
    return type(value) is type(wanted) and value == wanted


def has_verdict(value: Any) -> bool:
    """Whether `value` is true or false: anything else (unknown, missing, malformed) is no verdict."""
    return is_verdict(value, True) or is_verdict(value, False)


def as_verdict(value: Any) -> Valid:
    """`value` as a verdict: true or false when it is that bool, else unknown."""
    return value if has_verdict(value) else UNKNOWN


def merge_valid(verdicts: Iterable[Valid]) -> Valid:
    """false beats unknown beats true; no verdicts at all is true (nothing failed)."""
    worst: Valid = True
    for verdict in verdicts:
        if not (has_verdict(verdict) or is_verdict(verdict, UNKNOWN)):
            raise ValueError(f"not a verdict: {verdict!r}")
        if _RANK[verdict] < _RANK[worst]:
            worst = verdict
    return worst


def exit_code(verdict: Valid) -> int:
    """The CLI exit code of a verdict: 0 valid, 1 invalid, 2 unknown."""
    return {True: 0, False: 1, UNKNOWN: 2}[verdict]


def crashed(error: BaseException) -> dict[str, Any]:
    """The section of a checker that raised: unknown, with the error."""
    return {"valid": UNKNOWN, "error": f"{type(error).__name__}: {error}"}


def guarded(names: tuple[str, ...], check: Callable[[], list[dict[str, Any]]],
            n_runs: int) -> list[dict[str, Any]]:
    """Run a checker that fills sections `names` of every run's results.

    It returns one {name: section} per run; if it raises, each of its
    sections in every run becomes `unknown` with the error.
    """
    try:
        per_run = check()
        if len(per_run) != n_runs or any(set(s) != set(names) for s in per_run):
            raise RuntimeError("checker returned sections for the wrong runs or names")
    except Exception as exc:  # a checker bug must not lose the other checkers' verdicts
        # the error is in results.json; the traceback only for those who ask (logging DEBUG)
        log.debug("checker %s failed", "/".join(names), exc_info=True)
        return [{name: crashed(exc) for name in names} for _ in range(n_runs)]
    return per_run


def merge_results(sections: dict[str, dict[str, Any]]) -> Valid:
    """The top verdict of a results.json from its checker sections."""
    return merge_valid(section.get("valid", UNKNOWN) for section in sections.values())
