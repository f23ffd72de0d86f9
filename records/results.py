"""results.json: the checkers' verdict of one run, one section per checker."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, StrictBool

from records.base import StoreFile


class ResultsJson(StoreFile):
    """Written by `checkers.pipeline`; read by the harness (verdicts, shrinking) and the pages."""

    valid: StrictBool | Literal["unknown"] = "unknown"
    run: str | None = None
    workload: str | None = None
    checked_at: str | None = None
    checkers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    error: Any = None   # the checkers crashed: what happened (the verdict is then unknown)
