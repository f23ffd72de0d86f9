"""The epoch file and the consistent-point search (docs/ha-protocol.md,
"Scenarios our tests replay"), plus the append rule and crash safety of the file."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from sut.controller.epochs import (
    NO_CONSISTENT_POINT, EpochEntry, EpochFile, EpochFileError, find_consistent_point,
)

A = [EpochEntry(1, 100), EpochEntry(2, 300), EpochEntry(3, 500)]


def entries(*pairs):
    return [EpochEntry(e, s) for e, s in pairs]


def test_open_ended_a_against_b_with_a_later_third_epoch_start_gives_450():
    b = entries((1, 100), (2, 300), (3, 450))
    assert find_consistent_point(A, None, b, 700) == 450


def test_a_ending_at_700_against_b_ending_at_600_gives_600():
    assert find_consistent_point(A, 700, list(A), 600) == 600


def test_no_common_epoch_start_gives_minus_one():
    b = entries((1, 200), (2, 500))
    assert find_consistent_point(A, None, b, 900) == NO_CONSISTENT_POINT == -1


def test_b_with_a_fourth_epoch_against_a_ending_at_700_gives_700():
    b = entries((1, 100), (2, 300), (3, 500), (4, 800))
    assert find_consistent_point(b, 1000, A, 700) == 700
    assert find_consistent_point(A, 700, b, 1000) == 700


def test_empty_local_log_has_no_consistent_point():
    assert find_consistent_point([], 0, A, 700) == NO_CONSISTENT_POINT


def test_epoch_file_enforces_the_append_rule(tmp_path):
    ef = EpochFile(tmp_path / "epoch")
    assert ef.append(EpochEntry(1, 0))
    assert not ef.append(EpochEntry(1, 10))     # same epoch
    assert not ef.append(EpochEntry(2, 0))      # same start
    assert not ef.append(EpochEntry(0, 100))    # older epoch
    assert ef.append(EpochEntry(2, 100))
    assert EpochFile(tmp_path / "epoch").entries == entries((1, 0), (2, 100))


def test_truncate_by_offset_drops_epochs_that_start_at_or_after_it(tmp_path):
    ef = EpochFile(tmp_path / "epoch")
    for entry in A:
        ef.append(entry)
    ef.truncate_from_offset(300)
    assert ef.entries == entries((1, 100))
    assert EpochFile(tmp_path / "epoch").entries == entries((1, 100))


def test_begin_master_epoch_replaces_an_empty_older_epoch(tmp_path):
    ef = EpochFile(tmp_path / "epoch")
    ef.begin_master_epoch(1, 0)
    ef.begin_master_epoch(3, 0)        # epoch 1 wrote nothing
    assert ef.entries == entries((3, 0))
    ef.begin_master_epoch(5, 200)
    ef.begin_master_epoch(4, 300)      # stale newer entries are dropped first
    assert ef.entries == entries((3, 0), (4, 300))


def test_becoming_master_again_in_the_same_epoch_keeps_its_entry(tmp_path):
    ef = EpochFile(tmp_path / "epoch")
    ef.begin_master_epoch(1, 0)
    ef.begin_master_epoch(1, 500)      # a restart that the controller still calls master of 1
    assert ef.entries == entries((1, 0))


def test_entry_for_offset_gives_the_epoch_range(tmp_path):
    ef = EpochFile(tmp_path / "epoch")
    for entry in A:
        ef.append(entry)
    assert ef.entry_for_offset(299) == (EpochEntry(1, 100), 300)
    assert ef.entry_for_offset(300) == (EpochEntry(2, 300), 500)
    assert ef.entry_for_offset(10**9) == (EpochEntry(3, 500), None)
    assert ef.entry_for_offset(50) is None


@pytest.mark.parametrize("content", ["not json", "[[2, 100], [1, 200]]", "[[1]]", '{"a": 1}'])
def test_a_corrupt_epoch_file_is_refused_with_its_path(tmp_path, content):
    path = tmp_path / "epoch"
    path.write_text(content)
    with pytest.raises(EpochFileError, match=str(path)):
        EpochFile(path)


def test_a_leftover_temp_file_is_ignored(tmp_path):
    ef = EpochFile(tmp_path / "epoch")
    ef.append(EpochEntry(1, 0))
    (tmp_path / "epoch.tmp").write_text("[[1, 0], [2")
    assert EpochFile(tmp_path / "epoch").entries == entries((1, 0))
    assert not (tmp_path / "epoch.tmp").exists()


def test_kill_9_during_rewrites_leaves_a_valid_prefix_of_appends(tmp_path):
    """A child appends epochs as fast as it can; SIGKILL it; the file is always valid."""
    path = tmp_path / "epoch"
    script = (
        "import sys\n"
        "from sut.controller.epochs import EpochFile, EpochEntry\n"
        f"ef = EpochFile({str(path)!r})\n"
        "print('ready', flush=True)\n"
        "for i in range(1, 10**6):\n"
        "    ef.append(EpochEntry(i, i * 10))\n"
    )
    for _ in range(3):
        child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                                 cwd=os.path.dirname(os.path.dirname(__file__)))
        assert child.stdout.readline().strip() == b"ready"
        for _ in range(200):  # until a few appends have landed
            if path.exists() and path.stat().st_size > 40:
                break
            time.sleep(0.01)
        child.send_signal(signal.SIGKILL)
        child.wait()
        ef = EpochFile(path)
        got = ef.entries
        assert got and [e.epoch for e in got] == list(range(1, len(got) + 1))
        path.unlink()
