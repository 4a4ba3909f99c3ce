"""kafka-python 3 and aiokafka (pure-Python Kafka clients, each with its own protocol code)
through the Kafka listener: idempotent produce, a consumer group with a commit and a resume,
seek by timestamp; what they write is what Gregor's client reads."""

from __future__ import annotations

import asyncio

import pytest
from helpers import wait_until

from client import Admin

kafka = pytest.importorskip("kafka")
aiokafka = pytest.importorskip("aiokafka")

T0 = 1_700_000_000_000


def test_kafka_python_produce_group_commit_resume_and_seek(kafka_broker) -> None:
    with Admin(bootstrap_servers=kafka_broker.gregor) as admin:
        admin.create_topic("kp", partitions=2)
    p = kafka.KafkaProducer(
        bootstrap_servers=kafka_broker.kafka, enable_idempotence=True, acks="all"
    )
    for i in range(40):
        p.send("kp", b"v%d" % i, key=b"k%d" % i, partition=i % 2, timestamp_ms=T0 + i,
               headers=[("i", b"%d" % i)])  # fmt: skip
    p.flush(30)
    p.close()

    def consumer():
        return kafka.KafkaConsumer(
            "kp", bootstrap_servers=kafka_broker.kafka, group_id="kp-group",
            auto_offset_reset="earliest", enable_auto_commit=False,
            consumer_timeout_ms=20_000,
        )  # fmt: skip

    c = consumer()
    got: list = []
    wait_until(lambda: got.extend(_records(c.poll(500))) or len(got) >= 40, 60, "40 records")
    assert sorted(r.value for r in got) == sorted(b"v%d" % i for i in range(40))
    r0 = next(r for r in got if r.value == b"v0")
    assert (r0.key, r0.timestamp, list(r0.headers)) == (b"k0", T0, [("i", b"0")])
    c.commit()
    c.close()
    # resume: nothing left after the commit; a new record is the only one read
    p = kafka.KafkaProducer(bootstrap_servers=kafka_broker.kafka)
    p.send("kp", b"late", partition=0).get(30)
    p.close()
    c = consumer()
    late: list = []
    wait_until(lambda: late.extend(_records(c.poll(500))) or late, 60, "the late record")
    assert [r.value for r in late] == [b"late"]
    # seek by timestamp
    tp = kafka.TopicPartition("kp", 0)
    [(_, found)] = c.offsets_for_times({tp: T0 + 10}).items()
    assert found is not None and found.offset <= 5  # partition 0 holds the even ones
    c.close()
    with Admin(bootstrap_servers=kafka_broker.gregor) as admin:
        group = admin.describe_group("kp-group")
    assert sorted((x.partition, x.committed_offset) for x in group.partitions) == [(0, 20), (1, 20)]


def _records(batch: dict) -> list:
    return [r for rs in batch.values() for r in rs]


def test_aiokafka_produce_and_consume_in_a_group(kafka_broker) -> None:
    async def run() -> list:
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=kafka_broker.kafka, enable_idempotence=True)
        await p.start()
        try:
            for i in range(30):
                await p.send_and_wait("aio", b"a%d" % i, key=b"k", timestamp_ms=T0 + i)
        finally:
            await p.stop()
        c = aiokafka.AIOKafkaConsumer(
            "aio", bootstrap_servers=kafka_broker.kafka, group_id="aio-group",
            auto_offset_reset="earliest",
        )  # fmt: skip
        await c.start()
        got: list = []
        try:
            async with asyncio.timeout(60):
                while len(got) < 30:
                    batch = await c.getmany(timeout_ms=500)
                    got.extend(r for rs in batch.values() for r in rs)
            await c.commit()
        finally:
            await c.stop()
        return got

    got = asyncio.run(run())
    assert [(r.offset, r.value, r.timestamp) for r in got] == [
        (i, b"a%d" % i, T0 + i) for i in range(30)
    ]
