"""Kafka clients nobody here wrote (kcat, confluent-kafka/librdkafka) against a broker with a
GREGOR and a KAFKA listener (docs/kafka-compat.md)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
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


@pytest.fixture
def kafka_broker(broker_factory: Callable[..., Any]) -> KafkaBroker:
    return KafkaBroker(
        broker_factory(
            listeners="GREGOR://127.0.0.1:0,KAFKA://127.0.0.1:0",
            # a name that shows which listener an answer was computed for
            advertised_listeners="GREGOR://127.0.0.1:0,KAFKA://localhost:0",
        )
    )


@pytest.fixture
def kcat() -> str:
    path = shutil.which("kcat")
    if path is None:
        pytest.skip("kcat is not installed (Debian package kcat; scripts/test.sh installs it)")
    return path
