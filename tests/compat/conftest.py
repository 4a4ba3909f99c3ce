"""Kafka clients nobody here wrote (kcat, confluent-kafka/librdkafka) against a broker with a
GREGOR and a KAFKA listener (docs/kafka-compat.md), and two more Kafka listeners with security
(KSSL: SSL, KSASL: SASL_SSL with SCRAM-SHA-256 or PLAIN, user SASL_USER) for test_kafka_security.py."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

SASL_USER, SASL_PASSWORD = "carol", "carol-secret-5120"
FAILED_AUTH_DELAY_MS = 200


@dataclass
class KafkaBroker:
    handle: Any  # tests/helpers.py BrokerHandle
    ca: str  # the test CA (PEM) that signed the certificate of the KSSL and KSASL listeners
    sasl_user: str = SASL_USER  # a SCRAM-SHA-256 user, for KSASL
    sasl_password: str = SASL_PASSWORD

    def _port(self, name: str) -> int:
        return next(e.port for e in self.handle.server.listeners.bind if e.name == name)

    @property
    def gregor(self) -> str:
        return f"127.0.0.1:{self._port('GREGOR')}"

    @property
    def kafka(self) -> str:
        return f"127.0.0.1:{self._port('KAFKA')}"

    def tls_address(self, name: str) -> str:
        """A TLS listener's address by the name its certificate carries (librdkafka checks)."""
        return f"localhost:{self._port(name)}"


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """One broker for the whole suite (starting one per test was most of its time): every
    test uses topics and groups of its own names."""
    from helpers import BrokerHandle, broker_config
    from tls_certs import Pki

    from broker.server import BrokerServer
    from client import Admin

    d = tmp_path_factory.mktemp("kafka-broker")
    pki = Pki(d / "pki")
    cert = pki.issue("broker-1", hosts=("localhost", "127.0.0.1"))
    cfg = broker_config(
        d / "data",
        listeners="GREGOR://127.0.0.1:0,KAFKA://127.0.0.1:0,KSSL://127.0.0.1:0,KSASL://127.0.0.1:0",
        # a name that shows which listener an answer was computed for; the certificate names
        # localhost too
        advertised_listeners="GREGOR://127.0.0.1:0,KAFKA://localhost:0,KSSL://localhost:0,"
        "KSASL://localhost:0",
        **{
            "listener.protocol.map": "KAFKA:KAFKA,KSSL:KAFKA,KSASL:KAFKA",
            "listener.security.protocol.map": "GREGOR:PLAINTEXT,KAFKA:PLAINTEXT,KSSL:SSL,"
            "KSASL:SASL_SSL",
            "ssl.certfile": cert.cert,
            "ssl.keyfile": cert.key,
            "connection.failed.authentication.delay.ms": FAILED_AUTH_DELAY_MS,
            # PLAIN for Debian's kcat, whose librdkafka (2.0.2) has SCRAM's nonce bug
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,PLAIN",
        },
    )
    server = BrokerServer(cfg)
    host, port = server.start()
    try:
        broker = KafkaBroker(
            BrokerHandle(server=server, host=host, port=port, data_dir=d / "data"), pki.ca
        )
        # the first user, over the plaintext listener (docs/security.md, "The first user")
        with Admin(bootstrap_servers=broker.gregor) as admin:
            admin.create_user(SASL_USER, SASL_PASSWORD, mechanism="SCRAM-SHA-256")
        yield broker
    finally:
        server.shutdown(timeout=10.0)


@pytest.fixture
def kcat() -> str:
    path = shutil.which("kcat")
    if path is None:
        pytest.skip("kcat is not installed (Debian package kcat; scripts/test.sh installs it)")
    return path
