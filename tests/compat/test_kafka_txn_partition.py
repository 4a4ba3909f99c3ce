"""Transactions, the partition side, on the Kafka listener (issue 29): transactional batches
(written with Gregor's Produce into the same log) ended by WriteTxnMarkers sent in Kafka's
own encoding (kio); a confluent-kafka consumer with isolation.level=read_committed skips the
aborted transaction and the markers, read_uncommitted sees every data record, and
ListOffsets' latest is the last stable offset for read_committed."""

from __future__ import annotations

import io
import socket
import struct

import pytest
from helpers import RawClient
from kio.index import load_response_schema
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.write_txn_markers.v1 import request as wtm
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32, i64

from client import Admin
from client.protocol import ApiKey
from client.records import build_batch

ck = pytest.importorskip("confluent_kafka")

TOPIC = "ktxn"


def _kafka_markers(address: str, markers: list[tuple[int, bool]]) -> list[int]:
    """WriteTxnMarkers v1 over a raw socket: [(producer id, commit)] → error codes."""
    body = wtm.WriteTxnMarkersRequest(
        markers=tuple(
            wtm.WritableTxnMarker(
                producer_id=i64(pid),
                producer_epoch=i16(0),
                transaction_result=commit,
                topics=(wtm.WritableTxnMarkerTopic(name=TOPIC, partition_indexes=(i32(0),)),),
                coordinator_epoch=i32(0),
            )
            for pid, commit in markers
        )
    )
    buf = io.BytesIO()
    entity_writer(RequestHeader)(
        buf,
        RequestHeader(
            request_api_key=i16(27),
            request_api_version=i16(1),
            correlation_id=i32(5),
            client_id="t",
        ),
    )
    entity_writer(wtm.WriteTxnMarkersRequest)(buf, body)
    payload = buf.getvalue()
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(struct.pack(">i", len(payload)) + payload)
        f = s.makefile("rb")
        (n,) = struct.unpack(">i", f.read(4))
        answer = f.read(n)
    resp = entity_reader(load_response_schema(27, 1))(memoryview(answer), 5)[0]
    return [int(m.topics[0].partitions[0].error_code) for m in resp.markers]


def _consume(bootstrap: str, isolation: str, expected: int) -> list[bytes]:
    c = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"ktxn-{isolation}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    try:
        c.assign([ck.TopicPartition(TOPIC, 0, 0)])
        got: list[bytes] = []
        for _ in range(100):  # each consume() waits up to 0.2 s
            for m in c.consume(10, 0.2):
                assert m.error() is None, m.error()
                got.append(m.value())
            if len(got) >= expected:
                break
        got += [m.value() for m in c.consume(10, 0.5)]  # nothing more comes
        return got
    finally:
        c.close()


def test_confluent_read_committed_skips_an_aborted_transaction(kafka_broker) -> None:
    with Admin(bootstrap_servers=kafka_broker.gregor) as admin:
        admin.create_topic(TOPIC)
    host, port = kafka_broker.gregor.rsplit(":", 1)
    with RawClient((host, int(port))) as c:

        def produce(batch: bytes) -> None:
            body = {
                "acks": -1,
                "timeout_ms": 10_000,
                "topics": [{"name": TOPIC, "partitions": [{"partition": 0, "records": batch}]}],
            }
            p = c.request(ApiKey.PRODUCE, 0, body)["topics"][0]["partitions"][0]
            assert p["error_code"] == 0, p

        def txn(pid: int, values: list[bytes]) -> bytes:
            rows = [(b"k", v) for v in values]
            return build_batch(
                rows, producer_id=pid, producer_epoch=0, base_sequence=0, is_transactional=True
            )

        pids = [
            c.request(ApiKey.INIT_PRODUCER_ID, 0, {"transactional_id": None})["producer_id"]
            for _ in range(3)
        ]
        produce(build_batch([(b"k", b"before")]))  # 0
        produce(txn(pids[0], [b"aborted-1", b"aborted-2"]))  # 1-2
        produce(txn(pids[1], [b"committed"]))  # 3
        produce(txn(pids[2], [b"open"]))  # 4: never decided here
        assert _kafka_markers(kafka_broker.kafka, [(pids[0], False), (pids[1], True)]) == [0, 0]
        produce(build_batch([(b"k", b"after")]))  # 7 (markers at 5, 6)

    committed = _consume(kafka_broker.kafka, "read_committed", 2)
    assert committed == [b"before", b"committed"]  # stops at the open transaction
    uncommitted = _consume(kafka_broker.kafka, "read_uncommitted", 6)
    assert uncommitted == [b"before", b"aborted-1", b"aborted-2", b"committed", b"open", b"after"]
