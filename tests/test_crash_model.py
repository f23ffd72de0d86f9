"""The crash file system's model (nuclei.lazyfs_node.CrashState) against a
reference: after `lose`, each name the last directory fsync saw holds what its
file's last fsync saw (empty if never synced); nothing else exists. Driven the
way the FUSE layer drives it, on a real directory, with random operations."""
from __future__ import annotations

import os

from hypothesis import example, given, settings
from hypothesis import strategies as st

from nuclei.lazyfs_node import CrashState

NAMES = ["a", "b"]
OPS = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(NAMES), st.integers(0, 12), st.binary(min_size=1, max_size=6)),
    st.tuples(st.just("truncate"), st.sampled_from(NAMES), st.integers(0, 12)),
    st.tuples(st.just("fsync"), st.sampled_from(NAMES)),
    st.tuples(st.just("fsync_dir")),
    st.tuples(st.just("rename"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
    st.tuples(st.just("unlink"), st.sampled_from(NAMES)),
    st.tuples(st.just("lose")),
    st.tuples(st.just("lose_torn"), st.integers(0, 2**32 - 1)),
)


class Reference:
    """What a crash keeps, tracked the simple way: file identities and two snapshots."""

    def __init__(self) -> None:
        self.live: dict[str, int] = {}          # name -> file id
        self.data: dict[int, bytearray] = {}    # file id -> live bytes
        self.synced: dict[int, bytes] = {}      # file id -> bytes at its last fsync
        self.names: dict[str, int] = {}         # name -> file id at the last dir fsync
        self.next = 0

    def file(self, name: str) -> int:
        if name not in self.live:
            self.live[name], self.next = self.next, self.next + 1
            self.data[self.live[name]] = bytearray()
        return self.live[name]

    def lose(self, torn: dict[str, dict] | None = None) -> dict[str, bytes]:
        """What survives; `torn` (durable name -> the daemon's record) overlays each torn
        file's kept prefix, taken from its live bytes, on its synced content."""
        kept = {name: self.synced.get(fid, b"") for name, fid in self.names.items()}
        for name, record in (torn or {}).items():
            offset, size = record["offset"], record["bytes_kept"]
            piece = bytes(self.data[self.names[name]][offset:offset + size])
            assert len(piece) == size and size >= 1 and record["bytes_lost"] >= 1
            content = bytearray(kept[name])
            content.extend(b"\0" * max(0, offset + size - len(content)))
            content[offset:offset + size] = piece
            kept[name] = bytes(content)
        self.__init__()
        for name, content in kept.items():
            fid = self.file(name)
            self.data[fid][:] = content
            self.synced[fid] = content
            self.names[name] = fid
        return kept


def apply(state: CrashState, ref: Reference, op: tuple) -> None:
    kind, *args = op
    if kind in ("write", "truncate", "fsync"):
        name = args[0]
        live = state.path(name)
        new = not os.path.exists(live)
        fd = os.open(live, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fid = state.fid(live, new=new)
            rfid = ref.file(name)
            if kind == "write":
                offset, data = args[1], args[2]
                os.pwrite(fd, data, offset)
                state.wrote(fid, offset, offset + len(data))
                buf = ref.data[rfid]
                buf.extend(b"\0" * max(0, offset + len(data) - len(buf)))
                buf[offset:offset + len(data)] = data
            elif kind == "truncate":
                os.ftruncate(fd, args[1])
                state.truncated(fid, args[1])
                buf = ref.data[rfid]
                del buf[args[1]:]
                buf.extend(b"\0" * (args[1] - len(buf)))
            else:
                state.sync_file(fid, fd)
                ref.synced[rfid] = bytes(ref.data[rfid])
        finally:
            os.close(fd)
    elif kind == "fsync_dir":
        state.sync_dir("/")
        ref.names = dict(ref.live)
    elif kind == "rename":
        old, new = args
        if old in ref.live and old != new:
            if os.path.lexists(state.path(new)):
                state.forget(state.path(new))
            os.rename(state.path(old), state.path(new))
            ref.live[new] = ref.live.pop(old)
    elif kind == "unlink":
        if args[0] in ref.live:
            state.forget(state.path(args[0]))
            os.unlink(state.path(args[0]))
            del ref.live[args[0]]
    elif kind == "lose_torn":
        lost = state.lose(torn_seed=args[0])
        assert lost["torn_seed"] == args[0]
        expected = ref.lose({record["file"]: record for record in lost["torn"]})
        assert tree(state) == expected
    else:
        state.lose()
        expected = ref.lose()
        assert tree(state) == expected


def tree(state: CrashState) -> dict[str, bytes]:
    return {name: open(state.path(name), "rb").read() for name in sorted(os.listdir(state.live))}


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(OPS, max_size=30))
# A synced file cut short and grown again: the cut must reach the durable copy.
@example(ops=[("write", "a", 0, b"xyz"), ("fsync", "a"), ("truncate", "a", 0), ("truncate", "a", 5),
              ("fsync", "a"), ("fsync_dir",)])
# A rename over a synced name, synced: the old file's content must not come back.
@example(ops=[("write", "a", 0, b"old"), ("fsync", "a"), ("fsync_dir",), ("write", "b", 0, b"new"),
              ("fsync", "b"), ("rename", "b", "a"), ("fsync_dir",)])
def test_after_a_loss_only_what_was_synced_remains(tmp_path_factory, ops):
    state = CrashState(str(tmp_path_factory.mktemp("lazyfs")))
    ref = Reference()
    for op in [*ops, ("lose",)]:
        apply(state, ref, op)


def test_a_torn_crash_keeps_a_seeded_strict_prefix_of_the_unsynced_tail(tmp_path):
    def crash(seed: int, where: str) -> tuple[bytes, list]:
        state = CrashState(str(tmp_path / where))
        fd = os.open(state.path("log"), os.O_RDWR | os.O_CREAT, 0o644)
        state.fid(state.path("log"), new=True)
        fid = state.fid(state.path("log"))
        os.pwrite(fd, b"synced|", 0)
        state.wrote(fid, 0, 7)
        state.sync_file(fid, fd)
        state.sync_dir("/")
        os.pwrite(fd, b"record-one|record-two|", 7)
        state.wrote(fid, 7, 29)
        os.close(fd)
        lost = state.lose(torn_seed=seed)
        return open(state.path("log"), "rb").read(), lost["torn"]

    content, torn = crash(7, "a")
    [record] = torn
    assert record["file"] == "log" and record["offset"] == 7
    assert 1 <= record["bytes_kept"] < 22 and record["bytes_kept"] + record["bytes_lost"] == 22
    assert content == b"synced|record-one|record-two|"[:7 + record["bytes_kept"]]
    assert crash(7, "b") == (content, torn)  # the seed decides the cut
    cuts = {crash(seed, f"s{seed}")[1][0]["bytes_kept"] for seed in range(12)}
    assert len(cuts) > 1


def test_a_torn_crash_leaves_files_without_a_durable_name_and_one_byte_tails_alone(tmp_path):
    state = CrashState(str(tmp_path / "lazyfs"))
    fids = {}
    for name in ("tiny", "unnamed"):
        os.close(os.open(state.path(name), os.O_RDWR | os.O_CREAT, 0o644))
        fids[name] = state.fid(state.path(name), new=True)
        if name == "tiny":
            state.sync_dir("/")  # only "tiny" has a durable name
    for name, data in (("tiny", b"x"), ("unnamed", b"a name no directory fsync saw")):
        fd = os.open(state.path(name), os.O_RDWR)
        os.pwrite(fd, data, 0)
        state.wrote(fids[name], 0, len(data))
        os.close(fd)
    lost = state.lose(torn_seed=1)
    assert lost["torn"] == [] and lost["unsynced_files"] == 2
    assert tree(state) == {"tiny": b""}
