"""Recording the SUT's view of itself during a run into `cluster.jsonl`.

A thread asks the deployer for `cluster_state()` every `interval_s` (well
under any profile's failure-detection time) and writes a line whenever the
state differs from the last one written, so the file stays small while every
change of master, epoch/term, SyncStateSet, controller leader or reachability
is placed between two samples: it happened after `prev_time` and by `time`.
Times are nanoseconds on the history's clock (workloads.history.Clock).
Every sample, changed or not, also goes to `on_sample` (state-triggered faults
watch the cluster through it: faults.triggers.StateFeed).
"""
from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Callable

from workloads.history import Clock

FILE_NAME = "cluster.jsonl"
INTERVAL_S = 0.25


class ClusterRecorder:
    """Samples `state()` on its own thread from `start()` until `stop()`."""

    def __init__(self, state: Callable[[], dict[str, Any]], path: Path, clock: Clock,
                 interval_s: float = INTERVAL_S,
                 on_sample: Callable[[int, dict[str, Any]], None] | None = None) -> None:
        self.state = state
        self.on_sample = on_sample
        self.path = path
        self.clock = clock
        self.interval_s = interval_s
        self.samples = 0
        self.lines = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cluster-state", daemon=True)

    def start(self) -> "ClusterRecorder":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def __enter__(self) -> "ClusterRecorder":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _loop(self) -> None:
        last: dict[str, Any] | None = None
        prev_time: int | None = None
        with open(self.path, "a", encoding="utf-8") as out:
            while True:
                began = self.clock.now()
                current = self._sample()
                self.samples += 1
                if self.on_sample is not None:
                    self.on_sample(began, current)
                if current != last:
                    out.write(json.dumps({"time": began, "prev_time": prev_time, **current},
                                         separators=(",", ":"), default=str) + "\n")
                    out.flush()
                    self.lines += 1
                    last = current
                prev_time = began
                if self._stop.wait(self.interval_s):
                    return

    def _sample(self) -> dict[str, Any]:
        try:
            return self.state()
        except Exception as exc:  # noqa: BLE001 - a failed sample is recorded, sampling goes on
            return {"error": f"{type(exc).__name__}: {exc}"}

