"""FrameDecoder: frames split at every byte boundary reassemble; oversized prefixes are refused
before allocation; garbage payloads raise only MalformedFrameError / InvalidRequestError."""

from __future__ import annotations

import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client.errors import InvalidRequestError
from client.protocol import (
    FrameDecoder,
    FrameTooLargeError,
    MalformedFrameError,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from client.protocol.framing import LENGTH


def _frames() -> tuple[bytes, list[bytes]]:
    reqs = [
        encode_request(0, 0, 1, "c", {"acks": -1, "topics": []}),
        encode_request(1, 0, 2, None, {"topics": [{"name": "t", "partitions": []}]}),
        encode_response(3, {"error_code": 0, "records": b"\x00" * 40}),
    ]
    return b"".join(reqs), [r[4:] for r in reqs]


def test_split_at_every_byte_boundary() -> None:
    stream, payloads = _frames()
    for cut in range(len(stream) + 1):
        dec = FrameDecoder()
        out = dec.feed(stream[:cut]) + dec.feed(stream[cut:])
        assert out == payloads, cut
        assert dec.buffered == 0


def test_byte_at_a_time() -> None:
    stream, payloads = _frames()
    dec = FrameDecoder()
    out: list[bytes] = []
    for i in range(len(stream)):
        out += dec.feed(stream[i : i + 1])
    assert out == payloads


@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(0, 200), max_size=6))
def test_split_at_random_boundaries(cuts: list[int]) -> None:
    stream, payloads = _frames()
    points = sorted({min(c, len(stream)) for c in cuts})
    dec = FrameDecoder()
    out: list[bytes] = []
    prev = 0
    for p in [*points, len(stream)]:
        out += dec.feed(stream[prev:p])
        prev = p
    assert out == payloads


def test_oversized_prefix_refused_without_allocating() -> None:
    dec = FrameDecoder(max_frame_bytes=1024)
    tracemalloc.start()
    try:
        with pytest.raises(FrameTooLargeError, match="exceeds"):
            dec.feed(LENGTH.pack(2**32 - 1) + b"abc")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024, peak
    assert dec.buffered < 16


def test_prefix_at_the_limit_is_accepted() -> None:
    dec = FrameDecoder(max_frame_bytes=8)
    assert dec.feed(LENGTH.pack(8) + b"12345678") == [b"12345678"]
    with pytest.raises(FrameTooLargeError):
        dec.feed(LENGTH.pack(9))


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=200))
def test_garbage_payloads_raise_only_malformed(data: bytes) -> None:
    for decode in (decode_request, decode_response):
        try:
            decoded = decode(data)
        except MalformedFrameError:
            continue
        # what is accepted has the documented shape: integer header fields, a map body
        *header, body = decoded
        assert isinstance(body, dict)
        assert type(header[0]) is int


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=300))
def test_garbage_streams_raise_only_invalid_request(data: bytes) -> None:
    dec = FrameDecoder(max_frame_bytes=4096)
    try:
        payloads = dec.feed(data)
    except InvalidRequestError:
        return
    # whole frames only, each as long as its length prefix said, never past the limit
    assert sum(LENGTH.size + len(p) for p in payloads) <= len(data)
    assert all(len(p) <= 4096 for p in payloads)
    for payload in payloads:
        try:
            api_key, api_version, correlation_id, _client_id, body = decode_request(payload)
        except MalformedFrameError:
            continue
        assert isinstance(body, dict)
        assert all(type(v) is int for v in (api_key, api_version, correlation_id))
