"""Offset and time indexes against naive models (hypothesis), and their on-disk checks."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.log.config import LogConfig
from broker.log.index import OFFSET_ENTRY, TIME_ENTRY, WRITE_EVERY, OffsetIndex, TimeIndex
from broker.log.segment import LogSegment

BASE = 1000


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(st.tuples(st.integers(1, 50), st.integers(1, 500)), min_size=0, max_size=40),
    probes=st.lists(st.integers(BASE - 5, BASE + 2500), max_size=20),
    cut=st.integers(BASE, BASE + 2500),
)
def test_offset_index_matches_model(steps, probes, cut):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "x.index"
        index = OffsetIndex(path, BASE, 1 << 20)
        model: list[tuple[int, int]] = []
        offset, pos = BASE, 0
        for doff, dpos in steps:
            offset += doff
            pos += dpos
            index.append(offset, pos)
            model.append((offset, pos))

        def expect(o):
            return max((e for e in model if e[0] <= o), default=(BASE, 0))

        for o in probes:
            assert index.lookup(o) == expect(o)
        index.truncate_to(cut)
        model = [e for e in model if e[0] < cut]
        index.close()
        reloaded = OffsetIndex(path, BASE, 1 << 20)
        assert reloaded.load(segment_size=pos + 1)
        for o in probes:
            assert reloaded.lookup(o) == expect(o)
        assert os.path.getsize(path) == 8 * len(model)
        reloaded.close()


@settings(max_examples=60, deadline=None)
@given(
    stamps=st.lists(st.integers(0, 10_000), max_size=40),
    probes=st.lists(st.integers(-10, 10_010), max_size=20),
)
def test_time_index_lookup_is_a_safe_start(stamps, probes):
    with tempfile.TemporaryDirectory() as d:
        index = TimeIndex(Path(d) / "x.timeindex", BASE, 1 << 20)
        running = -1
        batches = []  # (offset, max_ts)
        for i, ts in enumerate(stamps):
            offset = BASE + i
            running = max(running, ts)
            batches.append((offset, ts))
            index.maybe_append(running, offset)
        for ts in probes:
            start = index.lookup_before(ts)
            if start > BASE:  # an entry proves every batch up to and including it is older
                assert all(mts < ts for o, mts in batches if o <= start)
            if any(mts >= ts for _, mts in batches) and batches:
                first_hit = next(o for o, mts in batches if mts >= ts)
                assert start <= first_hit
        index.close()


def test_load_rejects_bad_files(tmp_path):
    path = tmp_path / "x.index"
    path.write_bytes(b"\x00" * 12)  # not whole entries
    assert not OffsetIndex(path, 0, 1 << 20).load(100)
    path.write_bytes(b"\x00\x00\x00\x05\x00\x00\x00\x10" + b"\x00\x00\x00\x03\x00\x00\x00\x20")
    assert not OffsetIndex(path, 0, 1 << 20).load(100)  # offsets go backwards
    path.write_bytes(b"\x00\x00\x00\x05\x00\x00\x01\x00")
    assert not OffsetIndex(path, 0, 1 << 20).load(100)  # position past the segment
    path.write_bytes(OFFSET_ENTRY.pack(1, 16) + OFFSET_ENTRY.pack(2, 16))
    assert not OffsetIndex(path, 0, 1 << 20).load(100)  # positions do not grow
    ok = TIME_ENTRY.pack(100, 1) + TIME_ENTRY.pack(200, 2)
    path.write_bytes(ok)
    assert TimeIndex(path, 0, 1 << 20).load(next_offset=3)
    path.write_bytes(TIME_ENTRY.pack(200, 1) + TIME_ENTRY.pack(100, 2))
    assert not TimeIndex(path, 0, 1 << 20).load(next_offset=3)  # timestamps go backwards
    path.write_bytes(TIME_ENTRY.pack(100, 2) + TIME_ENTRY.pack(200, 2))
    assert not TimeIndex(path, 0, 1 << 20).load(next_offset=3)  # offsets do not grow


def test_pinned_segment_fd_survives_close_until_unpinned(tmp_path):
    seg = LogSegment(tmp_path, 0, LogConfig(), 0)
    fd = seg.pin()
    seg.delete()
    os.fdatasync(fd)  # still open
    seg.unpin()
    assert not seg.file.is_open


def test_entries_reach_the_file_in_blocks_and_on_sync_fd_and_close(tmp_path):
    path = tmp_path / "x.index"
    index = OffsetIndex(path, 0, 1 << 20)
    for i in range(1, 4):
        index.append(i, i * 100)
    assert os.path.getsize(path) == 0 and index.lookup(3) == (3, 300)  # buffered, in memory
    os.close(index.sync_fd())
    assert os.path.getsize(path) == 3 * 8
    for i in range(4, 4 + WRITE_EVERY):
        index.append(i, i * 100)
    assert os.path.getsize(path) == (3 + WRITE_EVERY) * 8  # one block write
    index.append(100, 10_000)
    index.append(101, 10_100)
    index.truncate_to(101)  # inside the buffered tail: the file is untouched
    assert os.path.getsize(path) == (3 + WRITE_EVERY) * 8
    index.truncate_to(50)  # inside the written part: the file is cut
    assert os.path.getsize(path) == 49 * 8
    index.append(60, 6_000)
    index.close()
    reloaded = OffsetIndex(path, 0, 1 << 20)
    assert reloaded.load(segment_size=6_001)
    assert len(reloaded) == 50 and reloaded.last_entry() == (60, 6_000)
    reloaded.delete()
    assert not path.exists()


def test_is_full_follows_appends_truncation_reset_and_load(tmp_path):
    """is_full (an attribute the roll check reads) is len(index) >= max_entries after every
    change of the entries."""
    for kind, add in (
        (OffsetIndex, lambda ix, i: ix.append(BASE + i, 10 * i)),
        (TimeIndex, lambda ix, i: ix.maybe_append(100 + i, BASE + i)),
    ):
        path = tmp_path / f"{kind.__name__}.x"
        ix = kind(path, BASE, 3 * kind.entry.size)  # room for 3 entries
        for i in range(1, 4):
            assert not ix.is_full
            add(ix, i)
        assert ix.is_full and len(ix) == 3
        ix.truncate_to(BASE + 3)
        assert not ix.is_full and len(ix) == 2
        add(ix, 3)
        assert ix.is_full
        ix.close()
        again = kind(path, BASE, 3 * kind.entry.size)
        assert again.load(BASE + 10) if kind is TimeIndex else again.load(1 << 20)
        assert again.is_full
        small = kind(path, BASE, 2 * kind.entry.size)  # the file holds more than fits now
        assert small.load(BASE + 10) if kind is TimeIndex else small.load(1 << 20)
        assert small.is_full
        again.reset()
        assert not again.is_full and len(again) == 0
