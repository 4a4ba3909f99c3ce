"""unpack_produce_views (client/protocol/views.py): a large Produce payload decoded like msgpack,
with its large bins as writable views of the payload; None (msgpack decides) for anything else."""

from __future__ import annotations

from typing import Any

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import msgpack_values

from client.protocol import encode_request
from client.protocol.framing import ZERO_COPY_MIN_BYTES, decode_request
from client.protocol.views import MAX_DEPTH, unpack_produce_views


def same(a: Any, b: Any) -> bool:
    """Equal as msgpack would write them (NaN-safe)."""
    return msgpack.packb(plain(a), use_bin_type=True) == msgpack.packb(b, use_bin_type=True)


def plain(obj: Any) -> Any:
    """`obj` with every memoryview turned into bytes (what msgpack would have returned)."""
    if type(obj) is memoryview:
        return bytes(obj)
    if type(obj) is list:
        return [plain(x) for x in obj]
    if type(obj) is dict:
        return {k: plain(v) for k, v in obj.items()}
    return obj


def views_in(obj: Any) -> list[memoryview]:
    if type(obj) is memoryview:
        return [obj]
    if type(obj) is list:
        return [v for x in obj for v in views_in(x)]
    if type(obj) is dict:
        return [v for x in obj.values() for v in views_in(x)]
    return []


def produce_payload(body: Any, api_key: int = 0) -> bytearray:
    return bytearray(encode_request(api_key, 9, 12345, "client-1", body)[4:])


_body = st.dictionaries(st.text(max_size=6) | st.integers(-3, 3), msgpack_values, max_size=5)
_records = st.binary(max_size=300)


@settings(max_examples=400, deadline=None)
@given(body=_body, records=st.lists(_records, max_size=4), min_bin=st.integers(0, 64))
def test_decodes_as_msgpack_with_large_bins_as_views(body, records, min_bin):
    body = {**body, "topics": [{"name": "t", "partitions": [{"records": r} for r in records]}]}
    payload = produce_payload(body)
    got = unpack_produce_views(payload, min_bin=min_bin)
    want = msgpack.unpackb(bytes(payload), raw=False, strict_map_key=False, use_list=True)
    if got is None:  # only for what the reader leaves to msgpack: float map keys, bytes keys...
        assert any(type(k) not in (str, int) for k in _all_keys(want))
        return
    assert same(got, want)
    for v in views_in(got):
        assert v.obj is payload and not v.readonly and len(v) >= min_bin


def _all_keys(obj: Any) -> list:
    if type(obj) is dict:
        return [*obj.keys(), *(k for v in obj.values() for k in _all_keys(v))]
    if type(obj) is list:
        return [k for x in obj for k in _all_keys(x)]
    return []


@settings(max_examples=300, deadline=None)
@given(tail=st.binary(max_size=60))
def test_garbage_is_none_or_as_msgpack(tail):
    payload = bytearray(b"\x95\x00" + tail)
    got = unpack_produce_views(payload, min_bin=0)
    if got is not None:
        want = msgpack.unpackb(bytes(payload), raw=False, strict_map_key=False, use_list=True)
        assert same(got, want)


def test_every_truncation_is_left_to_msgpack():
    payload = produce_payload({"acks": -1, "topics": [{"name": "t", "records": b"r" * 300}]})
    for n in range(len(payload)):
        assert unpack_produce_views(payload[:n], min_bin=0) is None, n
    assert unpack_produce_views(payload + b"\x00", min_bin=0) is None  # trailing bytes


def test_other_apis_types_and_shapes_are_left_to_msgpack():
    ok = {"acks": 1}
    assert unpack_produce_views(produce_payload(ok)) is not None
    assert unpack_produce_views(produce_payload(ok, api_key=1)) is None  # Fetch: msgpack
    for body in (
        {"x": msgpack.ExtType(5, b"abc")},
        {b"bytes-key": 1},
        {1.5: 1},
        {"deep": _nest(MAX_DEPTH + 2)},
    ):
        assert unpack_produce_views(produce_payload(body)) is None, body
    bad_utf8 = produce_payload({"s": "x"})
    bad_utf8[bad_utf8.index(b"\xa1x") + 1] = 0xFF
    assert unpack_produce_views(bad_utf8) is None
    huge = bytearray(b"\x95\x00\xdd\xff\xff\xff\xff")  # array32 of 4 G items in 7 bytes
    assert unpack_produce_views(huge) is None


def _nest(n: int) -> Any:
    v: Any = 0
    for _ in range(n):
        v = [v]
    return v


def test_decode_request_uses_views_only_for_large_bytearray_produce_frames():
    big = b"B" * ZERO_COPY_MIN_BYTES
    body = {"acks": -1, "topics": [{"name": "t", "partitions": [{"partition": 0, "records": big}]}]}
    payload = produce_payload(body)
    records = decode_request(payload)[4]["topics"][0]["partitions"][0]["records"]
    assert type(records) is memoryview and records.obj is payload and records == big
    records = decode_request(bytes(payload))[4]["topics"][0]["partitions"][0]["records"]
    assert type(records) is bytes  # bytes payloads: msgpack, as before
    small = produce_payload({"acks": -1, "topics": []})
    assert decode_request(small)[4] == {"acks": -1, "topics": []}


def test_many_small_bins_before_a_large_one_are_left_to_msgpack():
    from client.protocol.views import SMALL_BINS_FIRST

    small = [{"partition": p, "records": b"s" * 200} for p in range(SMALL_BINS_FIRST)]
    large = [{"partition": 999, "records": b"L" * (1 << 16)}]
    # one producer spreading records over thousands of partitions: msgpack decodes it
    payload = produce_payload({"topics": [{"name": "t", "partitions": small + large}]})
    assert unpack_produce_views(payload) is None
    api_key, _v, _c, _cid, body = decode_request(payload)
    assert api_key == 0 and len(body["topics"][0]["partitions"]) == SMALL_BINS_FIRST + 1
    # a large bin first: views as before, whatever follows
    payload = produce_payload({"topics": [{"name": "t", "partitions": large + small}]})
    got = unpack_produce_views(payload)
    assert got is not None and len(views_in(got)) == 1
