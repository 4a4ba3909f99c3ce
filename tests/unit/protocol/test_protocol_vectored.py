"""encode_request_parts: the frame of encode_request as buffers for `transport.writelines`,
byte for byte the same, with large bins and BinParts referenced instead of copied."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import msgpack_values

from client.protocol import (
    VECTORED_MIN_BYTES,
    ApiKey,
    BinParts,
    decode_request,
    encode_request,
    encode_request_parts,
)
from client.protocol.framing import LENGTH


def joined(parts) -> bytes:
    return b"".join(bytes(p) for p in parts)


@settings(max_examples=300, deadline=None)
@given(
    body=st.dictionaries(st.text(max_size=8), msgpack_values, max_size=5),
    client_id=st.none() | st.text(max_size=10),
    min_bytes=st.integers(0, 12),
)
def test_parts_concatenate_to_encode_request(body, client_id, min_bytes):
    parts = encode_request_parts(0, 3, 77, client_id, body, min_bytes=min_bytes)
    assert joined(parts) == encode_request(0, 3, 77, client_id, body)


@settings(max_examples=100, deadline=None)
@given(
    chunks=st.lists(st.binary(max_size=300), max_size=5),
    extra=st.dictionaries(st.text(max_size=5), msgpack_values, max_size=3),
)
def test_binparts_is_one_bin_of_the_concatenation(chunks, extra):
    body = {**extra, "records": BinParts(chunks)}
    flat = {**extra, "records": b"".join(chunks)}
    frame = joined(encode_request_parts(0, 9, 1, "c", body))
    assert frame == encode_request(0, 9, 1, "c", flat)
    assert decode_request(frame[4:])[4]["records"] == b"".join(chunks)


def test_every_bin_header_width():
    for n in (0, 1, 255, 256, 65535, 65536, 70000):
        data = bytes(range(256)) * (n // 256) + bytes(n % 256)
        body = {"a": BinParts([data[: n // 2], data[n // 2 :]]), "b": data}
        parts = encode_request_parts(2, 0, n, None, body, min_bytes=0)
        assert joined(parts) == encode_request(2, 0, n, None, {"a": data, "b": data}), n


def test_large_batches_are_referenced_not_copied():
    batches = [bytes([i]) * (300 << 10) for i in range(3)]
    one = b"\x07" * VECTORED_MIN_BYTES
    small = b"s" * (VECTORED_MIN_BYTES - 1)
    body = {
        "acks": -1,
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {"partition": 0, "records": BinParts(batches)},
                    {"partition": 1, "records": one},
                    {"partition": 2, "records": small},
                ],
            }
        ],
    }
    parts = encode_request_parts(ApiKey.PRODUCE, 0, 5, "p", body)
    owners = [memoryview(p).obj for p in parts]
    assert all(any(o is b for o in owners) for b in batches)  # the batches themselves
    assert any(p is one for p in parts)  # a large bin at the threshold: by reference
    assert not any(o is small for o in owners)  # below it: packed (copied) as usual
    frame = joined(parts)
    (size,) = LENGTH.unpack_from(frame)
    assert size == len(frame) - 4
    got = decode_request(frame[4:])[4]["topics"][0]["partitions"]
    assert [p["records"] for p in got] == [b"".join(batches), one, small]
