"""FrameReader (BufferedProtocol framing): frames of every size reassemble whatever the read
sizes; large frames are read in place and grow with what arrived; oversized prefixes are
refused before any allocation."""

from __future__ import annotations

import random
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client.protocol.frame_reader import FrameReader
from client.protocol.framing import LENGTH, FrameTooLargeError


def _stream(sizes: list[int]) -> tuple[bytes, list[bytes]]:
    payloads = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    return b"".join(LENGTH.pack(len(p)) + p for p in payloads), payloads


def _feed(reader: FrameReader, stream: bytes, reads: list[int]) -> list[bytes]:
    """Deliver `stream` as a socket would: each read fills at most the offered buffer."""
    out: list[bytes] = []
    pos = 0
    i = 0
    while pos < len(stream):
        buf = reader.get_buffer()
        assert len(buf) > 0
        want = reads[i % len(reads)] if reads else len(stream)
        n = min(len(buf), want, len(stream) - pos)
        buf[:n] = stream[pos : pos + n]
        buf.release()
        pos += n
        i += 1
        out += [bytes(p) for p in reader.buffer_updated(n)]
    return out


@pytest.mark.parametrize("reads", [[1, 9000], [3, 70_000], [7, 4096], [65536], [1 << 20], []])
def test_mixed_sizes_reassemble(reads: list[int]) -> None:
    sizes = [0, 1, 10, 70_000, 5, 65536 - 4, 65536 - 3, 3 << 20, 2, (9 << 20) + 1, (1 << 20) + 1]
    stream, payloads = _stream(sizes)
    reader = FrameReader(1 << 30, scratch_bytes=65536)
    assert _feed(reader, stream, reads or [len(stream)]) == payloads
    assert reader.buffered == 0


@settings(max_examples=50, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 300), min_size=1, max_size=12),
    reads=st.lists(st.integers(1, 97), min_size=1, max_size=8),
    scratch=st.integers(8, 200),
)
def test_random_boundaries_small_scratch(sizes: list[int], reads: list[int], scratch: int) -> None:
    stream, payloads = _stream(sizes)
    reader = FrameReader(1 << 20, scratch_bytes=scratch)
    assert _feed(reader, stream, reads) == payloads


def _deliver(reader: FrameReader, data: bytes) -> list[bytes | bytearray]:
    """Feed `data` as reads of whatever room get_buffer offers."""
    out: list[bytes | bytearray] = []
    pos = 0
    while pos < len(data):
        buf = reader.get_buffer()
        n = min(len(buf), len(data) - pos)
        buf[:n] = data[pos : pos + n]
        buf.release()
        pos += n
        out += reader.buffer_updated(n)
    return out


def test_claimed_size_allocates_nothing_beyond_scratch() -> None:
    """A prefix claiming 64 MiB plus a few bytes stays in the scratch buffer: no array."""
    reader = FrameReader(1 << 30, scratch_bytes=65536)
    tracemalloc.start()
    try:
        assert _deliver(reader, LENGTH.pack(64 << 20) + b"abcdefgh") == []
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 1024, peak
    assert reader.reserved == 0 and reader.room_needed() == 0
    assert reader.buffered == 12
    assert len(reader.get_buffer()) == 65536 - 12


def test_large_frame_memory_follows_bytes_received() -> None:
    """Fed in 1 KiB..256 KiB reads, a 64 MiB frame's array stays within twice the bytes that
    arrived (and never beyond the scratch buffer before the scratch buffer is full)."""
    size = 64 << 20
    reader = FrameReader(1 << 30, scratch_bytes=65536)
    stream = LENGTH.pack(size) + bytes(size)
    pos = 0
    read = 1024
    sizes_seen = set()
    while pos < len(stream):
        buf = reader.get_buffer()
        n = min(len(buf), read, len(stream) - pos)
        buf[:n] = stream[pos : pos + n]
        buf.release()
        pos += n
        done = reader.buffer_updated(n)
        if done:
            assert pos == len(stream) and len(done) == 1
            assert type(done[0]) is bytearray and len(done[0]) == size
            break
        received = pos - 4
        assert received <= reader.buffered <= pos  # the prefix counts while in scratch
        assert reader.reserved <= max(0, 2 * received), (received, reader.reserved)
        sizes_seen.add(reader.reserved)
        read = min(read * 2, 256 * 1024)
    assert reader.reserved == 0 and reader.buffered == 0
    # Geometric growth: a handful of arrays, not one per read.
    assert len(sizes_seen) <= 12, sorted(sizes_seen)


def test_growth_is_explicit_and_can_be_budgeted() -> None:
    """room_needed says what grow() will allocate; queued bytes (FIONREAD) may size it in one
    step, never beyond the frame."""
    size = 1 << 20
    reader = FrameReader(1 << 30, scratch_bytes=4096)
    assert _deliver(reader, LENGTH.pack(size) + bytes(4092)) == []  # the scratch is full
    assert reader.reserved == 0
    assert reader.room_needed() == 2 * 4092
    assert reader.room_needed(queued=10 << 20) == size  # capped at the frame's size
    reader.grow(queued=100_000)
    assert reader.reserved == 2 * (4092 + 100_000) and reader.room_needed() == 0
    rest = size - 4092
    got = _deliver(reader, bytes(rest))
    assert len(got) == 1 and len(got[0]) == size and reader.reserved == 0


def test_oversized_prefix_refused_without_allocating() -> None:
    reader = FrameReader(1024)
    tracemalloc.start()
    try:
        buf = reader.get_buffer()
        buf[:7] = LENGTH.pack(2**32 - 1) + b"abc"
        buf.release()
        with pytest.raises(FrameTooLargeError, match="exceeds"):
            reader.buffer_updated(7)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024, peak


def test_random_stream_seeded() -> None:
    seed = random.randrange(1 << 30)
    print("seed", seed)
    rng = random.Random(seed)
    sizes = [rng.choice([rng.randrange(0, 200), rng.randrange(60_000, 300_000)]) for _ in range(30)]
    reads = [rng.randrange(1, 200_000) for _ in range(17)]
    stream, payloads = _stream(sizes)
    reader = FrameReader(1 << 30, scratch_bytes=65536)
    assert _feed(reader, stream, reads) == payloads
