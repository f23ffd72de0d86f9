"""What the three store files share: the schema version, reading, one-line errors."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

# Raised when a file's meaning changes; readers refuse files of another version.
SCHEMA_VERSION = 1


class StoreFormatError(ValueError):
    """A store file that cannot be used: one line naming the file and what is wrong."""


class OldStoreError(StoreFormatError):
    """A store file written by an older (or newer) rocketmq-chaos than this one."""


class StoreFile(BaseModel):
    """A versioned store file; fields this version does not know are kept as they are."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    schema_version: int = Field(SCHEMA_VERSION, description="written by the harness; readers check it")

    def as_json(self) -> dict[str, Any]:
        """The file's JSON object (what the writers store); a value JSON has no type for
        (a numpy number in a checker's section) is written as its text."""
        return self.model_dump(mode="json", fallback=str)


Model = TypeVar("Model", bound=StoreFile)


def version_problem(doc: dict[str, Any], source: str) -> str | None:
    """Why `doc` is not of this schema version, or None."""
    version = doc.get("schema_version")
    if version is None:
        return (f"{source}: written by an older rocketmq-chaos (no schema_version); this version reads "
                f"schema {SCHEMA_VERSION}: use the release that wrote it, or run it again")
    if version != SCHEMA_VERSION:
        return (f"{source}: schema_version {version!r}, this version of rocketmq-chaos reads "
                f"schema {SCHEMA_VERSION}: read it with the release that wrote it")
    return None


def parse_model(model: type[Model], doc: Any, source: str) -> Model:
    """`doc` (decoded JSON) as `model`; StoreFormatError (OldStoreError for a version) if not."""
    if not isinstance(doc, dict):
        raise StoreFormatError(f"{source}: expected a JSON object")
    problem = version_problem(doc, source)
    if problem is not None:
        raise OldStoreError(problem)
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        raise StoreFormatError(f"{source}: `{where}`: {error['msg']}, got {error.get('input')!r}") from None


def read_model(model: type[Model], path: Path) -> Model:
    """The file at `path` as `model` (FileNotFoundError when it is missing)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise  # the caller knows what a missing file means (defaults, "missing", not checked)
    except (OSError, UnicodeDecodeError) as exc:
        raise StoreFormatError(f"{path}: unreadable: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise StoreFormatError(f"{path}: not readable JSON ({exc})") from None
    return parse_model(model, doc, str(path))


def version_problem_of(path: Path) -> str | None:
    """Why the store file at `path` is of another schema version; None when it is of this
    one, or missing, or not a JSON object (those are the readers' to report)."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return version_problem(doc, str(path)) if isinstance(doc, dict) else None
