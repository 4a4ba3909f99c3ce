"""Decompression bombs (issue 10, item 5): every codec stops once its output passes the cap,
so a small records section that inflates to gigabytes costs at most about the cap in memory.
zstd inflated a whole frame before checking the cap; gzip and lz4 were bounded already.

The cap is lowered to 4 MiB here so a 64 MiB bomb is 16x over it; peak memory is measured
with tracemalloc (the codecs' output buffers are Python objects it sees).
"""

from __future__ import annotations

import gzip
import tracemalloc

import pytest

from client.errors import CorruptRecordError
from client.records import compression

CAP = 4 << 20
BOMB = 64 << 20


def _bombs() -> dict[str, tuple[int, bytes]]:
    import lz4.frame
    import zstandard

    zeros = bytes(BOMB)
    return {
        "gzip": (compression.GZIP, gzip.compress(zeros, compresslevel=1)),
        "lz4": (compression.LZ4, lz4.frame.compress(zeros)),
        "zstd": (compression.ZSTD, zstandard.ZstdCompressor().compress(zeros)),
        "zstd-no-size": (
            compression.ZSTD,
            zstandard.ZstdCompressor(write_content_size=False).compress(zeros),
        ),
    }


BOMBS = _bombs()


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_bomb_is_refused_within_the_cap(name: str, monkeypatch) -> None:
    codec, section = BOMBS[name]
    assert len(section) < BOMB // 100  # a real bomb: tiny input
    monkeypatch.setattr(compression, "MAX_DECOMPRESSED_BYTES", CAP)
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError, match=f"beyond {CAP}"):
            compression.decompress(codec, section)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * CAP, f"{name}: peak {peak} bytes for a cap of {CAP}"


@pytest.mark.parametrize("codec", [compression.GZIP, compression.LZ4, compression.ZSTD])
def test_sections_up_to_the_cap_still_decompress(codec: int, monkeypatch) -> None:
    monkeypatch.setattr(compression, "MAX_DECOMPRESSED_BYTES", CAP)
    data = bytes(range(256)) * (CAP // 256)  # exactly the cap
    assert bytes(compression.decompress(codec, compression.compress(codec, data))) == data


def test_truncated_zstd_with_a_declared_size_is_corrupt() -> None:
    section = compression.compress(compression.ZSTD, b"x" * 100_000)
    with pytest.raises(CorruptRecordError):
        compression.decompress(compression.ZSTD, section[: len(section) // 2])
