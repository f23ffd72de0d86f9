"""The reconstructed history (checked/history.parquet) as plain columns.

The checkers pair invocations with completions once (docs/history-format.md);
the pages read that table instead of pairing raw events a second time.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reports.load import read_table

COLUMNS = ["index", "process", "f", "key", "type", "invoke_time", "complete_time",
           "invoke_value", "value", "node", "error"]
NS = 1e9


@dataclass
class History:
    """Operations in index order, column by column (times in ns since the run started)."""

    columns: dict[str, list]

    def __len__(self) -> int:
        return len(self.columns["index"])

    def __getattr__(self, name: str) -> list:
        try:
            return self.columns[name]
        except KeyError:
            raise AttributeError(name) from None

    @property
    def end_s(self) -> float:
        times = [t for t in self.columns["complete_time"] if t is not None] + list(self.columns["invoke_time"])
        return max(times) / NS if times else 0.0

    def row(self, i: int) -> dict[str, Any]:
        return {name: values[i] for name, values in self.columns.items()}

    def subset(self, rows: list[int]) -> "History":
        """The operations at these positions, in this order."""
        return History({name: [values[i] for i in rows] for name, values in self.columns.items()})

    def positions_of_key(self, key: Any) -> list[int]:
        """Rows whose key is `key` (the table keeps keys as JSON text: 2, "r1")."""
        wanted = {json.dumps(key), str(key)} if key is not None else {None, "null"}
        return [i for i, k in enumerate(self.columns["key"]) if k in wanted]


def load_history(run_dir: Path) -> tuple[History | None, str | None]:
    """The run's reconstructed history, or why it is not there."""
    path = Path(run_dir) / "checked" / "history.parquet"
    if not path.exists():
        return None, f"{path}: missing (run `chaos check {run_dir}` to reconstruct the history)"
    data, problem = read_table(path)
    if data is None:
        return None, problem
    missing = [c for c in COLUMNS if c not in data]
    if missing:
        return None, f"{path}: columns missing: {', '.join(missing)}"
    return History({c: data[c] for c in COLUMNS}), None
