"""Security on the Kafka listener (issues 25 and 27): kcat and confluent-kafka (librdkafka)
produce and consume over a KAFKA listener mapped to SSL (KSSL), with a test CA and a server
certificate made with `cryptography` (tests/tls_certs.py), and Gregor's own client reads the
same records over its plaintext listener; confluent-kafka, kafka-python and aiokafka
authenticate with SCRAM-SHA-256 over SASL_SSL (KSASL) and kcat with PLAIN, and a wrong password
gets Kafka's SASL_AUTHENTICATION_FAILED. The suite's one broker (conftest.py) has these
listeners."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from helpers import wait_until
from tls_certs import Pki

from client import Consumer, TopicPartition

ck = pytest.importorskip("confluent_kafka")
AdminClient = pytest.importorskip("confluent_kafka.admin").AdminClient


def _gregor_values(bootstrap: str, topic: str, n: int) -> list[bytes]:
    got: list = []
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, 0)])
        c.seek_to_beginning()
        wait_until(lambda: got.extend(c.poll(0.5)) or len(got) >= n, 30, f"{n} records")
    return [r.value for r in got]


def _ck_consume(conf: dict, topic: str, n: int) -> list:
    c = ck.Consumer({**conf, "group.id": "unused", "enable.auto.commit": False})
    try:
        c.assign([ck.TopicPartition(topic, 0, 0)])
        got: list = []

        def more() -> bool:
            for m in c.consume(n - len(got), timeout=0.5):
                assert m.error() is None, m.error()
                got.append(m)
            return len(got) >= n

        wait_until(more, 30, f"{n} messages")
        return got
    finally:
        c.close()


def test_confluent_kafka_over_ssl(kafka_broker) -> None:
    conf = {
        "bootstrap.servers": kafka_broker.tls_address("KSSL"),
        "security.protocol": "SSL",
        "ssl.ca.location": kafka_broker.ca,
    }
    p = ck.Producer({**conf, "enable.idempotence": True, "linger.ms": 5})
    errors: list = []
    for i in range(40):
        p.produce("ssl-ck", value=b"v%d" % i, key=b"k%d" % i, partition=0,
                  on_delivery=lambda err, _msg: errors.append(err))  # fmt: skip
    assert p.flush(30) == 0
    assert errors == [None] * 40
    got = _ck_consume(conf, "ssl-ck", 40)
    assert [(m.offset(), m.key(), m.value()) for m in got] == [
        (i, b"k%d" % i, b"v%d" % i) for i in range(40)
    ]
    assert _gregor_values(kafka_broker.gregor, "ssl-ck", 40) == [b"v%d" % i for i in range(40)]


def test_confluent_kafka_refuses_a_broker_from_another_ca(kafka_broker, tmp_path) -> None:
    """The check is real: a client trusting another CA gets no metadata over the listener."""
    other = Pki(tmp_path / "other")
    errors: list = []
    a = AdminClient(
        {
            "bootstrap.servers": kafka_broker.tls_address("KSSL"),
            "security.protocol": "SSL",
            "ssl.ca.location": other.ca,
            "error_cb": errors.append,
        }
    )
    with pytest.raises(ck.KafkaException):
        a.list_topics(timeout=1)
    wait_until(lambda: a.poll(0.2) is not None and errors, 10, "an error callback")
    assert any("certificate verify failed" in e.str() for e in errors), [e.str() for e in errors]


def _kcat(kcat: str, *args: str, stdin: bytes = b"") -> str:
    out = subprocess.run([kcat, *args], input=stdin, capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    return out.stdout.decode()


def test_kcat_over_ssl(kafka_broker, kcat) -> None:
    ssl = ["-b", kafka_broker.tls_address("KSSL"), "-X", "security.protocol=SSL",
           "-X", f"ssl.ca.location={kafka_broker.ca}"]  # fmt: skip
    lines = b"".join(b"key-%d:value-%d\n" % (i, i) for i in range(25))
    _kcat(kcat, *ssl, "-P", "-t", "ssl-kcat", "-p", "0", "-K:", "-X", "enable.idempotence=true",
          stdin=lines)  # fmt: skip
    out = _kcat(kcat, *ssl, "-C", "-t", "ssl-kcat", "-o", "beginning", "-c", "25", "-J", "-e")
    theirs = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [(t["offset"], t["key"], t["payload"]) for t in theirs] == [
        (i, f"key-{i}", f"value-{i}") for i in range(25)
    ]
    assert _gregor_values(kafka_broker.gregor, "ssl-kcat", 25) == [
        b"value-%d" % i for i in range(25)
    ]


def _sasl_conf(b: Any, password: str) -> dict:
    return {
        "bootstrap.servers": b.tls_address("KSASL"),
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": b.ca,
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": b.sasl_user,
        "sasl.password": password,
    }


def test_confluent_kafka_over_sasl_ssl_with_scram(kafka_broker) -> None:
    conf = _sasl_conf(kafka_broker, kafka_broker.sasl_password)
    p = ck.Producer({**conf, "enable.idempotence": True, "linger.ms": 5})
    errors: list = []
    for i in range(30):
        p.produce("sasl-ck", value=b"s%d" % i, partition=0,
                  on_delivery=lambda err, _msg: errors.append(err))  # fmt: skip
    assert p.flush(30) == 0
    assert errors == [None] * 30
    # the producer's connections are still open: the broker knows them as carol's
    principals = {
        c.principal
        for proc in kafka_broker.handle.server.socket_server.processors
        for c in proc.connections
        if c.listener == "KSASL"
    }
    assert principals == {f"User:{kafka_broker.sasl_user}"}
    got = _ck_consume(conf, "sasl-ck", 30)
    assert [(m.offset(), m.value()) for m in got] == [(i, b"s%d" % i) for i in range(30)]


def test_a_wrong_password_is_refused_with_sasl_authentication_failed(kafka_broker) -> None:
    errors: list = []
    a = AdminClient({**_sasl_conf(kafka_broker, "not-the-password"), "error_cb": errors.append})
    with pytest.raises(ck.KafkaException):
        a.list_topics(timeout=1)
    wait_until(lambda: a.poll(0.2) is not None and errors, 10, "an error callback")
    assert any(e.code() == ck.KafkaError._AUTHENTICATION for e in errors), errors
    # the broker's own SASL_AUTHENTICATION_FAILED answer reached the client (not a mere close)
    assert any("invalid credentials with SASL mechanism SCRAM-SHA-256" in e.str()
               for e in errors), [e.str() for e in errors]  # fmt: skip


def test_kcat_over_sasl_ssl_with_plain(kafka_broker, kcat) -> None:
    """Debian's kcat (librdkafka 2.0.2) authenticates with PLAIN over TLS. Its SCRAM is refused,
    as by Kafka 4: librdkafka before 2.6.1 sends the client nonce twice in client-final
    (librdkafka#4895), which RFC 5802's nonce check rejects (docs/kafka-compat.md)."""
    address = kafka_broker.tls_address("KSASL")
    sasl = ["-b", address, "-X", "security.protocol=SASL_SSL",
            "-X", f"ssl.ca.location={kafka_broker.ca}", "-X", "sasl.mechanism=PLAIN",
            "-X", f"sasl.username={kafka_broker.sasl_user}",
            "-X", f"sasl.password={kafka_broker.sasl_password}"]  # fmt: skip
    _kcat(kcat, *sasl, "-P", "-t", "sasl-kcat", "-p", "0", stdin=b"a\nb\n")
    out = _kcat(kcat, *sasl, "-C", "-t", "sasl-kcat", "-o", "beginning", "-c", "2", "-e")
    assert out.splitlines() == ["a", "b"]
    md = json.loads(_kcat(kcat, *sasl, "-L", "-J"))
    assert [b["name"] for b in md["brokers"]] == [address]


class _Wire:
    """Kafka requests (kio entities, non-flexible versions) over one TLS connection."""

    def __init__(self, address: str, ca: str) -> None:
        import socket
        import ssl

        host, port = address.rsplit(":", 1)
        ctx = ssl.create_default_context(cafile=ca)
        self.sock = ctx.wrap_socket(
            socket.create_connection((host, int(port)), timeout=10), server_hostname=host
        )
        self.corr = 0

    def send(self, api_key: int, version: int, entity: Any) -> None:
        import io
        import struct

        from kio.schema.request_header.v1.header import RequestHeader
        from kio.serial import entity_writer
        from kio.static.primitive import i16, i32

        self.corr += 1
        buf = io.BytesIO()
        entity_writer(RequestHeader)(
            buf,
            RequestHeader(
                request_api_key=i16(api_key),
                request_api_version=i16(version),
                correlation_id=i32(self.corr),
                client_id="raw",
            ),
        )
        entity_writer(type(entity))(buf, entity)
        self.sock.sendall(struct.pack(">i", len(buf.getvalue())) + buf.getvalue())

    def recv(self, api_key: int, version: int) -> Any:
        """The answer's body, or None when the broker closed the connection instead."""
        import struct

        from kio.index import load_response_schema
        from kio.serial import entity_reader

        head = self._exactly(4)
        payload = None if head is None else self._exactly(struct.unpack(">i", head)[0])
        if payload is None:
            return None
        assert struct.unpack_from(">i", payload)[0] == self.corr
        return entity_reader(load_response_schema(api_key, version))(memoryview(payload), 4)[0]

    def _exactly(self, n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data


def test_sasl_on_the_wire(kafka_broker) -> None:
    """Kafka's codes, byte for byte: an unoffered mechanism is UNSUPPORTED_SASL_MECHANISM (33)
    with the list; a wrong SCRAM proof SASL_AUTHENTICATION_FAILED (58), then the connection is
    closed; any other API before authentication, or SaslHandshake v0, closes the connection
    unanswered."""
    from kio.schema.metadata.v1.request import MetadataRequest
    from kio.schema.sasl_authenticate.v0.request import SaslAuthenticateRequest
    from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as SaslHandshakeRequestV0
    from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

    from client.security.scram import ScramClient

    w = _Wire(kafka_broker.tls_address("KSASL"), kafka_broker.ca)
    w.send(17, 1, SaslHandshakeRequest(mechanism="GSSAPI"))  # not a Gregor mechanism
    answer = w.recv(17, 1)
    assert (answer.error_code, answer.mechanisms) == (33, ("SCRAM-SHA-256", "PLAIN"))
    w.send(17, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-256"))
    assert w.recv(17, 1).error_code == 0
    scram = ScramClient("SCRAM-SHA-256", kafka_broker.sasl_user, "not-the-password")
    w.send(36, 0, SaslAuthenticateRequest(auth_bytes=scram.first()))
    first = w.recv(36, 0)
    assert first.error_code == 0, first
    w.send(36, 0, SaslAuthenticateRequest(auth_bytes=scram.final(bytes(first.auth_bytes))))
    refused = w.recv(36, 0)
    assert refused.error_code == 58, refused  # SASL_AUTHENTICATION_FAILED
    assert w.recv(36, 0) is None  # then closed

    w = _Wire(kafka_broker.tls_address("KSASL"), kafka_broker.ca)
    w.send(3, 1, MetadataRequest(topics=None))
    assert w.recv(3, 1) is None  # not authenticated: closed, nothing answered

    # v0 is advertised (librdkafka 2.0 wants to see it) but refused: closed, nothing answered
    w = _Wire(kafka_broker.tls_address("KSASL"), kafka_broker.ca)
    w.send(17, 0, SaslHandshakeRequestV0(mechanism="SCRAM-SHA-256"))
    assert w.recv(17, 0) is None


def test_kafka_python_and_aiokafka_over_sasl_ssl_with_scram(kafka_broker) -> None:
    """The two pure-Python clients (each its own SCRAM and protocol code) authenticate with
    SCRAM-SHA-256 over SASL_SSL, one producing and the other reading back."""
    import asyncio
    import ssl

    kafka = pytest.importorskip("kafka")
    aiokafka = pytest.importorskip("aiokafka")
    common = {
        "bootstrap_servers": kafka_broker.tls_address("KSASL"),
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": kafka_broker.sasl_user,
        "sasl_plain_password": kafka_broker.sasl_password,
    }
    p = kafka.KafkaProducer(**common, ssl_cafile=kafka_broker.ca)
    try:
        for i in range(5):
            p.send("sasl-py", b"py-%d" % i, partition=0).get(timeout=30)
    finally:
        p.close()

    async def read() -> list[bytes]:
        c = aiokafka.AIOKafkaConsumer(
            "sasl-py",
            **common,
            ssl_context=ssl.create_default_context(cafile=kafka_broker.ca),
            auto_offset_reset="earliest",
        )
        await c.start()
        try:
            got: list[bytes] = []
            async with asyncio.timeout(30):
                while len(got) < 5:
                    for batch in (await c.getmany(timeout_ms=500)).values():
                        got.extend(m.value for m in batch)
            return got
        finally:
            await c.stop()

    assert asyncio.run(read()) == [b"py-%d" % i for i in range(5)]
