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

    def lose(self) -> dict[str, bytes]:
        kept = {name: self.synced.get(fid, b"") for name, fid in self.names.items()}
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
