"""The C batch check (client/records/_crc.c validate_batches, through header.validate_all)
against the Python one (header.validate batch by batch, as broker/log/batches.py runs it).

For every input the C path returns exactly what the Python path returns (same positions, same
BatchHeader values) when the Python path accepts it, and None when the Python path raises: it
never accepts what Python refuses (bad CRC, bad magic, truncation, a count mismatch, a batch
over max_bytes). Skipped when the extension is not built or has no SSE4.2.
"""

from __future__ import annotations

import random
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client.errors import CorruptRecordError
from client.records import build_batch
from client.records import header as header_mod
from client.records.header import (
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    BatchHeader,
    peek_size,
    validate,
)


@pytest.fixture(scope="module")
def c_validate(crc_hw: Any) -> Any:
    """The C function; skips when it is not there (not built, GREGOR_NO_EXTENSIONS, no SSE4.2)."""
    assert header_mod._c_validate_batches is crc_hw.validate_batches
    return crc_hw.validate_batches


def _python(buf: Any, max_bytes: int | None) -> list[tuple[int, BatchHeader]]:
    """broker/log/batches.py's Python loop (its errors: CorruptRecordError, or ValueError
    standing for its MessageTooLargeError)."""
    if not len(buf):
        raise CorruptRecordError("empty records")
    out = []
    pos, n = 0, len(buf)
    while pos < n:
        if max_bytes is not None:
            size = peek_size(buf, pos)
            if size is not None and size > max_bytes:
                raise ValueError("too large")
        out.append((pos, validate(buf, pos, True)))
        pos += out[-1][1].size
    return out


def _agree(buf: Any, max_bytes: int | None = None) -> list[tuple[int, BatchHeader]] | None:
    got = header_mod.validate_all(buf, max_bytes)
    try:
        want = _python(buf, max_bytes)
    except (CorruptRecordError, ValueError):
        assert got is None
        return None
    assert got == want
    assert all(type(h) is BatchHeader and type(p) is int for p, h in got)
    assert [tuple(map(type, h)) for _p, h in got] == [(int,) * 13] * len(got)
    return got


def _batch(n: int = 3, seq: int = 0, size: int = 100) -> bytes:
    recs = [(None, b"x" * size)] * n
    return build_batch(recs, producer_id=1000, producer_epoch=2, base_sequence=seq)


def _patch(buf: bytes, fmt: str, at: int, value: int, recrc: bool = True) -> bytearray:
    """`buf` with the field at `at` rewritten (and the CRC recomputed unless `recrc` is False)."""
    out = bytearray(buf)
    struct.pack_into(fmt, out, at, value)
    if recrc:
        from client.records.crc import crc32c

        struct.pack_into(">I", out, 17, crc32c(bytes(out[CRC_START:])))
    return out


def test_accepts_what_python_accepts_with_the_same_headers(c_validate):
    one = _batch()
    two = one + _batch(5, 3)
    for buf in (one, bytearray(one), memoryview(bytearray(two)), two, bytes(two)):
        got = _agree(buf)
        assert got is not None and len(got) in (1, 2)
    h = _agree(two)[1][1]  # type: ignore[index]
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.record_count) == (1000, 2, 3, 5)
    assert h.crc == struct.unpack_from(">I", two, len(one) + 17)[0]


def test_negative_and_extreme_fields_come_out_as_python_reads_them(c_validate):
    b = _batch()
    b = _patch(b, ">q", 0, -(2**63))  # base_offset (outside the CRC)
    b = _patch(b, ">i", 12, -1)  # partition_leader_epoch (outside the CRC)
    b = _patch(b, ">h", 21, -32768)  # attributes
    b = _patch(b, ">q", 27, 2**63 - 1)  # base_timestamp
    b = _patch(b, ">q", 35, -5)  # max_timestamp
    b = _patch(b, ">q", 43, -1)  # producer_id
    b = _patch(b, ">h", 51, -1)  # producer_epoch
    b = _patch(b, ">i", 53, -(2**31))  # base_sequence
    got = _agree(b)
    assert got is not None
    assert got[0][1] == BatchHeader._make(HEADER.unpack_from(b, 0))


def test_refuses_a_bad_crc_anywhere(c_validate):
    b = _batch()
    for at in (17, 20, CRC_START, CRC_START + 7, HEADER_SIZE, len(b) - 1):
        bad = bytearray(b)
        bad[at] ^= 0x01
        assert c_validate(bad, -1, BatchHeader) is None
        assert _agree(bad) is None
    # outside the CRC: base_offset, batch_length's neighbours, partition_leader_epoch
    for at in (0, 7, 12, 15):
        ok = bytearray(b)
        ok[at] ^= 0x40
        assert _agree(ok) is not None


def test_refuses_a_bad_magic(c_validate):
    for magic in (0, 1, 3, -2):
        bad = _patch(_batch(), ">b", MAGIC_OFFSET, magic)
        assert c_validate(bad, -1, BatchHeader) is None
        with pytest.raises(CorruptRecordError, match="bad magic"):
            validate(bad)


def test_refuses_every_truncation_and_trailing_garbage(c_validate):
    first = _batch()
    two = first + _batch(2, 3)
    for cut in range(len(two)):
        assert (_agree(two[:cut]) is not None) == (cut == len(first)), cut
    assert _agree(two + b"\0") is None
    assert _agree(two + _batch()[:LOG_OVERHEAD]) is None


def test_refuses_bad_lengths_and_counts(c_validate):
    b = _batch(3)
    for length in (-1, 0, HEADER_SIZE - LOG_OVERHEAD - 1, len(b) - LOG_OVERHEAD + 1, 2**31 - 1):
        assert _agree(_patch(b, ">i", 8, length, recrc=False)) is None
    for count, delta in ((4, 2), (-1, 2), (3, -1), (2**31 - 1, 2), (3, -(2**31))):
        bad = _patch(_patch(b, ">i", 57, count), ">i", 23, delta)
        assert c_validate(bad, -1, BatchHeader) is None
        with pytest.raises(CorruptRecordError, match="count mismatch"):
            validate(bad)
    # what Python lets through, C too: fewer records than offsets (compaction), or none
    for count in (0, 1, 2):
        assert _agree(_patch(b, ">i", 57, count)) is not None


def test_max_bytes_as_the_log_checks_it(c_validate):
    b = _batch(3)
    assert _agree(b, len(b)) is not None
    assert _agree(b, len(b) - 1) is None
    assert _agree(b + b, len(b)) is not None
    assert _agree(b + _batch(4, 3), len(b)) is None  # the second batch is larger
    assert _agree(b, 0) is None
    assert _agree(b"", None) is None


def test_refuses_odd_arguments(c_validate):
    with pytest.raises(TypeError):
        c_validate(_batch(), -1, int)  # not a tuple subclass
    with pytest.raises(TypeError):
        c_validate(_batch(), -1)
    with pytest.raises(TypeError):
        c_validate(_batch(), None, BatchHeader)
    # not a contiguous buffer, or no buffer: None (the Python path decides)
    assert c_validate(memoryview(bytearray(_batch() * 2))[::2], -1, BatchHeader) is None
    assert c_validate("text", -1, BatchHeader) is None
    # items of more than a byte, or more than one dimension: len() would not count bytes
    four = bytearray(_batch() + b"\0" * (-len(_batch()) % 4))
    assert c_validate(memoryview(four).cast("I"), -1, BatchHeader) is None
    two_d = _batch() * 2
    assert c_validate(memoryview(two_d).cast("B", (2, len(two_d) // 2)), -1, BatchHeader) is None
    assert c_validate(memoryview(two_d).cast("c"), -1, BatchHeader) is not None


@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 40), min_size=1, max_size=4),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=3),
    cut=st.integers(-30, 0),
    max_bytes=st.one_of(st.none(), st.integers(0, 5000)),
)
def test_agrees_with_python_on_damaged_runs(c_validate, sizes, flips, cut, max_bytes):
    buf = bytearray(b"".join(_batch(n, 0, 30) for n in sizes))
    for at, value in flips:
        buf[at % len(buf)] = value
    if cut:
        del buf[cut:]
    _agree(buf, max_bytes)


def test_random_headers_never_crash(c_validate):
    rng = random.Random(11)
    print("seed 11")
    for _ in range(2000):
        n = rng.choice((0, 11, 12, 60, 61, 62, 100, 300))
        buf = bytearray(rng.randbytes(n))
        if n > MAGIC_OFFSET and rng.random() < 0.7:
            buf[MAGIC_OFFSET] = 2
        if n > 12 and rng.random() < 0.7:
            struct.pack_into(">i", buf, 8, n - LOG_OVERHEAD)
        _agree(buf, rng.choice((None, 100, 10**6)))


def test_no_leak(c_validate, bytes_kept):
    good, bad = _batch() * 2, bytearray(_batch())
    bad[-1] ^= 1

    def run(n: int) -> None:
        for _ in range(n):
            c_validate(good, -1, BatchHeader)
            c_validate(bad, -1, BatchHeader)

    assert bytes_kept(run) < 10_000


def test_validate_all_without_the_extension(monkeypatch):
    monkeypatch.setattr(header_mod, "_c_validate_batches", None)
    assert header_mod.validate_all(_batch()) is None
