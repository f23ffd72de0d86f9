"""Node descriptions and the inventory file that lists them.

An inventory is a YAML file; the local provisioner writes one, and users write
one by hand for real hosts (`kind: ssh`). Loading validates everything up front
so a typo fails with the file, the field and the problem instead of a
connection error minutes into a run.

Example of a hand-written inventory::

    name: lab
    kind: ssh
    strict_host_keys: true          # default; false accepts unknown host keys
    known_hosts: ~/.ssh/known_hosts # optional; default: system + user files
    defaults: {user: admin, key_file: ~/.ssh/lab_ed25519, sudo: true}
    nodes:
      - {name: n1, host: 192.0.2.11, roles: [controller]}
      - {name: n2, host: 192.0.2.12, port: 2222}
"""
from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from inventory.errors import InventoryError, one_line

# Names end up in paths, interface-free state directories and log lines:
# a conservative alphabet keeps them safe everywhere.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$"
# Every field below reaches a remote command line or an iptables rule (quoted
# anyway): each keeps to an alphabet that means the same to every shell.
USER_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}$"
NETNS_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
# Absolute; no spaces, quotes, globs, `$`, `~` or `:` (a PYTHONPATH separator).
PATH_PATTERN = r"^/[A-Za-z0-9._+@%=,/-]*$"
_HOST_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST_NAME = re.compile(rf"(?=.{{1,253}}$){_HOST_LABEL}(?:\.{_HOST_LABEL})*")

# Where SUT files go on a real host unless the inventory says otherwise;
# /var/tmp survives reboots and is writable by non-root users.
DEFAULT_WORKDIR = "/var/tmp/rocketmq-chaos"

Kind = Literal["netns", "docker", "ssh"]


def is_host(text: object) -> bool:
    """An IP address (v4 or v6) or a DNS host name: what a node's `host` may be."""
    if not isinstance(text, str):
        return False
    try:
        ipaddress.ip_address(text)
        return True
    except ValueError:
        return bool(_HOST_NAME.fullmatch(text)) and not text.replace(".", "").isdigit()


def _resolve_path(value: Path | None, info: ValidationInfo) -> Path | None:
    """Expand ~ and make relative paths relative to the inventory file."""
    if value is None:
        return None
    path = Path(os.path.expanduser(str(value)))
    base = (info.context or {}).get("base_dir")
    if not path.is_absolute() and base is not None:
        path = Path(base) / path
    return path


class Node(BaseModel):
    """One machine (or namespace) the harness reaches over SSH."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN)
    host: str = Field(min_length=1, description="address the control node connects to")
    port: int = Field(22, ge=1, le=65535)
    user: str = Field("root", pattern=USER_PATTERN)
    key_file: Path | None = Field(None, description="private key; None = ssh-agent/default keys")
    sudo: bool = Field(False, description="prefix commands with `sudo -n` (non-root users)")
    roles: list[Annotated[str, Field(pattern=NAME_PATTERN)]] = Field(default_factory=list)
    workdir: str = Field(DEFAULT_WORKDIR, pattern=PATH_PATTERN, max_length=1024)
    netns: str | None = Field(None, pattern=NETNS_PATTERN, description="network namespace of a local node")

    @field_validator("host")
    @classmethod
    def _host_is_an_address(cls, value: str) -> str:
        if not is_host(value):
            raise ValueError("must be an IP address or a DNS host name")
        return value

    @field_validator("key_file")
    @classmethod
    def _key_file_path(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        return _resolve_path(value, info)

    @field_validator("workdir")
    @classmethod
    def _workdir_is_plain(cls, value: str) -> str:
        """Processes are told apart by the workdir in their argv and things are removed under
        it: `/var/..` would name another directory than it spells."""
        if any(part in (".", "..") for part in value.split("/")):
            raise ValueError("must not contain . or .. components")
        return value


class Inventory(BaseModel):
    """A named set of nodes plus how to verify their host keys."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN)
    kind: Kind = "ssh"
    nodes: list[Node] = Field(min_length=1)
    strict_host_keys: bool = True
    known_hosts: Path | None = None
    source: Path | None = Field(None, exclude=True)

    @field_validator("known_hosts")
    @classmethod
    def _known_hosts_path(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        return _resolve_path(value, info)

    @field_validator("nodes")
    @classmethod
    def _names_are_unique(cls, nodes: list[Node]) -> list[Node]:
        seen: dict[str, int] = {}
        for index, node in enumerate(nodes):
            if node.name in seen:
                raise ValueError(
                    f"node name {node.name!r} is used twice (nodes[{seen[node.name]}] and nodes[{index}])"
                )
            seen[node.name] = index
        return nodes

    @property
    def names(self) -> list[str]:
        return [node.name for node in self.nodes]

    def node(self, name: str) -> Node:
        """The node called `name`; InventoryError names the known ones otherwise."""
        for node in self.nodes:
            if node.name == name:
                return node
        raise InventoryError(f"inventory {self.name}: no node {name!r} (nodes: {', '.join(self.names)})")

    def to_yaml(self) -> str:
        """The YAML text `load` reads back into an equal inventory."""
        data = self.model_dump(mode="json", exclude={"source"}, exclude_none=True)
        return yaml.safe_dump(data, sort_keys=False)

    def write(self, path: Path) -> Path:
        """Write atomically (tmp + rename) so a reader never sees half a file."""
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(self.to_yaml())
        tmp.replace(path)
        return path


def load(path: str | os.PathLike[str]) -> Inventory:
    """Read and validate an inventory YAML file.

    Raises InventoryError with one line naming the file, the field (for example
    `nodes[2].port`) and the problem.
    """
    path = Path(path)
    data = _read_yaml(path)
    data.setdefault("name", path.stem)
    _apply_defaults(path, data)
    try:
        inventory = Inventory.model_validate(data, context={"base_dir": path.parent.resolve()})
    except ValidationError as error:
        raise InventoryError(f"inventory {path}: {_describe(error)}") from None
    inventory.source = path
    return inventory


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise InventoryError(f"inventory {path}: cannot read: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise InventoryError(f"inventory {path}: not UTF-8 text (byte {error.start})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(error, "problem", None) or str(error)
        raise InventoryError(f"inventory {path}: invalid YAML: {where}{one_line(problem)}") from None
    except ValueError as error:  # an integer of thousands of digits (Python's conversion limit)
        raise InventoryError(f"inventory {path}: a number too long to read ({str(error).split(':')[0]})") from None
    if not isinstance(data, dict):
        raise InventoryError(f"inventory {path}: the top level must be a mapping with a 'nodes' list")
    return data


def _apply_defaults(path: Path, data: dict[str, Any]) -> None:
    """Merge the optional `defaults:` mapping into every node entry."""
    defaults = data.pop("defaults", None) or {}
    if not isinstance(defaults, dict):
        raise InventoryError(f"inventory {path}: defaults: must be a mapping of node fields")
    nodes = data.get("nodes")
    if defaults and isinstance(nodes, list):
        data["nodes"] = [{**defaults, **n} if isinstance(n, dict) else n for n in nodes]


def _describe(error: ValidationError) -> str:
    """First validation problem as `field: message (got value)`, plus a count."""
    problems = error.errors(include_url=False)
    first = problems[0]
    field = _field_path(first["loc"]) or "(top level)"
    message = first["msg"]
    if first["type"] == "extra_forbidden":
        message = "unknown field (check the spelling)"
    got = first.get("input")
    if first["type"] not in ("missing", "extra_forbidden") and isinstance(got, (str, int, float, bool)):
        message += f" (got {got!r})"
    more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
    return f"{field}: {one_line(message)}{more}"


def _field_path(loc: tuple[int | str, ...]) -> str:
    """('nodes', 2, 'port') -> 'nodes[2].port'."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text.lstrip(".")
