"""Client quotas on the Kafka listener: AlterClientQuotas and DescribeClientQuotas byte for
byte (v0, encoded with kio, Kafka's own message definitions), and librdkafka (confluent-kafka)
over its producer byte rate seeing throttle_time_ms in its throttle callback, every message
still delivered."""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

import pytest
from kio.index import load_response_schema
from kio.schema.alter_client_quotas.v0.request import AlterClientQuotasRequest, EntryData, OpData
from kio.schema.alter_client_quotas.v0.request import EntityData as AlterEntity
from kio.schema.describe_client_quotas.v0.request import (
    ComponentData,
    DescribeClientQuotasRequest,
)
from kio.schema.request_header.v1.header import RequestHeader
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import f64, i8, i16, i32

ck = pytest.importorskip("confluent_kafka")


def _call(address: str, api_key: int, entity: Any) -> Any:
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        buf = io.BytesIO()
        header = RequestHeader(
            request_api_key=i16(api_key),
            request_api_version=i16(0),
            correlation_id=i32(3),
            client_id="raw",
        )
        entity_writer(RequestHeader)(buf, header)
        entity_writer(type(entity))(buf, entity)
        s.sendall(struct.pack(">i", len(buf.getvalue())) + buf.getvalue())
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = s.recv(65536)
            assert chunk, "the broker closed the connection"
            data += chunk
    payload = memoryview(data[4:])
    assert struct.unpack_from(">i", payload)[0] == 3
    return entity_reader(load_response_schema(api_key, 0))(payload, 4)[0]


def _alter(address: str, client_id: str, key: str, value: float | None) -> Any:
    op = OpData(key=key, value=f64(value or 0.0), remove=value is None)
    req = AlterClientQuotasRequest(
        entries=(
            EntryData(
                entity=(AlterEntity(entity_type="client-id", entity_name=client_id),), ops=(op,)
            ),
        ),
        validate_only=False,
    )
    return _call(address, 49, req)


def test_alter_and_describe_on_the_kafka_wire(kafka_broker) -> None:
    r = _alter(kafka_broker.kafka, "wire-quota", "consumer_byte_rate", 4096.0)
    [entry] = r.entries
    assert entry.error_code.value == 0 and entry.entity[0].entity_name == "wire-quota"
    bad = _alter(kafka_broker.kafka, "wire-quota", "no_such_rate", 1.0)
    assert bad.entries[0].error_code.value == 42  # INVALID_REQUEST, as Kafka
    component = ComponentData(entity_type="client-id", match_type=i8(0), match="wire-quota")
    d = _call(
        kafka_broker.kafka, 48, DescribeClientQuotasRequest(components=(component,), strict=False)
    )
    assert d.error_code.value == 0
    [found] = d.entries
    assert [(v.key, v.value) for v in found.values] == [("consumer_byte_rate", 4096.0)]
    assert (
        _alter(kafka_broker.kafka, "wire-quota", "consumer_byte_rate", None)
        .entries[0]
        .error_code.value
        == 0
    )


def test_librdkafka_sees_throttle_time(kafka_broker) -> None:
    from client import Admin

    with Admin(bootstrap_servers=kafka_broker.gregor) as admin:
        admin.create_topic("kq", 1, 1)
    quota = 20_000.0
    assert (
        _alter(kafka_broker.kafka, "ck-slow", "producer_byte_rate", quota)
        .entries[0]
        .error_code.value
        == 0
    )
    throttles: list[float] = []
    delivered: list = []
    p = ck.Producer(
        {
            "bootstrap.servers": kafka_broker.kafka,
            "client.id": "ck-slow",
            "linger.ms": 5,
            "throttle_cb": lambda ev: throttles.append(ev.throttle_time),
        }
    )
    try:
        value = b"x" * 1000
        # 15 windows' worth of the quota in one go: over the 10 the rate is measured across
        for _ in range(300):
            p.produce("kq", value, partition=0, on_delivery=lambda err, msg: delivered.append(err))
        assert p.flush(120) == 0
        p.poll(0)
    finally:
        _alter(kafka_broker.kafka, "ck-slow", "producer_byte_rate", None)
    assert len(delivered) == 300 and all(err is None for err in delivered)
    assert throttles and max(throttles) > 0, throttles
