"""confluent-kafka (librdkafka) through the Kafka listener: idempotent produce with each codec
Gregor builds, snappy refused with Kafka's error, consume by assignment, seek by timestamp,
and the records as Gregor's own client reads them."""

from __future__ import annotations

import pytest
from helpers import wait_until

from client import Admin
from client import Consumer as GregorConsumer
from client import TopicPartition as GregorTP
from client.records import compression

ck = pytest.importorskip("confluent_kafka")

CODECS = ["none", "gzip"] + [c for c in ("lz4", "zstd") if compression.is_available(c)]


def _produce(bootstrap: str, topic: str, n: int, codec: str, t0: int) -> list:
    p = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "compression.type": codec,
            "linger.ms": 5,
        }
    )
    reports: list = []
    for i in range(n):
        p.produce(
            topic,
            value=b"value-%d" % i,
            key=b"key-%d" % i,
            partition=0,
            headers=[("i", b"%d" % i)],
            timestamp=t0 + i,
            on_delivery=lambda err, msg: reports.append((err, msg)),
        )
    assert p.flush(30) == 0
    return reports


def _consume(bootstrap: str, topic: str, offset: int, n: int) -> list:
    c = ck.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    try:
        c.assign([ck.TopicPartition(topic, 0, offset)])
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


@pytest.mark.parametrize("codec", CODECS)
def test_idempotent_produce_then_consume(kafka_broker, codec: str) -> None:
    t0 = 1_700_000_000_000
    reports = _produce(kafka_broker.kafka, f"ck-{codec}", 200, codec, t0)
    assert [err for err, _ in reports if err is not None] == []
    assert sorted(m.offset() for _, m in reports) == list(range(200))
    got = _consume(kafka_broker.kafka, f"ck-{codec}", 57, 143)  # mid-batch start
    assert [m.offset() for m in got] == list(range(57, 200))
    assert [(m.key(), m.value()) for m in got] == [
        (b"key-%d" % i, b"value-%d" % i) for i in range(57, 200)
    ]
    assert [m.headers() for m in got] == [[("i", b"%d" % i)] for i in range(57, 200)]
    assert [m.timestamp() for m in got] == [
        (ck.TIMESTAMP_CREATE_TIME, t0 + i) for i in range(57, 200)
    ]
    # and Gregor's own client, through the native listener, reads the same
    with GregorConsumer(bootstrap_servers=kafka_broker.gregor) as c:
        c.assign([GregorTP(f"ck-{codec}", 0)])
        c.seek_to_beginning()
        ours: list = []
        wait_until(lambda: ours.extend(c.poll(0.5)) or len(ours) >= 200, 30, "200 records")
    assert [(r.offset, r.key, r.value, r.timestamp, list(r.headers)) for r in ours] == [
        (i, b"key-%d" % i, b"value-%d" % i, t0 + i, [("i", b"%d" % i)]) for i in range(200)
    ]


def test_snappy_is_refused_with_kafkas_error(kafka_broker) -> None:
    p = ck.Producer(
        {
            "bootstrap.servers": kafka_broker.kafka,
            "compression.type": "snappy",
            "message.timeout.ms": 10_000,
        }
    )
    errors: list = []
    # compressible, so librdkafka does compress it (it sends a batch whose compressed form
    # is not smaller as it is)
    p.produce("snappy", b"v" * 10_000, partition=0, on_delivery=lambda err, msg: errors.append(err))
    p.flush(30)
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() == ck.KafkaError.UNSUPPORTED_COMPRESSION_TYPE


def test_offsets_for_times_seeks_by_timestamp(kafka_broker) -> None:
    t0 = 1_700_000_000_000
    _produce(kafka_broker.kafka, "times", 100, "none", t0)
    c = ck.Consumer({"bootstrap.servers": kafka_broker.kafka, "group.id": "unused"})
    try:
        [tp] = c.offsets_for_times([ck.TopicPartition("times", 0, t0 + 42)], timeout=30)
        assert tp.error is None
        # the batch holding t0 + 42 is where a time-indexed lookup may land: at or before 42
        assert 0 <= tp.offset <= 42
        low, high = c.get_watermark_offsets(ck.TopicPartition("times", 0), timeout=30)
        assert (low, high) == (0, 100)
    finally:
        c.close()


def test_commit_and_resume_with_metadata(kafka_broker) -> None:
    _produce(kafka_broker.kafka, "commits", 20, "none", 1_700_000_000_000)
    conf = {
        "bootstrap.servers": kafka_broker.kafka,
        "group.id": "resumers",
        "enable.auto.commit": False,
    }
    c = ck.Consumer(conf)
    try:
        c.assign([ck.TopicPartition("commits", 0, 0)])
        got: list = []
        wait_until(lambda: got.extend(c.consume(12 - len(got), 0.5)) or len(got) >= 12, 30, "12")
        tp = ck.TopicPartition("commits", 0, 12, metadata="checkpoint-12")  # must round-trip
        [done] = c.commit(offsets=[tp], asynchronous=False)
        assert done.error is None
    finally:
        c.close()
    c = ck.Consumer(conf)
    try:
        [committed] = c.committed([ck.TopicPartition("commits", 0)], timeout=30)
        assert (committed.offset, committed.metadata) == (12, "checkpoint-12")
        c.assign([committed])
        rest: list = []
        wait_until(lambda: rest.extend(c.consume(8 - len(rest), 0.5)) or len(rest) >= 8, 30, "8")
        assert [m.offset() for m in rest] == list(range(12, 20))
    finally:
        c.close()
    # the same offset, as `gregor groups describe` sees it through the native listener
    from client import Admin

    with Admin(bootstrap_servers=kafka_broker.gregor) as admin:
        described = admin.describe_group("resumers")
    assert [(p.topic, p.partition, p.committed_offset) for p in described.partitions] == [
        ("commits", 0, 12)
    ]


def test_large_produce_requests(kafka_broker) -> None:
    """Requests past the network layer's 64 KiB scratch buffer arrive in a frame array of
    their own (a bytearray): they must decode like small ones."""
    p = ck.Producer(
        {"bootstrap.servers": kafka_broker.kafka, "acks": "all", "linger.ms": 50,
         "batch.size": 1_000_000}
    )  # fmt: skip
    for i in range(5_000):
        p.produce("large", b"%099d" % i, partition=0)
    assert p.flush(60) == 0
    got = _consume(kafka_broker.kafka, "large", 0, 5_000)
    assert [m.value() for m in got] == [b"%099d" % i for i in range(5_000)]


def test_errors_as_kafka_clients_expect_them(kafka_broker) -> None:
    from client import Admin as GregorAdmin

    with GregorAdmin(bootstrap_servers=kafka_broker.gregor) as admin:
        admin.create_topic("compacted", partitions=1, config={"cleanup.policy": "compact"})
        admin.create_topic("small", partitions=1, config={"max.message.bytes": "2000"})
    p = ck.Producer({"bootstrap.servers": kafka_broker.kafka, "message.timeout.ms": 20_000})
    errors: dict = {}

    def report(name: str):
        return lambda err, msg: errors.__setitem__(name, err)

    p.produce("compacted", b"no key", partition=0, on_delivery=report("compacted"))
    p.produce("small", b"x" * 5000, partition=0, on_delivery=report("small"))
    p.flush(30)
    assert errors["compacted"].code() == ck.KafkaError.INVALID_RECORD
    assert errors["small"].code() == ck.KafkaError.MSG_SIZE_TOO_LARGE
    # (alone: a batch holding a keyless record is refused whole, as Kafka does)
    p.produce("compacted", b"keyed", key=b"k", partition=0, on_delivery=report("keyed"))
    p.flush(30)
    assert errors["keyed"] is None


def test_an_illegal_topic_name_is_topic_exception_not_created(kafka_broker) -> None:
    """Metadata answers INVALID_TOPIC_EXCEPTION for an illegal name and creates nothing, so
    librdkafka fails the messages at once (librdkafka's 0057_invalid_topic)."""
    errors: list = []
    p = ck.Producer({"bootstrap.servers": kafka_broker.kafka, "message.timeout.ms": 60_000})
    p.produce("bad$name#", b"x", on_delivery=lambda err, _m: errors.append(err))
    p.produce("good_name_0057", b"y", on_delivery=lambda err, _m: errors.append(err))
    assert p.flush(30) == 0
    codes = sorted(e.code() if e is not None else 0 for e in errors)
    assert codes == [0, ck.KafkaError.TOPIC_EXCEPTION], errors
    with Admin(bootstrap_servers=kafka_broker.gregor) as admin:
        names = set(admin.list_topics())
    assert "good_name_0057" in names and "bad$name#" not in names
