"""The message store in-process: segments, recovery, truncation, consume queues."""
from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import pytest

from sut.message import BLANK_MAGIC, CorruptRecord, Message, decode_payload, encode_payload, iter_records
from sut.store.commitlog import CommitLog, StoreError
from sut.store.consumequeue import write_entries
from sut.store.message_store import MessageStore, StoreConfig

LOG = logging.getLogger("test")
SEG = 4096


def payload(i: int, size: int = 100) -> bytes:
    return encode_payload(Message("t", i % 3, f"id-{i}", bytes([65 + i % 26]) * size, 1, 2))


def fresh_log(path: Path) -> CommitLog:
    log = CommitLog(path, SEG, LOG)
    log.recover(0, lambda *_: None)
    return log


def test_records_never_span_segments_and_a_blank_fills_the_gap(tmp_path):
    log = fresh_log(tmp_path)
    placed = log.append([payload(i, 900) for i in range(10)])
    for offset, size in placed:
        assert offset // SEG == (offset + size - 1) // SEG
    rolled = next(off for off, _ in placed if off % SEG == 0 and off)
    first_seg = log.read_raw(0, SEG)
    assert len(first_seg) == rolled  # read_raw stops at the segment end, blank included
    blank_at = max(off + size for off, size in placed if off < rolled)
    assert int.from_bytes(first_seg[blank_at + 4:blank_at + 8], "big") == BLANK_MAGIC
    assert [p for _, p in iter_records(first_seg)] == [payload(i, 900) for i in range(len(
        [o for o, _ in placed if o < rolled]))]


def test_recovery_finds_the_end_and_visits_every_record(tmp_path):
    log = fresh_log(tmp_path)
    placed = log.append([payload(i) for i in range(50)])
    log.close()
    seen = []
    again = CommitLog(tmp_path, SEG, LOG)
    result = again.recover(0, lambda off, p: seen.append((off, bytes(p))))
    assert result.problem is None and result.end == placed[-1][0] + placed[-1][1]
    assert [off for off, _ in seen] == [off for off, _ in placed]
    assert [decode_payload(p).msg_id for _, p in seen] == [f"id-{i}" for i in range(50)]


@pytest.mark.parametrize("damage", ["torn", "garbage", "bad_crc"])
def test_recovery_truncates_a_damaged_tail(tmp_path, damage):
    log = fresh_log(tmp_path)
    placed = log.append([payload(i) for i in range(20)])
    end = placed[-1][0] + placed[-1][1]
    log.close()
    seg = tmp_path / f"{(end // SEG) * SEG:020d}"
    with open(seg, "r+b") as f:
        if damage == "torn":  # half of a new record
            f.seek(end % SEG)
            f.write(b"\x00\x00\x01\x00" + os.urandom(60))
        elif damage == "garbage":
            f.seek(end % SEG)
            f.write(os.urandom(200))
        else:  # the last record's body changes: its CRC no longer matches
            f.seek(end % SEG - 1)
            f.write(b"?")
    again = CommitLog(tmp_path, SEG, LOG)
    result = again.recover(0, lambda *_: None)
    expected_end = placed[-1][0] if damage == "bad_crc" else end
    assert result.end == expected_end and result.problem
    tail = (tmp_path / f"{(expected_end // SEG) * SEG:020d}").read_bytes()[expected_end % SEG:]
    assert tail.count(0) == len(tail)  # zeroed from the cut on


def test_truncate_survives_reopening_and_removes_later_segments(tmp_path):
    log = fresh_log(tmp_path)
    placed = log.append([payload(i, 900) for i in range(20)])
    cut = placed[5][0]
    removed = log.truncate(cut)
    assert removed >= 2 and log.max_offset == cut
    log.close()
    again = CommitLog(tmp_path, SEG, LOG)
    seen = []
    result = again.recover(0, lambda off, p: seen.append(off))
    assert result.end == cut and seen == [off for off, _ in placed[:5]]


def test_a_crash_in_the_middle_of_truncate_still_ends_at_the_cut(tmp_path):
    log = fresh_log(tmp_path)
    placed = log.append([payload(i, 900) for i in range(20)])
    cut = placed[2][0]
    # the first step of truncate only: zero the tail of the cut's segment, keep later segments
    fd = os.open(tmp_path / f"{0:020d}", os.O_RDWR)
    os.ftruncate(fd, cut)
    os.ftruncate(fd, SEG)
    os.close(fd)
    log.close()
    again = CommitLog(tmp_path, SEG, LOG)
    result = again.recover(0, lambda *_: None)
    assert result.end == cut and result.removed_segments >= 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{0:020d}"]


def test_append_raw_checks_offsets_and_crcs(tmp_path):
    source = fresh_log(tmp_path / "a")
    source.append([payload(i) for i in range(10)])
    data = source.read_raw(0, 700)
    assert data and len(data) <= 700
    copy = fresh_log(tmp_path / "b")
    with pytest.raises(CorruptRecord):
        copy.append_raw(5, data)  # not our end
    bad = bytearray(data)
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecord):
        copy.append_raw(0, bytes(bad))
    assert copy.max_offset == 0
    messages = copy.append_raw(0, data)
    assert copy.max_offset == len(data) and messages[0][1] == payload(0)


def test_segment_size_mismatch_is_a_clear_error(tmp_path):
    fresh_log(tmp_path).append([payload(1)])
    with pytest.raises(StoreError, match="has 4096 bytes, expected 8192"):
        CommitLog(tmp_path, 8192, LOG)


def test_an_empty_last_segment_left_by_a_crash_during_creation_is_sized_and_the_log_recovers(tmp_path):
    log = fresh_log(tmp_path)
    log.append([payload(1)])
    log.close()
    empty = tmp_path / f"{SEG:020d}"  # the next segment: created, killed before ftruncate
    empty.touch()
    again = CommitLog(tmp_path, SEG, LOG)
    assert empty.stat().st_size == SEG
    recovery = again.recover(0, lambda offset, data: None)
    assert recovery.records == 1


def test_an_empty_segment_before_the_last_is_still_an_error(tmp_path):
    fresh_log(tmp_path).close()
    (tmp_path / f"{0:020d}").write_bytes(b"")
    (tmp_path / f"{SEG:020d}").write_bytes(bytes(SEG))
    with pytest.raises(StoreError, match="has 0 bytes"):
        CommitLog(tmp_path, SEG, LOG)


def _store(path: Path, **cfg) -> MessageStore:
    store = MessageStore(path, StoreConfig(segment_bytes=SEG, **cfg), LOG)
    store.recover()
    return store


def msgs(start: int, n: int, queue: int = 0) -> list[Message]:
    return [Message("t", queue, f"m{i}", b"body-%d" % i) for i in range(start, start + n)]


def test_consume_queues_are_rebuilt_from_the_commitlog_when_lost(tmp_path):
    async def scenario():
        store = _store(tmp_path)
        await store.start()
        store.append(msgs(0, 30, queue=1))
        store.append(msgs(30, 5, queue=2))
        await store.close()

    asyncio.run(scenario())
    for f in (tmp_path / "consumequeue").rglob("*"):
        if f.is_file():
            f.unlink()
    (tmp_path / "checkpoint").unlink()
    store = _store(tmp_path)
    got = store.get_messages("t", 1, 0, 100, 1 << 20, store.max_offset)
    assert got.count == 30 and got.next_offset == 30
    assert [decode_payload(p).msg_id for _, p in iter_records(got.records)] == [f"m{i}" for i in range(30)]
    assert store.queue_max_offset("t", 2, store.max_offset) == 5


def test_entries_after_the_checkpoint_are_redispatched_once(tmp_path):
    async def scenario():
        store = _store(tmp_path, checkpoint_interval_ms=60_000)
        await store.start()
        store.append(msgs(0, 10))
        await store.flush(checkpoint=True)
        store.append(msgs(10, 10))  # in the log, not yet in a checkpoint
        write_entries(store.cqs.take_pending())  # and even already in the queue files
        return store.max_offset     # then: crash (no close)

    end = asyncio.run(scenario())
    store = _store(tmp_path)
    assert store.max_offset == end
    assert store.queue_max_offset("t", 0, end) == 20


def test_pull_never_reads_past_the_limit(tmp_path):
    store = _store(tmp_path)
    first = store.append(msgs(0, 3))
    store.append(msgs(3, 3))
    got = store.get_messages("t", 0, 0, 100, 1 << 20, limit=first.end)
    assert got.count == 3 and got.max_offset == 3
    none = store.get_messages("t", 0, 3, 100, 1 << 20, limit=first.end)
    assert none.status == "NO_NEW_MESSAGE"


def test_store_truncate_cuts_log_and_queues_and_survives_recovery(tmp_path):
    async def scenario():
        store = _store(tmp_path)
        await store.start()
        kept = store.append(msgs(0, 4))
        store.append(msgs(4, 4))
        await store.flush(checkpoint=True)
        await store.truncate(kept.end)
        assert store.queue_max_offset("t", 0, store.max_offset) == 4
        after = store.append(msgs(100, 1))
        assert after.entries[0][2] == 4  # the next message takes queue offset 4 again
        return after.end

    end = asyncio.run(scenario())
    store = _store(tmp_path)
    assert store.max_offset == end
    got = store.get_messages("t", 0, 0, 100, 1 << 20, store.max_offset)
    assert [decode_payload(p).msg_id for _, p in iter_records(got.records)] == ["m0", "m1", "m2", "m3", "m100"]


def test_sync_flush_groups_concurrent_appends_into_few_fsyncs(tmp_path):
    async def scenario():
        store = _store(tmp_path, flush_disk_type="SYNC_FLUSH")
        await store.start()
        calls = 0
        original = CommitLog.sync

        def counting(fds):
            nonlocal calls
            calls += 1
            original(fds)

        CommitLog.sync = staticmethod(counting)
        try:
            async def one(i):
                result = store.append(msgs(i, 1))
                return await store.wait_flushed(result.end)

            results = await asyncio.gather(*(one(i) for i in range(200)))
        finally:
            CommitLog.sync = staticmethod(original)
            await store.close()
        return results, calls

    results, calls = asyncio.run(scenario())
    assert all(results) and calls < 50
