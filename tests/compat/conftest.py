"""Kafka clients nobody here wrote (kcat, confluent-kafka/librdkafka) against a broker with a
GREGOR and a KAFKA listener (docs/kafka-compat.md)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest


@dataclass
class KafkaBroker:
    handle: Any  # tests/helpers.py BrokerHandle

    def _port(self, name: str) -> int:
        return next(e.port for e in self.handle.server.listeners.bind if e.name == name)

    @property
    def gregor(self) -> str:
        return f"127.0.0.1:{self._port('GREGOR')}"

    @property
    def kafka(self) -> str:
        return f"127.0.0.1:{self._port('KAFKA')}"


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """One broker for the whole suite (starting one per test was most of its time): every
    test uses topics and groups of its own names."""
    from helpers import BrokerHandle, broker_config

    from broker.server import BrokerServer

    d = tmp_path_factory.mktemp("kafka-broker")
    cfg = broker_config(
        d,
        listeners="GREGOR://127.0.0.1:0,KAFKA://127.0.0.1:0",
        # a name that shows which listener an answer was computed for
        advertised_listeners="GREGOR://127.0.0.1:0,KAFKA://localhost:0",
    )
    server = BrokerServer(cfg)
    host, port = server.start()
    try:
        yield KafkaBroker(BrokerHandle(server=server, host=host, port=port, data_dir=d))
    finally:
        server.shutdown(timeout=10.0)


@pytest.fixture
def kcat() -> str:
    path = shutil.which("kcat")
    if path is None:
        pytest.skip("kcat is not installed (Debian package kcat; scripts/test.sh installs it)")
    return path
