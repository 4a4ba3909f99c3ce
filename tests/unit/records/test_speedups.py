"""The C records-section decoder (client/records/_speedups.c) against the Python one.

For every input the C decoder returns either exactly what the Python path returns (same values,
same types) or None (then the reader falls back to Python). Skipped when the extension is not
built. The reader's selection (DECODER, GREGOR_NO_EXTENSIONS) is tested without the extension.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client.errors import CorruptRecordError
from client.records import build_batch, decode_partition_records, decode_records
from client.records import reader as reader_mod
from client.records.header import HEADER_SIZE, BatchHeader, parse_header
from client.records.reader import _py_consumer_records, _py_records
from client.records.record import ConsumerRecord, Record

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module", autouse=True)
def records_decoder() -> None:
    """Overrides conftest's: these tests pick each decoder explicitly, so they run once."""
    return


def _header(base_offset: int = 0, base_ts: int = 1_700_000_000_000, count: int = 0) -> BatchHeader:
    return BatchHeader(
        base_offset=base_offset,
        batch_length=HEADER_SIZE,
        partition_leader_epoch=-1,
        magic=2,
        crc=0,
        attributes=0,
        last_offset_delta=max(count - 1, 0),
        base_timestamp=base_ts,
        max_timestamp=base_ts,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        record_count=count,
    )


def _python(h: BatchHeader, section: Any, consumer: bool) -> Any:
    """What the Python path gives: ("ok", records) or ("corrupt", None)."""
    try:
        if consumer:
            return "ok", _py_consumer_records(h, section, 0, "topic", 7)
        return "ok", _py_records(h, section, 0)
    except CorruptRecordError:
        return "corrupt", None


def _c(sp: Any, h: BatchHeader, section: Any, consumer: bool) -> Any:
    if consumer:
        return sp.decode_rows(
            section, ConsumerRecord, ("topic", 7), h.base_offset, h.base_timestamp,
            h.record_count, (),
        )  # fmt: skip
    return sp.decode_rows(
        section, Record, (), h.base_offset, h.base_timestamp, h.record_count, None
    )


def _same(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down (1 == True, b"" != "" aside)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple | list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _check(sp: Any, h: BatchHeader, section: Any, must_decode: bool = False) -> None:
    for consumer in (True, False):
        got = _c(sp, h, section, consumer)
        status, want = _python(h, section, consumer)
        if got is None:
            assert not must_decode, "C decoder fell back on a plain section"
            continue
        assert status == "ok", f"C decoded what Python calls corrupt: {got!r}"
        assert _same(got, want), f"C {got!r} != Python {want!r}"


# -- round trips ------------------------------------------------------------------------------

_raw = st.none() | st.binary(max_size=300)
_headers = st.none() | st.lists(
    st.tuples(st.text(max_size=20), st.none() | st.binary(max_size=40)), max_size=4
)
_int64 = st.integers(-(2**63), 2**63 - 1)
_delta = st.integers(-(2**40), 2**40) | st.sampled_from([0, 1, -1, 127, 128, -32, -33, 2**31])


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(st.tuples(_delta, _raw | st.text(max_size=20), _raw, _headers), max_size=40),
    base_offset=st.integers(0, 2**62) | st.sampled_from([0, 2**63 - 2**40]),
    base_ts=st.integers(-(2**62), 2**62),
)
def test_random_sections_decode_exactly_as_python(rows, base_offset, base_ts, speedups):
    sp = speedups
    section = msgpack.packb(
        [[i, td, k, v, hd] for i, (td, k, v, hd) in enumerate(rows)], use_bin_type=True
    )
    h = _header(base_offset, base_ts, len(rows))
    _check(sp, h, section, must_decode=True)
    _check(sp, h, memoryview(section), must_decode=True)


@settings(max_examples=100, deadline=None)
@given(
    deltas=st.lists(st.tuples(_int64, _int64), min_size=1, max_size=20),
    base_offset=_int64,
    base_ts=_int64,
)
def test_extreme_deltas_decode_as_python_or_fall_back(deltas, base_offset, base_ts, speedups):
    """Overflow beyond int64 in base + delta must fall back (Python gives the big int)."""
    sp = speedups
    section = msgpack.packb([[od, td, b"k", b"v", None] for od, td in deltas])
    _check(sp, _header(base_offset, base_ts, len(deltas)), section)


def test_uint64_delta_and_overflow_fall_back(speedups):
    sp = speedups
    h = _header(2**63 - 1, 2**63 - 1, 1)
    for row in (
        [2**64 - 1, 0, None, None, None],
        [1, 0, None, None, None],
        [0, 1, None, None, None],
    ):
        assert _c(sp, h, msgpack.packb([row]), True) is None
    ok = _c(sp, h, msgpack.packb([[0, 0, None, None, None]]), True)
    assert ok == [ConsumerRecord("topic", 7, 2**63 - 1, 2**63 - 1, None, None, ())]


def test_many_records_with_real_batches_and_shared_timestamp(speedups):
    sp = speedups
    recs = [(b"k%d" % i, os.urandom(100), None, 1_700_000_000_000) for i in range(5000)]
    recs[10] = (None, b"", [("a", b"1"), ("b", b"")], 1_700_000_000_005)
    batch = build_batch(recs, base_offset=10**12)
    h = parse_header(batch, 0)
    section = memoryview(batch)[HEADER_SIZE:]
    _check(sp, h, section, must_decode=True)
    out = _c(sp, h, section, True)
    assert out[0].timestamp is h.base_timestamp and out[4999].timestamp is h.base_timestamp
    assert out[10].headers == (("a", b"1"), ("b", b""))
    assert [r.offset for r in out] == list(range(10**12, 10**12 + 5000))


def test_keys_values_and_headers_of_every_size_class(speedups):
    """fixstr/str8/16/32, bin8/16/32, array16/32 for headers, every int width."""
    sp = speedups
    rows = []
    for n in (0, 1, 31, 32, 255, 256, 65535, 65536):
        rows.append([len(rows), n, b"b" * n, "s" * n, [["h", b"x"]] * min(n, 70000)])
    for d in (
        0,
        127,
        -32,
        -33,
        -128,
        -129,
        255,
        256,
        -32768,
        -32769,
        65535,
        65536,
        2**31,
        2**32,
        -(2**31) - 1,
    ):
        rows.append([len(rows), d, None, None, None])
    section = msgpack.packb(rows, use_bin_type=True)
    _check(sp, _header(5, 1000, len(rows)), section, must_decode=True)


def test_invalid_utf8_and_other_types_fall_back(speedups):
    sp = speedups
    h = _header(0, 0, 1)
    bad_utf8 = msgpack.packb([[0, 0, None, None, None]])[:-1] + b"\x91\x92\xa2\xff\xfe\xc0"
    cases = [
        bad_utf8,
        msgpack.packb([[0, 0, True, None, None]]),
        msgpack.packb([[0, 0, 1.5, None, None]]),
        msgpack.packb([[0, 0, {"a": 1}, None, None]]),
        msgpack.packb([[0.0, 0, None, None, None]]),
        msgpack.packb([[0, 0, None, None, b"notanarray"]], use_bin_type=True),
        msgpack.packb([[0, 0, None, None]]),
        msgpack.packb([[0, 0, None, None, None, None]]),
        msgpack.packb([{"a": 1}]),
        msgpack.packb({"a": 1}),
        msgpack.packb(1.0),
        msgpack.packb([msgpack.ExtType(1, b"x")]),
        msgpack.packb([[0, 0, None, None, None]]) + b"\x00",  # trailing bytes
        msgpack.packb([]),  # count mismatch (header says 1)
        msgpack.packb([[0, 0, None, None, None]] * 2),
        b"",
    ]
    for section in cases:
        for consumer in (True, False):
            assert _c(sp, h, section, consumer) is None, section
        _check(sp, h, section)


def test_deep_nesting_falls_back(speedups):
    sp = speedups
    deep: Any = b"x"
    for _ in range(40):
        deep = [deep]
    section = msgpack.packb([[0, 0, deep, None, None]], use_bin_type=True)
    assert _c(sp, _header(0, 0, 1), section, True) is None
    _check(sp, _header(0, 0, 1), section)


# -- corrupt input ----------------------------------------------------------------------------


def _plain_section(n: int = 6) -> bytes:
    rows: list[list[Any]] = [
        [i, i * 3 - 5, b"key%d" % i, b"value" * i, [[f"h{i}", b"v"]] if i % 2 else None]
        for i in range(n)
    ]
    rows[2][3] = "text value"
    return msgpack.packb(rows, use_bin_type=True)


def test_every_truncation_and_every_bit_flip_is_none_or_as_python(speedups):
    sp = speedups
    section = _plain_section()
    h = _header(100, 5000, 6)
    _check(sp, h, section, must_decode=True)
    for cut in range(len(section)):
        trunc = section[:cut]
        assert _c(sp, h, trunc, True) is None
        assert _c(sp, h, trunc, False) is None
    for i in range(len(section)):
        for bit in range(8):
            buf = bytearray(section)
            buf[i] ^= 1 << bit
            for count in (5, 6, 7):
                _check(sp, _header(100, 5000, count), bytes(buf))


def test_random_bytes_never_crash(speedups):
    sp = speedups
    seed = random.randrange(2**32)
    print(f"seed={seed}")
    rng = random.Random(seed)
    section = _plain_section()
    for _ in range(3000):
        if rng.random() < 0.5:
            buf = bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
        else:  # a valid prefix followed by random bytes
            cut = rng.randrange(len(section))
            buf = section[:cut] + bytes(rng.randrange(256) for _ in range(rng.randrange(20)))
        _check(
            sp, _header(rng.randrange(2**40), rng.randrange(-(2**40), 2**40), rng.randrange(8)), buf
        )


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200), count=st.integers(-1, 10))
def test_hypothesis_garbage_is_none_or_as_python(data, count, speedups):
    sp = speedups
    _check(sp, _header(1, 2, count), data)


def test_huge_declared_lengths_do_not_allocate(speedups):
    sp = speedups
    h = _header(0, 0, 2**31 - 1)
    assert _c(sp, h, b"\xdd\x7f\xff\xff\xff", True) is None
    h1 = _header(0, 0, 1)
    for tail in (b"\xc6\xff\xff\xff\xff", b"\xdb\xff\xff\xff\xff", b"\xdd\xff\xff\xff\xff"):
        assert _c(sp, h1, b"\x91\x95\x00\x00" + tail, True) is None


def test_bad_arguments_raise_type_error(speedups):
    sp = speedups
    with pytest.raises(TypeError):
        sp.decode_rows("not a buffer", Record, (), 0, 0, 0, None)
    with pytest.raises(TypeError):
        sp.decode_rows(b"\x90", int, (), 0, 0, 0, None)
    with pytest.raises(TypeError):
        sp.decode_rows(b"\x90", Record, [], 0, 0, 0, None)


# -- leaks ------------------------------------------------------------------------------------


def test_no_leak_over_many_decodes_and_fallbacks(speedups, bytes_kept):
    """Python-level allocations still alive after 10k decodes (ok, fallback, error paths) stay
    within a small bound: a leaked tuple, bytes or int per call would show as >= 10k blocks."""
    sp = speedups
    good = _plain_section(20)
    h = _header(10, 20, 20)
    bad = [good[:-1], good + b"\x00", good.replace(b"text value", b"text\xffalue")]
    sections = [good, *bad]

    def run(n: int) -> None:
        for i in range(n):
            s = sections[i % len(sections)]
            _c(sp, h, s, True)
            _c(sp, h, memoryview(s), False)

    grown = bytes_kept(run)
    assert grown < 64 * 1024, f"{grown} bytes still allocated after 10k decodes"


def test_refcounts_of_shared_objects_are_balanced(speedups):
    sp = speedups
    topic = "topic-" + str(random.random())  # a fresh, non-interned object
    base_ts = 2**40 + random.randrange(1000)
    good = _plain_section(20)
    before = sys.getrefcount(topic), sys.getrefcount(base_ts)
    for section in (good, good[:-3], good + b"\x00"):
        for _ in range(100):
            out = sp.decode_rows(section, ConsumerRecord, (topic, 7), 0, base_ts, 20, ())
            del out
    assert (sys.getrefcount(topic), sys.getrefcount(base_ts)) == before


# -- reader selection -------------------------------------------------------------------------


def _decoder_in_subprocess(env_value: str | None) -> str:
    env = dict(os.environ)
    env.pop("GREGOR_NO_EXTENSIONS", None)
    if env_value is not None:
        env["GREGOR_NO_EXTENSIONS"] = env_value
    out = subprocess.run(
        [sys.executable, "-c", "import client.records.reader as r; print(r.DECODER)"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return out.stdout.strip()


def test_no_extensions_env_forces_python():
    assert _decoder_in_subprocess("1") == "python"


def test_extension_is_used_when_built(speedups):
    assert _decoder_in_subprocess(None) == "c"
    assert _decoder_in_subprocess("0") == "c"
    assert reader_mod.DECODER == "c"


def test_reader_falls_back_per_batch_to_the_precise_error():
    """A section the C decoder refuses still decodes through Python, or raises its error."""
    ok = build_batch([(b"k", b"v", None, 1000)] * 3)
    from client.records.builder import _assemble

    # A bin16 value: C's fast path takes bin8 only, its generic path the rest.
    odd_rows = msgpack.packb([[0, 0, b"k", b"v" * 300, None]], use_bin_type=True)
    odd = _assemble(odd_rows, 1, 0, 0, 0, 1000, 1000, -1, -1, -1)
    got = decode_partition_records(ok + odd, "t", 0)
    assert [r.value for r in got] == [b"v", b"v", b"v", b"v" * 300]
    # A bool value (a flipped byte with the CRC check off): C declines, Python names it.
    bool_rows = msgpack.packb([[0, 0, b"k", True, None]], use_bin_type=True)
    with pytest.raises(CorruptRecordError, match="not bin, str or nil"):
        decode_partition_records(ok + _assemble(bool_rows, 1, 0, 0, 0, 1000, 1000, -1, -1, -1),
                                 "t", 0)  # fmt: skip
    bad = _assemble(msgpack.packb([[0, 0, b"k"]]), 1, 0, 0, 0, 1000, 1000, -1, -1, -1)
    with pytest.raises(CorruptRecordError, match="malformed record"):
        decode_records(ok + bad)


# -- bounds: every byte after the section is unreadable --------------------------------------

_GUARD_PAGE_SCRIPT = r"""
import ctypes, mmap, random, sys
import msgpack
from client.records._speedups import decode_rows
from client.records.record import ConsumerRecord

PAGE = mmap.PAGESIZE
mm = mmap.mmap(-1, 2 * PAGE)
anchor = ctypes.c_char.from_buffer(mm)
libc = ctypes.CDLL(None, use_errno=True)
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
if libc.mprotect(ctypes.addressof(anchor) + PAGE, PAGE, 0) != 0:  # PROT_NONE
    sys.exit("mprotect failed: %d" % ctypes.get_errno())

def at_page_end(data):
    mm[PAGE - len(data) : PAGE] = data
    return memoryview(mm)[PAGE - len(data) : PAGE]

rows = [[i, 2**40 - i, b"k" * i, "v" * (i * 40), [["h", b"x" * 300]] if i % 2 else None]
        for i in range(8)]
sections = [msgpack.packb(rows, use_bin_type=True),
            msgpack.packb([[2**62, -2**62, None, None, [[None, 2**64 - 1]]]]),
            msgpack.packb([[0, 0, None, None, None]] * 20)]
seed = int(sys.argv[1])
rng = random.Random(seed)
n = 0
for section in sections:
    for cut in range(len(section) + 1):
        for count in (len(rows), 1, 20):
            view = at_page_end(section[:cut])
            decode_rows(view, ConsumerRecord, ("t", 0), 0, 0, count, ())
            view.release()
            n += 1
for _ in range(3000):
    cut = rng.randrange(len(sections[0]))
    data = sections[0][:cut] + bytes(rng.randrange(256) for _ in range(rng.randrange(12)))
    view = at_page_end(data)
    decode_rows(view, ConsumerRecord, ("t", 0), 0, 0, rng.randrange(10), ())
    view.release()
    n += 1
print("ok", n)
"""


def test_never_reads_past_the_section_end(speedups):
    """Sections placed right before a PROT_NONE page: a read past the end kills the child."""
    if not sys.platform.startswith("linux"):
        pytest.skip("mprotect via ctypes: Linux only")
    seed = random.randrange(2**32)
    print(f"seed={seed}")
    out = subprocess.run(
        [sys.executable, "-c", _GUARD_PAGE_SCRIPT, str(seed)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, f"child died ({out.returncode}), seed={seed}: {out.stderr[-2000:]}"
    assert out.stdout.startswith("ok "), out.stdout
