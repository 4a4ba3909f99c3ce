"""mTLS and SASL_PLAINTEXT on the Kafka listener, end to end with confluent-kafka (librdkafka)
and kafka-python: a broker of its own (ssl.client.auth is a broker-wide key) with a KAFKA
listener mapped to SSL that requires client certificates (KMTLS) and one mapped to
SASL_PLAINTEXT (KSASLP, SCRAM-SHA-256 and -512). A client with a certificate from the broker's
CA produces and consumes as User:CN=...; one without a certificate, or with one from another
CA, gets nothing; SCRAM users produce and consume over plaintext SASL, a wrong password is
SASL_AUTHENTICATION_FAILED, and PLAIN (a clear-text password) is refused on a listener
without TLS."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from helpers import wait_until
from tls_certs import Issued, Pki

from client import Admin

ck = pytest.importorskip("confluent_kafka")
AdminClient = pytest.importorskip("confluent_kafka.admin").AdminClient

USER, PASSWORD = "dave", "dave-secret-7021"
USER512, PASSWORD512 = "erin", "erin-secret-3111"


@dataclass
class SecureBroker:
    server: Any  # broker.server.BrokerServer
    ca: str
    client: Issued  # a client certificate from the broker's CA

    def _port(self, name: str) -> int:
        return next(e.port for e in self.server.listeners.bind if e.name == name)

    def address(self, name: str) -> str:
        return f"localhost:{self._port(name)}"

    def principals(self, listener: str) -> set[str]:
        return {
            c.principal
            for proc in self.server.socket_server.processors
            for c in proc.connections
            if c.listener == listener
        }


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    from helpers import broker_config

    from broker.server import BrokerServer

    d = tmp_path_factory.mktemp("kafka-mtls")
    pki = Pki(d / "pki")
    cert = pki.issue("broker-1", hosts=("localhost", "127.0.0.1"))
    cfg = broker_config(
        d / "data",
        listeners="GREGOR://127.0.0.1:0,KMTLS://127.0.0.1:0,KSASLP://127.0.0.1:0",
        advertised_listeners="GREGOR://127.0.0.1:0,KMTLS://localhost:0,KSASLP://localhost:0",
        **{
            "listener.protocol.map": "KMTLS:KAFKA,KSASLP:KAFKA",
            "listener.security.protocol.map": "GREGOR:PLAINTEXT,KMTLS:SSL,KSASLP:SASL_PLAINTEXT",
            "ssl.certfile": cert.cert,
            "ssl.keyfile": cert.key,
            "ssl.cafile": pki.ca,
            "ssl.client.auth": "required",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
            "connection.failed.authentication.delay.ms": 100,
        },
    )
    server = BrokerServer(cfg)
    host, port = server.start()
    try:
        with Admin(bootstrap_servers=f"{host}:{port}") as admin:
            admin.create_user(USER, PASSWORD, mechanism="SCRAM-SHA-256")
            admin.create_user(USER512, PASSWORD512, mechanism="SCRAM-SHA-512")
            admin.create_topic("mtls", partitions=1)
            admin.create_topic("saslp", partitions=1)
        yield SecureBroker(server, pki.ca, pki.issue("app-1", hosts=()))
    finally:
        server.shutdown(timeout=10.0)


def _produce(conf: dict, topic: str, values: list[bytes]) -> None:
    errors: list = []
    p = ck.Producer({**conf, "enable.idempotence": True, "linger.ms": 5})
    for v in values:
        p.produce(topic, value=v, partition=0, on_delivery=lambda err, _m: errors.append(err))
    assert p.flush(30) == 0
    assert errors == [None] * len(values)


def _consume(conf: dict, topic: str, n: int, start: int = 0) -> list[tuple[int, bytes]]:
    c = ck.Consumer({**conf, "group.id": "unused", "enable.auto.commit": False})
    got: list = []
    try:
        c.assign([ck.TopicPartition(topic, 0, start)])

        def more() -> bool:
            for m in c.consume(n - len(got), timeout=0.5):
                assert m.error() is None, m.error()
                got.append((m.offset(), m.value()))
            return len(got) >= n

        wait_until(more, 30, f"{n} messages")
        return got
    finally:
        c.close()


def _mtls_conf(b: SecureBroker, cert: Issued | None) -> dict:
    conf = {
        "bootstrap.servers": b.address("KMTLS"),
        "security.protocol": "SSL",
        "ssl.ca.location": b.ca,
    }
    if cert is not None:
        conf |= {"ssl.certificate.location": cert.cert, "ssl.key.location": cert.key}
    return conf


def _refused(conf: dict) -> list:
    """An admin client that must not get metadata: the errors it reports."""
    errors: list = []
    a = AdminClient({**conf, "error_cb": errors.append})
    with pytest.raises(ck.KafkaException):
        a.list_topics(timeout=2)
    wait_until(lambda: a.poll(0.2) is not None and errors, 10, "an error callback")
    return errors


def test_confluent_kafka_over_mtls(secure_broker: SecureBroker) -> None:
    conf = _mtls_conf(secure_broker, secure_broker.client)
    values = [b"m%d" % i for i in range(25)]
    _produce(conf, "mtls", values)
    assert _consume(conf, "mtls", 25) == list(enumerate(values))


def test_mtls_principal_is_the_certificate_subject(secure_broker: SecureBroker) -> None:
    a = AdminClient(_mtls_conf(secure_broker, secure_broker.client))
    want = {f"User:{secure_broker.client.subject}"}

    def seen() -> bool:
        # librdkafka may close its bootstrap connection after the first Metadata and open the
        # broker's own one lazily: ask again until a connection is open while we look
        assert "mtls" in a.list_topics(timeout=30).topics
        got = secure_broker.principals("KMTLS")
        assert got <= want, got  # any open connection carries the certificate's subject
        return got == want

    wait_until(seen, 30, "an open mTLS connection")


def test_mtls_refuses_a_client_without_a_certificate(secure_broker: SecureBroker) -> None:
    errors = _refused(_mtls_conf(secure_broker, None))
    assert all(
        e.code() in (ck.KafkaError._SSL, ck.KafkaError._TRANSPORT, ck.KafkaError._ALL_BROKERS_DOWN)
        for e in errors
    ), errors


def test_mtls_refuses_a_certificate_from_another_ca(secure_broker: SecureBroker, tmp_path) -> None:
    other = Pki(tmp_path / "other", name="Someone else's CA").issue("mallory", hosts=())
    errors = _refused(_mtls_conf(secure_broker, other))
    assert all(
        e.code() in (ck.KafkaError._SSL, ck.KafkaError._TRANSPORT, ck.KafkaError._ALL_BROKERS_DOWN)
        for e in errors
    ), errors


def _saslp_conf(b: SecureBroker, mechanism: str, user: str, password: str) -> dict:
    return {
        "bootstrap.servers": b.address("KSASLP"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


@pytest.mark.parametrize(
    "mechanism,user,password",
    [("SCRAM-SHA-256", USER, PASSWORD), ("SCRAM-SHA-512", USER512, PASSWORD512)],
)
def test_confluent_kafka_over_sasl_plaintext(
    secure_broker: SecureBroker, mechanism: str, user: str, password: str
) -> None:
    conf = _saslp_conf(secure_broker, mechanism, user, password)
    c = ck.Consumer({**conf, "group.id": "unused"})
    try:
        _, start = c.get_watermark_offsets(ck.TopicPartition("saslp", 0), timeout=30)
        # the consumer's connection is open: the broker knows it as the SCRAM user
        assert f"User:{user}" in secure_broker.principals("KSASLP")
    finally:
        c.close()
    values = [b"%s-%d" % (user.encode(), i) for i in range(20)]
    _produce(conf, "saslp", values)
    got = _consume(conf, "saslp", 20, start)
    assert got == [(start + i, v) for i, v in enumerate(values)]


def test_sasl_plaintext_wrong_password_is_refused(secure_broker: SecureBroker) -> None:
    errors = _refused(_saslp_conf(secure_broker, "SCRAM-SHA-256", USER, "not-the-password"))
    assert any(e.code() == ck.KafkaError._AUTHENTICATION for e in errors), errors
    assert any("invalid credentials with SASL mechanism SCRAM-SHA-256" in e.str()
               for e in errors), [e.str() for e in errors]  # fmt: skip


def test_sasl_plaintext_refuses_plain_without_tls(secure_broker: SecureBroker) -> None:
    """PLAIN sends the password itself: Gregor serves it over TLS only (docs/security.md)."""
    errors = _refused(_saslp_conf(secure_broker, "PLAIN", USER, PASSWORD))
    assert any(e.code() == ck.KafkaError._AUTHENTICATION for e in errors), errors


def test_kafka_python_over_sasl_plaintext_with_scram(secure_broker: SecureBroker) -> None:
    kafka = pytest.importorskip("kafka")
    conf = {
        "bootstrap_servers": secure_broker.address("KSASLP"),
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": USER,
        "sasl_plain_password": PASSWORD,
    }
    p = kafka.KafkaProducer(**conf)
    try:
        meta = p.send("saslp", value=b"kafka-python", partition=0).get(timeout=30)
    finally:
        p.close()
    c = kafka.KafkaConsumer(**conf, enable_auto_commit=False)
    try:
        tp = kafka.TopicPartition("saslp", 0)
        c.assign([tp])
        c.seek(tp, meta.offset)
        got: list = []
        wait_until(
            lambda: got.extend(r for rs in c.poll(500).values() for r in rs) or got, 30, "a record"
        )
        assert (got[0].offset, got[0].value) == (meta.offset, b"kafka-python")
    finally:
        c.close()
