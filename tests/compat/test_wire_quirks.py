"""Kafka's protocol quirks on the Kafka listener, byte for byte over a raw socket (requests
encoded with kio, Kafka's own message definitions): ApiVersions answers an unknown version with
a v0 response carrying UNSUPPORTED_VERSION and the table; Produce v0-2 is advertised but
refused, as Kafka 4 does; both listeners serve the same log at once."""

from __future__ import annotations

import io
import socket
import struct

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
