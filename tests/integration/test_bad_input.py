"""Hostile and broken input on real sockets. After each case a fresh connection must still get a
normal ApiVersions answer: the broker neither dies nor wedges."""

from __future__ import annotations

import logging
import socket
import struct

import msgpack
import pytest
from helpers import RawClient, api_versions_ok, wait_until

from broker.handlers import HANDLERS
from client.errors import ErrorCode
from client.protocol.framing import encode_request
from client.protocol.schema import API_SPECS, INT32, ApiSpec, Array, Field, Struct

LOGGER = "broker"


def _payload_frame(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


@pytest.fixture
def small_broker(broker_factory):
    return broker_factory(socket_request_max_bytes=64 * 1024)


def test_garbage_bytes_close_the_connection(small_broker, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        with RawClient(small_broker.address) as c:
            # A "length" of 0x47455420 ("GET ") is far above 64 KiB: refused at the prefix.
            c.send_raw(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            assert c.closed_by_peer(5.0)
    assert "socket.request.max.bytes" in caplog.text
    api_versions_ok(small_broker.address)


def test_four_gib_length_prefix_refused_without_buffering(small_broker, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        with RawClient(small_broker.address) as c:
            c.send_raw(b"\xff\xff\xff\xff")  # 4 GiB - 1: only the 4 prefix bytes are ever sent
            assert c.closed_by_peer(5.0)
    assert "4294967295" in caplog.text
    api_versions_ok(small_broker.address)


def test_prefix_just_above_the_limit_refused(small_broker) -> None:
    with RawClient(small_broker.address) as c:
        c.send_raw(struct.pack(">I", 64 * 1024 + 1) + b"\x00" * 100)
        assert c.closed_by_peer(5.0)
    with RawClient(small_broker.address) as c:
        # Exactly at the limit is allowed (and then malformed: not msgpack → closed).
        c.send_raw(struct.pack(">I", 64 * 1024) + b"\xc1" * (64 * 1024))
        assert c.closed_by_peer(5.0)
    api_versions_ok(small_broker.address)


def test_truncated_frame_then_client_goes_away(small_broker) -> None:
    frame = encode_request(18, 0, 1, "t", {})
    for cut in (1, 3, 4, len(frame) - 1):
        with RawClient(small_broker.address) as c:
            c.send_raw(frame[:cut])
        api_versions_ok(small_broker.address)
    wait_until(
        lambda: small_broker.server.socket_server.connection_count == 0, 5, "connections released"
    )


def test_truncated_frame_completed_later_is_answered(small_broker) -> None:
    frame = encode_request(18, 0, 5, "t", {})
    with RawClient(small_broker.address) as c:
        for i in range(len(frame)):
            c.send_raw(frame[i : i + 1])  # one byte per segment
        assert c.recv()[0] == 5


@pytest.mark.parametrize(
    "payload",
    [
        b"",  # empty payload
        b"\xc1",  # never-used msgpack byte
        msgpack.packb([18, 0, 1]),  # too short
        msgpack.packb([18, 0, 1, "t", {}, 6]),  # too long
        msgpack.packb({"api_key": 18}),  # a map, not an array
        msgpack.packb(["18", 0, 1, "t", {}]),  # api key is a string
        msgpack.packb([18, 0, 1.5, "t", {}]),  # float correlation id
        msgpack.packb([18, 0, 1, 7, {}]),  # client id is an int
        msgpack.packb([18, 0, 1, "t", [1, 2]]),  # body is an array
        msgpack.packb([18, 0, 1, "t", {}]) + b"\x00",  # trailing byte inside the frame
    ],
    ids=lambda p: p[:12].hex() or "empty",
)
def test_malformed_header_closes(small_broker, payload: bytes, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        with RawClient(small_broker.address) as c:
            c.send_raw(_payload_frame(payload))
            assert c.closed_by_peer(5.0)
    assert "closing connection" in caplog.text
    api_versions_ok(small_broker.address)


def test_unknown_api_key_and_version_get_unsupported_version(small_broker) -> None:
    with RawClient(small_broker.address) as c:
        for corr, (key, version) in enumerate([(4242, 0), (-1, 0), (2**40, 3), (3, 77)]):
            c.send(key, version, corr, {})
            got_corr, body = c.recv()
            assert got_corr == corr
            assert body["error_code"] == ErrorCode.UNSUPPORTED_VERSION, body
        # The connection stays usable afterwards.
        assert c.request(18, 0, {}, correlation_id=50)["error_code"] == 0


def test_malformed_body_closes_and_logs(small_broker, monkeypatch, caplog) -> None:
    spec = ApiSpec(
        key=9_998,
        name="TestTyped",
        request=Struct(Field("items", Array(Struct(Field("n", INT32))))),
        response=Struct(Field("error_code", INT32, default=0)),
    )
    monkeypatch.setitem(API_SPECS, spec.key, spec)
    monkeypatch.setitem(HANDLERS, spec.key, lambda ctx, body: {})
    with RawClient(small_broker.address) as c:
        assert c.request(spec.key, 0, {"items": [{"n": 1}]})["error_code"] == 0
    bad_bodies = [{}, {"items": 3}, {"items": [{"n": "x"}]}, {"items": [{"n": 2**40}]}]
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for body in bad_bodies:
            with RawClient(small_broker.address) as c:
                c.send(spec.key, 0, 1, body)
                assert c.closed_by_peer(5.0), body
            api_versions_ok(small_broker.address)
    assert "malformed TestTyped v0 request: items[0].n" in caplog.text


def test_half_closed_client_still_gets_its_answer(small_broker) -> None:
    with RawClient(small_broker.address) as c:
        c.send(18, 0, 8, {})
        c.sock.shutdown(socket.SHUT_WR)
        assert c.recv()[0] == 8
        assert c.closed_by_peer(5.0)


def _produce_body(topic: str, records: bytes) -> dict:
    return {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 10_000,
        "topics": [{"name": topic, "partitions": [{"partition": 0, "records": records}]}],
    }


def test_large_produce_frames_read_in_place_good_and_bad(
    broker_server, caplog, monkeypatch
) -> None:
    """Produce frames of >= 1 MiB take the zero-copy path (client/protocol/views.py): a good
    one is stored whole, a corrupt batch gets CORRUPT_MESSAGE and appends nothing, and broken
    msgpack closes the connection with a logged reason while others are still served."""
    from client import Admin, Consumer, TopicPartition
    from client.protocol import framing
    from client.protocol.framing import ZERO_COPY_MIN_BYTES
    from client.records import build_batch

    viewed: list[bool] = []  # per large frame the broker decoded: views (True) or msgpack
    real = framing.unpack_produce_views

    def spy(payload, *args):
        out = real(payload, *args)
        viewed.append(out is not None)
        return out

    monkeypatch.setattr(framing, "unpack_produce_views", spy)

    with Admin(bootstrap_servers=broker_server.bootstrap) as admin:
        admin.create_topic("big")
    values = [b"%06d" % i + b"v" * 994 for i in range(1800)]
    good = b"".join(build_batch([(None, v) for v in values[i : i + 900]]) for i in (0, 900))
    assert len(good) > ZERO_COPY_MIN_BYTES
    bad = bytearray(good)
    bad[len(bad) // 2 + 100] ^= 0x01  # in the second batch, inside its CRC-covered bytes
    with RawClient(broker_server.address) as c:
        resp = c.request(0, 0, _produce_body("big", bytes(bad)))
        part = resp["topics"][0]["partitions"][0]
        assert part["error_code"] == ErrorCode.CORRUPT_MESSAGE, part
        resp = c.request(0, 0, _produce_body("big", good), correlation_id=2)
        part = resp["topics"][0]["partitions"][0]
        assert (part["error_code"], part["base_offset"]) == (0, 0), part
    frame = encode_request(0, 0, 3, "t", _produce_body("big", good))
    payload = frame[4:]
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for broken in (payload[:-10], payload + b"\x00"):  # bin past the end; trailing byte
            with RawClient(broker_server.address) as c:
                c.send_raw(_payload_frame(broken))
                assert c.closed_by_peer(5.0)
    assert "closing connection" in caplog.text
    assert viewed == [True, True, False, False]  # the broken frames went to msgpack
    api_versions_ok(broker_server.address)
    with Consumer(bootstrap_servers=broker_server.bootstrap) as consumer:
        consumer.assign([TopicPartition("big", 0)])
        got: list = []
        wait_until(lambda: got.extend(consumer.poll(timeout_ms=200)) or len(got) >= 1800, 20)
    assert [r.value for r in got] == values and [r.offset for r in got] == list(range(1800))
