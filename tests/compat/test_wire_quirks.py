"""Kafka's protocol quirks on the Kafka listener, byte for byte over a raw socket (requests
encoded with kio, Kafka's own message definitions): ApiVersions answers an unknown version with
a v0 response carrying UNSUPPORTED_VERSION and the table; Produce v0-2 is advertised but
refused, as Kafka 4 does; both listeners serve the same log at once."""

from __future__ import annotations

import io
import socket
import struct
from dataclasses import replace

from kio.schema.api_versions.v0.response import ApiVersionsResponse as V0Response
from kio.schema.request_header.v1.header import RequestHeader
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from client import Producer


def _frame(api_key: int, version: int, body: bytes = b"", corr: int = 7) -> bytes:
    buf = io.BytesIO()
    header = RequestHeader(
        request_api_key=i16(api_key),
        request_api_version=i16(version),
        correlation_id=i32(corr),
        client_id="raw",
    )
    entity_writer(RequestHeader)(buf, header)
    payload = buf.getvalue() + body
    return struct.pack(">i", len(payload)) + payload


def _recv_frame(sock: socket.socket) -> bytes | None:
    def exactly(n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    head = exactly(4)
    return None if head is None else exactly(struct.unpack(">i", head)[0])


def _connect(address: str) -> socket.socket:
    host, port = address.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=10)


def test_api_versions_unknown_version_gets_v0_error_and_table(kafka_broker) -> None:
    with _connect(kafka_broker.kafka) as s:
        # a future ApiVersions version: its body is unknown, so send none
        s.sendall(_frame(18, 99))
        answer = _recv_frame(s)
        assert answer is not None
        assert struct.unpack_from(">i", answer)[0] == 7  # correlation id, header v0
        body, _ = entity_reader(V0Response)(memoryview(answer), 4)
    assert body.error_code == 35  # UNSUPPORTED_VERSION
    table = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in body.api_keys}
    assert table[18] == (0, 3)
    assert table[0] == (0, 9)  # Produce v0-2 advertised ...


def test_produce_v2_is_refused(kafka_broker) -> None:
    with _connect(kafka_broker.kafka) as s:
        s.sendall(_frame(0, 2, b"\xff\xff\xff\xff\x00\x01\x00\x00\x75\x30\x00\x00\x00\x00"))
        assert _recv_frame(s) is None  # ... and refused: the connection is closed


def test_native_and_kafka_listener_serve_one_log(kafka_broker) -> None:
    ck = __import__("pytest").importorskip("confluent_kafka")
    with Producer(bootstrap_servers=kafka_broker.gregor, linger_ms=0) as p:
        assert p.send("shared", b"native", partition=0).result(30).offset == 0
    kp = ck.Producer({"bootstrap.servers": kafka_broker.kafka, "enable.idempotence": True})
    offsets: list = []
    kp.produce("shared", b"kafka", partition=0, on_delivery=lambda e, m: offsets.append(m.offset()))
    assert kp.flush(30) == 0
    assert offsets == [1]  # appended after the native record, in the same log


def _request(address: str, api_key: int, version: int, entity) -> object:
    from kio.index import load_response_schema

    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    header = RequestHeader if not type(entity).__flexible__ else None
    with _connect(address) as s:
        if header is None:
            from kio.schema.request_header.v2.header import RequestHeader as H2

            hb = io.BytesIO()
            entity_writer(H2)(hb, H2(request_api_key=i16(api_key), request_api_version=i16(version),
                                     correlation_id=i32(9), client_id="raw"))  # fmt: skip
            payload = hb.getvalue() + buf.getvalue()
            s.sendall(struct.pack(">i", len(payload)) + payload)
        else:
            s.sendall(_frame(api_key, version, buf.getvalue(), corr=9))
        answer = _recv_frame(s)
    assert answer is not None
    cls = load_response_schema(api_key, version)
    offset = 5 if cls.__flexible__ else 4  # correlation id (+ empty tagged fields)
    return entity_reader(cls)(memoryview(answer), offset)[0]


def test_classic_and_kip848_groups_cannot_share_a_name(kafka_broker) -> None:
    import datetime

    from kio.schema.consumer_group_heartbeat.v0 import request as cgh
    from kio.schema.join_group.v5 import request as jg

    from client import Admin
    from client import Consumer as GregorConsumer

    with Admin(bootstrap_servers=kafka_broker.gregor) as admin:
        admin.create_topic("mixed", partitions=1)
    # a Gregor (KIP-848) member in group "g-native": a classic JoinGroup is refused
    with GregorConsumer(bootstrap_servers=kafka_broker.gregor, group_id="g-native") as g:
        g.subscribe(["mixed"])
        from helpers import wait_until

        wait_until(lambda: g.poll(0.1) == [] and g.assignment(), 30, "a native member")
        join = jg.JoinGroupRequest(
            group_id="g-native", session_timeout=datetime.timedelta(seconds=10),
            rebalance_timeout=datetime.timedelta(seconds=10), member_id="",
            group_instance_id=None, protocol_type="consumer",
            protocols=(jg.JoinGroupRequestProtocol(name="range", metadata=b""),),
        )  # fmt: skip
        answer = _request(kafka_broker.kafka, 11, 5, join)
        assert answer.error_code == 23  # INCONSISTENT_GROUP_PROTOCOL
    # a classic member in "g-classic": a ConsumerGroupHeartbeat is refused
    join = jg.JoinGroupRequest(
        group_id="g-classic", session_timeout=datetime.timedelta(seconds=10),
        rebalance_timeout=datetime.timedelta(seconds=10), member_id="",
        group_instance_id=None, protocol_type="consumer",
        protocols=(jg.JoinGroupRequestProtocol(name="range", metadata=b""),),
    )  # fmt: skip
    first = _request(kafka_broker.kafka, 11, 5, join)
    assert first.error_code == 79  # MEMBER_ID_REQUIRED, with the id to join with
    joined = _request(kafka_broker.kafka, 11, 5, replace(join, member_id=first.member_id))
    assert joined.error_code == 0 and joined.leader == first.member_id
    beat = cgh.ConsumerGroupHeartbeatRequest(
        group_id="g-classic", member_id="", member_epoch=i32(0), instance_id=None,
        rack_id=None, rebalance_timeout=datetime.timedelta(seconds=10),
        subscribed_topic_names=("mixed",), server_assignor=None, topic_partitions=(),
    )  # fmt: skip
    answer = _request(kafka_broker.kafka, 68, 0, beat)
    assert answer.error_code == 69  # GROUP_ID_NOT_FOUND


def test_bad_input_closes_the_connection_and_the_broker_keeps_serving(kafka_broker) -> None:
    for frame in (
        _frame(1234, 0),  # an API key nobody serves
        _frame(3, 99),  # Metadata at a version not served
        struct.pack(">i", 3) + b"\x00\x03\x00",  # shorter than a request header
        _frame(3, 12, b"\xff" * 7),  # a body that does not parse
    ):
        with _connect(kafka_broker.kafka) as s:
            s.sendall(frame)
            assert _recv_frame(s) is None, frame
    with _connect(kafka_broker.kafka) as s:  # and the next client is served
        s.sendall(_frame(18, 0))
        answer = _recv_frame(s)
        assert answer is not None
        assert entity_reader(V0Response)(memoryview(answer), 4)[0].error_code == 0


def test_bytes_after_a_request_body_are_ignored_as_kafka_does(kafka_broker) -> None:
    """librdkafka 2.16's AdminClient.list_topics sends this Metadata v12 (all topics) with three
    bytes after the body; Kafka's readers stop at the body's end, and so does the listener."""
    from kio.index import load_response_schema

    wire = bytes.fromhex("0003000c00000003000772646b61666b610000000000010000")
    with _connect(kafka_broker.kafka) as s:
        s.sendall(struct.pack(">i", len(wire)) + wire)
        answer = _recv_frame(s)
    assert answer is not None and answer[:4] == struct.pack(">i", 3)
    body = entity_reader(load_response_schema(3, 12))(memoryview(answer), 5)[0]
    assert body.brokers and body.brokers[0].host == "localhost"
