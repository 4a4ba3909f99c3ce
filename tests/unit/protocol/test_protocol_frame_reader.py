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


def test_large_frame_grows_with_received_bytes() -> None:
    reader = FrameReader(1 << 30)
    size = 64 << 20
    buf = reader.get_buffer()
    buf[:4] = LENGTH.pack(size)
    buf.release()
    assert reader.buffer_updated(4) == []
    # Only the prefix has arrived: the frame's array is the first chunk, not 64 MiB.
    assert len(reader.get_buffer()) <= 8 << 20


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
