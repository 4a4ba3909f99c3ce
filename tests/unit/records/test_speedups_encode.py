"""The C records-section encoder (`encode_rows`, client/records/_speedups.c) against msgpack.

For every input it returns either exactly what build_batch's Python paths pack (the same bytes,
base and max timestamps) or None (build_batch then packs in Python). Skipped when the
extension is not built; build_batch itself runs with both encoders in every records test
(conftest.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client.records import build_batch, builder, decode_batch

ROOT = Path(__file__).resolve().parents[3]
INT64 = st.integers(-(2**63), 2**63 - 1)


@pytest.fixture(scope="module", autouse=True)
def records_decoder() -> None:
    """Overrides conftest's: these tests call each encoder explicitly, so they run once."""
    return


def _python(records: list, default_ts: int) -> tuple[bytes, int, int]:
    """What build_batch packs without the extension (its row tuples through msgpack)."""
    rows = []
    tss = []
    for i, rec in enumerate(records):
        ts = default_ts if len(rec) == 2 or rec[3] is None else rec[3]
        tss.append(ts)
        rows.append((i, ts - tss[0], rec[0], rec[1], None))
    return msgpack.packb(rows, use_bin_type=True), tss[0], max(tss)


_blob = st.none() | st.binary(max_size=40) | st.sampled_from([b"", b"k" * 255, b"v" * 256])
_record = st.tuples(_blob, _blob) | st.tuples(_blob, _blob, st.none(), st.none() | INT64)


@settings(max_examples=400, deadline=None)
@given(records=st.lists(_record, min_size=1, max_size=40), default_ts=INT64)
def test_plain_records_encode_exactly_as_msgpack(records, default_ts, speedups):
    sp = speedups
    got = sp.encode_rows(records, default_ts)
    tss = [default_ts if len(r) == 2 or r[3] is None else r[3] for r in records]
    if not all(-(2**63) <= t - tss[0] < 2**63 for t in tss):
        assert got is None  # a delta outside int64: the Python path's business
        return
    assert got == _python(records, default_ts)


def test_every_size_class_of_count_ints_and_bins(speedups):
    sp = speedups
    for n in (1, 15, 16, 65535, 65536):
        recs = [(None, b"x")] * n
        assert sp.encode_rows(recs, 5) == _python(recs, 5), n
    for size in (0, 255, 256, 65535, 65536, 1 << 20):
        recs = [(b"k" * size, b"v" * size), (None, None)]
        assert sp.encode_rows(recs, 5) == _python(recs, 5), size
    deltas = [0, 1, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**62]
    deltas += [-1, -32, -33, -128, -129, -32768, -32769, -(2**31), -(2**31) - 1, -(2**62)]
    recs = [(None, b"a", None, 0)] + [(None, b"b", None, d) for d in deltas]
    assert sp.encode_rows(recs, 0) == _python(recs, 0)


def test_anything_else_falls_back(speedups):
    sp = speedups
    for records in (
        [],
        (("k", b"v"),),  # not a list
        [(b"k", b"v", None)],  # 3 items
        [[b"k", b"v"]],  # a list, not a tuple
        [(b"k", "text")],  # str value
        [(bytearray(b"k"), b"v")],
        [(memoryview(b"k"), b"v")],
        [(b"k", b"v", [("h", b"1")], None)],  # headers
        [(b"k", b"v", (), None)],  # empty headers: Python turns them into nil
        [(b"k", b"v", None, 1.5)],  # float timestamp
        [(b"k", b"v", None, True)],  # bool is not an exact int
        [(b"k", b"v", None, 2**63)],  # beyond int64
        [(b"k", b"v", None, 2**62), (b"k", b"v", None, -(2**62) - 10)],  # delta overflow
        [(b"k", b"v"), 7],
    ):
        assert sp.encode_rows(records, 0) is None, records
    with pytest.raises(TypeError):
        sp.encode_rows([(b"k", b"v")])
    with pytest.raises(OverflowError):
        sp.encode_rows([(b"k", b"v")], 2**63)


def test_build_batch_is_the_same_with_either_encoder(monkeypatch, speedups):
    cases = [
        [(None, b"v%d" % i) for i in range(1000)],
        [(b"k", b"v", None, 1000 + i % 7) for i in range(100)],
        [(b"k", b"v", [("h", b"x")], 5), (None, None)],  # headers: Python either way
        [(b"k", "s")],  # a str value: Python either way
    ]
    for recs in cases:
        c = build_batch(recs, timestamp_ms=42, base_offset=9)
        monkeypatch.setattr(builder, "_c_encode_rows", None)
        py = build_batch(recs, timestamp_ms=42, base_offset=9)
        monkeypatch.undo()
        assert c == py
        assert len(decode_batch(c)) == len(recs)


def test_no_leak_and_balanced_refcounts(speedups, bytes_kept):
    sp = speedups
    key = b"key-" + os.urandom(8)  # fresh objects, not shared with anything else
    ts = 2**40 + 12345
    good = [(key, b"v" * 10, None, ts)] * 50
    bad = [(key, b"v"), (key, "s")]
    before = sys.getrefcount(key), sys.getrefcount(ts)

    def run(n: int) -> None:
        for _ in range(n):
            sp.encode_rows(good, 7)
            sp.encode_rows(bad, 7)

    grown = bytes_kept(run)
    assert grown < 64 * 1024, f"{grown} bytes still allocated after 20k calls"
    assert (sys.getrefcount(key), sys.getrefcount(ts)) == before


def test_no_extensions_env_forces_the_python_encoder(speedups):
    env = {k: v for k, v in os.environ.items() if k != "GREGOR_NO_EXTENSIONS"}
    code = "import client.records.builder as b; print(b.ENCODER)"
    run = [sys.executable, "-c", code]
    out = subprocess.run(run, env={**env, "GREGOR_NO_EXTENSIONS": "1"}, cwd=ROOT,
                         capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    assert out.stdout.strip() == "python"
    out = subprocess.run(run, env=env, cwd=ROOT, capture_output=True, text=True, timeout=60,
                         check=True)  # fmt: skip
    assert out.stdout.strip() == "c"
