"""The durable Raft log, term/vote file, entry codec and commit rule (unit level)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from sut.protocol import ProtocolError
from sut.raft.log import HEADER_SIZE, RaftLog
from sut.raft.meta import MetaCorrupted, TermVote
from sut.raft.node import quorum_commit_index
from sut.raft.wire import pack_entries, unpack_entries


def _path(tmp_path) -> str:
    return str(tmp_path / "raftstore" / "entries.log")


def test_log_reopens_with_every_entry_and_term(tmp_path):
    log = RaftLog(_path(tmp_path))
    log.append([(1, b"a"), (1, b"bb")])
    log.append([(3, b"ccc")])
    log.close()
    again = RaftLog(_path(tmp_path))
    assert again.last_index == 3 and again.last_term == 3
    assert [(e.index, e.term, e.data) for e in again.entries(1)] == [(1, 1, b"a"), (2, 1, b"bb"), (3, 3, b"ccc")]
    assert again.term_at(0) == 0 and again.term_at(2) == 1 and again.term_at(4) is None
    assert again.torn_bytes == 0


def test_torn_tail_is_cut_at_the_last_whole_entry(tmp_path):
    log = RaftLog(_path(tmp_path))
    log.append([(1, b"first"), (1, b"second")])
    log.close()
    size = os.path.getsize(_path(tmp_path))
    with open(_path(tmp_path), "r+b") as f:
        f.truncate(size - 3)  # half-written last record
    again = RaftLog(_path(tmp_path))
    assert again.last_index == 1 and again.entry(1).data == b"first"
    assert again.torn_bytes > 0
    assert os.path.getsize(_path(tmp_path)) == HEADER_SIZE + len(b"first")
    assert again.append([(2, b"next")]) == 2  # appends continue after the cut
    again.close()
    assert RaftLog(_path(tmp_path)).entry(2).data == b"next"


def test_a_flipped_payload_byte_fails_the_crc_and_ends_the_log_there(tmp_path):
    log = RaftLog(_path(tmp_path))
    log.append([(1, b"aaaa"), (1, b"bbbb"), (1, b"cccc")])
    log.close()
    with open(_path(tmp_path), "r+b") as f:
        f.seek(2 * HEADER_SIZE + 4 + 1)  # inside the second payload
        f.write(b"X")
    again = RaftLog(_path(tmp_path))
    assert again.last_index == 1


def test_truncation_is_durable_and_later_appends_reuse_the_indices(tmp_path):
    log = RaftLog(_path(tmp_path))
    log.append([(1, b"a"), (1, b"b"), (2, b"c"), (2, b"d")])
    assert log.truncate_after(2) == 2
    log.append([(3, b"C")])
    log.close()
    again = RaftLog(_path(tmp_path))
    assert [(e.term, e.data) for e in again.entries(1)] == [(1, b"a"), (1, b"b"), (3, b"C")]


def test_log_survives_kill_9_of_the_writing_process(tmp_path):
    script = textwrap.dedent(f"""
        import os, signal
        from sut.raft.log import RaftLog
        log = RaftLog({_path(tmp_path)!r})
        for i in range(500):
            log.append([(1, b"entry-%d" % i)])
        log.truncate_after(400)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=os.path.dirname(os.path.dirname(__file__)))
    assert proc.returncode == -9
    again = RaftLog(_path(tmp_path))
    assert again.last_index == 400 and again.entry(400).data == b"entry-399"


def test_entries_respects_the_byte_limit_but_returns_at_least_one(tmp_path):
    log = RaftLog(_path(tmp_path))
    log.append([(1, b"x" * 1000) for _ in range(10)])
    assert len(log.entries(1, 10, max_bytes=3500)) == 3
    assert len(log.entries(1, 10, max_bytes=10)) == 1


def test_first_index_of_term_skips_back_over_a_whole_term(tmp_path):
    log = RaftLog(_path(tmp_path))
    log.append([(1, b"a"), (2, b"b"), (2, b"c"), (2, b"d"), (4, b"e")])
    assert log.first_index_of_term(4) == 2
    assert log.first_index_of_term(5) == 5


def test_term_and_vote_persist_and_never_go_back(tmp_path):
    path = str(tmp_path / "meta.json")
    meta = TermVote(path)
    assert (meta.term, meta.voted_for) == (0, None)
    meta.save(4, "n1")
    again = TermVote(path)
    assert (again.term, again.voted_for) == (4, "n1")
    with pytest.raises(ValueError):
        again.save(3, None)


def test_unreadable_term_file_refuses_to_start(tmp_path):
    path = tmp_path / "meta.json"
    path.write_text("{not json")
    with pytest.raises(MetaCorrupted, match="meta.json"):
        TermVote(str(path))


def test_entry_codec_round_trips_and_rejects_truncated_bodies():
    items = [(1, b""), (2, b"hello"), (2, bytes(range(256)))]
    assert unpack_entries(pack_entries(items)) == items
    with pytest.raises(ProtocolError):
        unpack_entries(pack_entries(items)[:-1])


# Raft paper figure 8: S1 leads term 4 after S5 (term 3) crashed; index 2 holds
# S1's term-2 entry on a majority. Counting it as committed is unsafe.
def _fig8_term_at(index: int) -> int:
    return {0: 0, 1: 1, 2: 2, 3: 4}.get(index)


def test_current_term_rule_does_not_commit_an_older_term_entry_by_counting():
    matches = [3, 2, 2, 1, 1]  # S1 (leader, has its term-4 entry), S2, S3 have index 2
    assert quorum_commit_index(matches, 3, 1, 4, _fig8_term_at, current_term_only=True) == 1


def test_dledger_0_3_1_2_rule_commits_the_older_term_entry_by_counting():
    matches = [3, 2, 2, 1, 1]
    assert quorum_commit_index(matches, 3, 1, 4, _fig8_term_at, current_term_only=False) == 2


def test_current_term_entry_on_a_majority_commits_everything_before_it():
    matches = [3, 3, 3, 1, 1]
    assert quorum_commit_index(matches, 3, 1, 4, _fig8_term_at, current_term_only=True) == 3


def test_last_index_with_term_at_most_searches_the_non_decreasing_terms(tmp_path):
    log = RaftLog(_path(tmp_path))
    log.append([(1, b"a"), (3, b"b"), (3, b"c"), (5, b"d")])
    assert log.last_index_with_term_at_most(3, 4) == 3
    assert log.last_index_with_term_at_most(3, 2) == 2
    assert log.last_index_with_term_at_most(0, 4) == 0
    assert log.last_index_with_term_at_most(9, 4) == 4
