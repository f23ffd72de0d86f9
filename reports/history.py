"""The reconstructed history (checked/history.parquet) as plain columns.

The checkers pair invocations with completions once (docs/history-format.md);
the pages read that table instead of pairing raw events a second time.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

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
        """Rows whose key is `key`."""
        wanted = key_texts(key)
        return [i for i, k in enumerate(self.columns["key"]) if k in wanted]


def key_texts(key: Any) -> set:
    """How the table may hold `key` (as JSON text: 2, "r1")."""
    return {json.dumps(key), str(key)} if key is not None else {None, "null"}


def _missing(run_dir: Path) -> tuple[Path, str | None]:
    path = Path(run_dir) / "checked" / "history.parquet"
    if not path.exists():
        return path, f"{path}: missing (run `chaos check {run_dir}` to reconstruct the history)"
    return path, None


def count_operations(run_dir: Path) -> tuple[int | None, str | None]:
    """How many operations the history holds, from the Parquet footers (no row is read)."""
    path, problem = _missing(run_dir)
    if problem:
        return None, problem
    try:
        import pyarrow.dataset as ds
        return ds.dataset(path, format="parquet").count_rows(), None
    except Exception as exc:  # noqa: BLE001 - a damaged table is reported, never fatal
        return None, f"{path}: unreadable Parquet: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def history_chunks(run_dir: Path, rows: int) -> Iterator[History]:
    """The history in index order, `rows` operations at a time: memory stays bounded by
    one chunk whatever the run's size (the checkers write the table in index order)."""
    import pyarrow.dataset as ds
    path, _ = _missing(run_dir)
    buffer: dict[str, list] = {c: [] for c in COLUMNS}
    # One part file and a batch ahead at most: pyarrow's default reads four files ahead.
    batches = ds.dataset(path, format="parquet").to_batches(columns=COLUMNS, batch_size=rows,
                                                            batch_readahead=1, fragment_readahead=1)
    for batch in batches:
        for name, values in batch.to_pydict().items():
            buffer[name].extend(values)
        while len(buffer["index"]) >= rows:
            yield History({c: v[:rows] for c, v in buffer.items()})
            buffer = {c: v[rows:] for c, v in buffer.items()}
    if buffer["index"]:
        yield History(buffer)


def select_operations(chunks: Iterator[History], keep: Callable[[History, int], bool]) -> History:
    """The operations of `chunks` that `keep` picks, in order, as one (small) History."""
    picked: dict[str, list] = {c: [] for c in COLUMNS}
    for chunk in chunks:
        for i in range(len(chunk)):
            if keep(chunk, i):
                for name in COLUMNS:
                    picked[name].append(chunk.columns[name][i])
    return History(picked)


def load_history(run_dir: Path) -> tuple[History | None, str | None]:
    """The run's reconstructed history, or why it is not there."""
    path, problem = _missing(run_dir)
    if problem:
        return None, problem
    data, problem = read_table(path)
    if data is None:
        return None, problem
    missing = [c for c in COLUMNS if c not in data]
    if missing:
        return None, f"{path}: columns missing: {', '.join(missing)}"
    return History({c: data[c] for c in COLUMNS}), None
