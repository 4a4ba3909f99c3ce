"""broker/kafka/_convert.c against the Python reference in broker/kafka/records.py: the same
bytes for every section the reference converts, and None (never a different answer, never a
crash) for everything else. Skips when the extension is not built."""

from __future__ import annotations

import random

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.kafka import records

_convert = pytest.importorskip("broker.kafka._convert")

_bytes = st.one_of(st.none(), st.binary(max_size=300))
_int = st.integers(min_value=-(2**63), max_value=2**63 - 1)
_headers = st.one_of(
    st.none(),
    st.lists(
        st.tuples(st.text(max_size=40), st.one_of(st.none(), st.binary(max_size=40))), max_size=4
    ),
)
_row = st.tuples(_int, _int, _bytes, _bytes, _headers)


def _py_kafka(rows: list) -> bytes:
    return records.kafka_section([list(r) for r in rows])


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(_row, max_size=40))
def test_both_directions_match_the_reference(rows: list) -> None:
    gregor = msgpack.packb(
        [[od, td, k, v, None if h is None else [list(x) for x in h]] for od, td, k, v, h in rows],
        use_bin_type=True,
    )
    kafka = _py_kafka(rows)
    assert _convert.msgpack_to_kafka(gregor, len(rows)) == kafka
    # back: the reference's rows (an empty header list comes back as nil, as Kafka has no
    # difference between the two)
    expect = msgpack.packb(records.kafka_rows(kafka, len(rows)), use_bin_type=True)
    assert _convert.kafka_to_msgpack(kafka, len(rows)) == expect
    assert _convert.msgpack_to_kafka(expect, len(rows)) == kafka


def test_str_keys_and_values_in_gregor_sections() -> None:
    gregor = msgpack.packb([[0, 0, "k", "v", [["h", b"x"]]]], use_bin_type=True)
    assert _convert.msgpack_to_kafka(gregor, 1) == _py_kafka([(0, 0, b"k", b"v", [("h", b"x")])])


def test_garbage_gives_none_or_the_reference_answer() -> None:
    seed = random.randrange(2**32)
    print(f"seed {seed}")
    rnd = random.Random(seed)
    rows = [(i, i * 3 - 7, b"key%d" % i, b"v" * (i * 37 % 300), [("h", b"x")] if i % 2 else None)
            for i in range(20)]  # fmt: skip
    kafka = _py_kafka(rows)
    gregor = msgpack.packb(records.kafka_rows(kafka, 20), use_bin_type=True)
    for data, fn, ref in (
        (kafka, _convert.kafka_to_msgpack, lambda b, n: msgpack.packb(records.kafka_rows(b, n), use_bin_type=True)),
        (gregor, _convert.msgpack_to_kafka, records._section_from_msgpack),
    ):  # fmt: skip
        cases = [data[:i] for i in range(len(data))]  # every truncation
        for _ in range(400):
            b = bytearray(data)
            for _ in range(rnd.randint(1, 4)):
                b[rnd.randrange(len(b))] = rnd.randrange(256)
            cases.append(bytes(b))
        cases += [rnd.randbytes(rnd.randint(0, 200)) for _ in range(200)]
        for case in cases:
            for count in (20, 19, 21, 0):
                got = fn(case, count)
                if got is None:
                    continue
                assert got == ref(case, count), (seed, case, count)
