"""Security on the Kafka listener (issues 25 and 27): kcat and confluent-kafka (librdkafka)
produce and consume over a KAFKA listener mapped to SSL (KSSL), with a test CA and a server
certificate made with `cryptography` (tests/tls_certs.py), and Gregor's own client reads the
same records over its plaintext listener; confluent-kafka authenticates with SCRAM-SHA-256
over SASL_SSL (KSASL), and a wrong password gets Kafka's SASL_AUTHENTICATION_FAILED. The
suite's one broker (conftest.py) has these listeners."""

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
