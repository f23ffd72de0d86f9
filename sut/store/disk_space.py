"""The broker's disk check, as RocketMQ's store does it: the store is not writeable
while the disk holding it is fuller than a ratio (RocketMQ's `diskSpaceWarningLevelRatio`,
0.90, checked by its clean-up service every `cleanResourceInterval`); sends are then
refused before anything is appended (RocketMQ answers SERVICE_NOT_AVAILABLE with a
remark naming the full disk; the model says DISK_FULL)."""
from __future__ import annotations

import os
import time
from pathlib import Path

FULL_RATIO = 0.90
CHECK_INTERVAL_S = 1.0  # RocketMQ: 10 s; the model's timings are shorter


class DiskSpace:
    """Whether the disk under `path` is full, read at most once per interval."""

    def __init__(self, path: Path, interval_s: float = CHECK_INTERVAL_S, ratio: float = FULL_RATIO) -> None:
        self.path, self.interval_s, self.ratio = path, interval_s, ratio
        self._checked = -interval_s
        self._used = 0.0

    def used_ratio(self) -> float:
        now = time.monotonic()
        if now - self._checked >= self.interval_s:
            self._checked = now
            try:
                st = os.statvfs(self.path)
            except OSError:
                return self._used  # an unreadable disk is not a full one: the write will tell
            self._used = 1.0 - st.f_bfree / st.f_blocks if st.f_blocks else 0.0
        return self._used

    def full(self) -> bool:
        return self.used_ratio() >= self.ratio
