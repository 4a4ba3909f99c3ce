"""DescribeProducers (61) against one in-process broker (issue 29): each partition's producer
state on the native listener (through Admin.describe_producers and `gregor transactions
describe-producers`) and on the Kafka listener (kafka-python's KafkaAdminClient); Kafka's
`abort --topic --partition --start-offset` form writing an ABORT marker for a hanging
transaction, after which the last stable offset moves past it; the producer state's last
timestamp kept through a restart (the snapshot written at a roll)."""

from __future__ import annotations

import json
import time

import pytest
from helpers import RawClient

from broker.log.producer_state import latest_snapshot
from client import Admin, TopicPartition
from client.aio.admin_txn import ProducerState
from client.errors import ErrorCode, UnknownTopicOrPartitionError
from client.protocol import ApiKey
from client.records import build_batch

TOPIC = "dp"
TP = TopicPartition(TOPIC, 0)


def _init(c: RawClient) -> int:
    return c.request(ApiKey.INIT_PRODUCER_ID, 0, {"transactional_id": None})["producer_id"]


def _produce(c: RawClient, batch: bytes) -> int:
    body = {
        "acks": -1,
        "timeout_ms": 10_000,
        "topics": [{"name": TOPIC, "partitions": [{"partition": 0, "records": batch}]}],
    }
    p = c.request(ApiKey.PRODUCE, 0, body)["topics"][0]["partitions"][0]
    assert p["error_code"] == 0, p
    return p["base_offset"]


def _batch(pid: int, seq: int, ts: list[int], txn: bool) -> bytes:
    return build_batch(
        [(None, b"v%d" % i, None, t) for i, t in enumerate(ts)],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
        is_transactional=txn,
    )


def _latest_committed(c: RawClient) -> int:
    body = {
        "isolation_level": 1,
        "topics": [{"name": TOPIC, "partitions": [{"partition": 0, "timestamp": -1}]}],
    }
    return c.request(ApiKey.LIST_OFFSETS, 0, body)["topics"][0]["partitions"][0]["offset"]


def _kafka_listener(broker_factory, **overrides):
    handle = broker_factory(
        listeners="GREGOR://127.0.0.1:0,KAFKA://127.0.0.1:0",
        **{"listener.protocol.map": "KAFKA:KAFKA",
           "listener.security.protocol.map": "GREGOR:PLAINTEXT,KAFKA:PLAINTEXT",
           "inter.broker.listener.name": "GREGOR", **overrides},
    )  # fmt: skip
    kport = next(e.port for e in handle.server.listeners.bind if e.name == "KAFKA")
    return handle, kport


def _kafka_rows(kport: int) -> list[tuple]:
    from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
    from kio.schema.describe_producers.v0.response import DescribeProducersResponse
    from kio.static.primitive import i32
    from test_txn_producer import _kafka_request

    req = DescribeProducersRequest(topics=(TopicRequest(name=TOPIC, partition_indexes=(i32(0),)),))
    resp = _kafka_request(kport, req, DescribeProducersResponse)
    return [
        (t.name, p.partition_index, p.error_code, [
            (s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp,
             s.coordinator_epoch, s.current_txn_start_offset) for s in p.active_producers])
        for t in resp.topics for p in t.partitions
    ]  # fmt: skip


def _kafka_python_rows(kport: int) -> list[tuple]:
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KafkaTP

    admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{kport}")
    try:
        got = admin.describe_producers([KafkaTP(TOPIC, 0)])[KafkaTP(TOPIC, 0)]
    finally:
        admin.close()
    return [
        (p.producer_id, p.producer_epoch, p.last_sequence, p.last_timestamp,
         p.coordinator_epoch, p.current_transaction_start_offset)
        for p in got.active_producers
    ]  # fmt: skip


def test_describe_producers_and_abort_by_start_offset(broker_factory, capsys) -> None:
    from broker.cli import main

    handle, kport = _kafka_listener(broker_factory)
    boot = ["--bootstrap-server", handle.bootstrap]
    now = int(time.time() * 1000)
    with Admin(bootstrap_servers=handle.bootstrap) as admin:
        admin.create_topic(TOPIC)
        with RawClient((handle.host, handle.port)) as c:
            hanging, idem = _init(c), _init(c)
            assert _produce(c, build_batch([(None, b"plain")])) == 0
            assert _produce(c, _batch(hanging, 0, [now - 50, now - 10, now - 30], True)) == 1
            assert _produce(c, _batch(idem, 0, [now - 20], False)) == 4
            assert _produce(c, _batch(idem, 1, [now - 5, now - 7], False)) == 5
            assert _latest_committed(c) == 1  # the open transaction holds the LSO

            got = admin.describe_producers([TP])
            assert got == {TP: [
                ProducerState(hanging, 0, 2, now - 10, -1, 1),
                ProducerState(idem, 0, 2, now - 5, -1, -1),
            ]}  # fmt: skip

            # the same over the Kafka listener: kio's schema on the wire, and kafka-python's
            # admin when it has describe_producers (3.0.12 has)
            want = [(hanging, 0, 2, now - 10, -1, 1), (idem, 0, 2, now - 5, -1, -1)]
            assert _kafka_rows(kport) == [(TOPIC, 0, 0, want)]
            from kafka import KafkaAdminClient

            if hasattr(KafkaAdminClient, "describe_producers"):
                assert _kafka_python_rows(kport) == want

            capsys.readouterr()
            args = ["--topic", TOPIC, "--partition", "0", *boot]
            assert main(["transactions", "describe-producers", *args, "--json"]) == 0
            rows = json.loads(capsys.readouterr().out)
            assert [(r["producer_id"], r["current_txn_start_offset"]) for r in rows] == [
                (hanging, 1),
                (idem, -1),
            ]
            assert main(["transactions", "describe-producers", *args]) == 0
            out = capsys.readouterr().out.splitlines()
            assert (
                out[0].split()[0] == "PRODUCER-ID"
                and out[0].split()[-1] == "CURRENT-TXN-START-OFFSET"
            )
            assert out[1].split()[0] == str(hanging) and out[1].split()[-1] == "1"

            # no open transaction starts at 4: nothing is written
            assert main(["transactions", "abort", *args, "--start-offset", "4"]) == 1
            assert "open transactions start at: 1" in capsys.readouterr().err
            # half of the offset form, or both forms: refused
            assert main(["transactions", "abort", "--topic", TOPIC, *boot]) == 1
            assert main(["transactions", "abort", *args, "--start-offset", "1",
                         "--transactional-id", "x"]) == 1  # fmt: skip
            assert _latest_committed(c) == 1

            assert main(["transactions", "abort", *args, "--start-offset", "1"]) == 0
            assert f"producer {hanging} epoch 0" in capsys.readouterr().out
            # the marker at 7 closed it: the LSO is the high watermark again
            assert _latest_committed(c) == 8
            after = {s.producer_id: s for s in admin.describe_producers([TP])[TP]}
            assert after[hanging].current_txn_start_offset == -1
            assert after[hanging].coordinator_epoch == 0
            assert after[hanging].last_sequence == 2  # (a marker has no sequence)

            # per-partition errors: a partition that does not exist
            resp = c.request(ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [
                {"name": TOPIC, "partition_indexes": [0, 5]}, {"name": "nope", "partition_indexes": [0]}
            ]})  # fmt: skip
            codes = [(t["name"], p["partition_index"], p["error_code"])
                     for t in resp["topics"] for p in t["partitions"]]  # fmt: skip
            unknown = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            assert codes == [(TOPIC, 0, 0), (TOPIC, 5, unknown), ("nope", 0, unknown)]
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.describe_producers([TopicPartition("nope", 0)])


def test_last_timestamp_kept_through_a_restart(broker_factory, tmp_path) -> None:
    data = tmp_path / "data"
    handle = broker_factory(data_dir=data)
    now = int(time.time() * 1000)
    with Admin(bootstrap_servers=handle.bootstrap) as admin:
        admin.create_topic(TOPIC, config={"segment.bytes": "100"})  # a roll every batch
        with RawClient((handle.host, handle.port)) as c:
            pid = _init(c)
            _produce(c, _batch(pid, 0, [now - 40], True))
            _produce(c, _batch(pid, 1, [now - 30], True))
            _produce(c, build_batch([(None, b"plain")]))  # (rolls: the snapshot holds pid)
        before = admin.describe_producers([TP])[TP]
    assert before == [ProducerState(pid, 0, 1, now - 30, -1, 0)]
    # the newest snapshot (written at the last roll) holds pid's state, its last timestamp too
    snap = latest_snapshot(data / f"{TOPIC}-0", 1 << 62)
    assert snap is not None and snap[0] >= 2
    assert snap[1].producers[pid].last_timestamp == now - 30
    handle.server.shutdown(timeout=10.0)
    again = broker_factory(data_dir=data)
    with Admin(bootstrap_servers=again.bootstrap) as admin:
        assert admin.describe_producers([TP])[TP] == before
