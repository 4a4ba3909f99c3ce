"""Batch reads through spark.read.format("gregor") against a real loopback broker."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from spark_helpers import create_topic, produce, send_records

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _read(spark: Any, bootstrap: str, **opts: str) -> Any:
    return spark.read.format("gregor").option("bootstrap.servers", bootstrap).options(**opts).load()


def test_batch_100k_over_4_partitions(spark: Any, broker_server: Any) -> None:
    bs = broker_server.bootstrap
    create_topic(bs, "big", 4)
    per = 25_000
    data = {
        p: [(f"k{p}-{i}".encode(), f"value-{p}-{i}".encode()) for i in range(per)] for p in range(4)
    }
    produce(bs, "big", data)
    expected = Counter(
        (k, v, p, off) for p, pairs in data.items() for off, (k, v) in enumerate(pairs)
    )
    df = _read(spark, bs, subscribe="big")
    rows = df.select("key", "value", "partition", "offset").collect()
    got = Counter((bytes(r.key), bytes(r.value), r.partition, r.offset) for r in rows)
    assert len(rows) == 4 * per
    assert got == expected
    assert df.select("topic").distinct().collect()[0].topic == "big"


def test_offset_ranges_min_partitions_and_tuple_path(spark: Any, broker_server: Any) -> None:
    bs = broker_server.bootstrap
    create_topic(bs, "rng", 2)
    produce(bs, "rng", {p: [(None, f"{p}:{i}".encode()) for i in range(50)] for p in range(2)})
    want = {(0, o) for o in range(10, 20)} | {(1, o) for o in range(50)}
    for use_arrow in ("true", "false"):
        df = _read(
            spark,
            bs,
            subscribe="rng",
            startingOffsets='{"rng":{"0":10,"1":-2}}',
            endingOffsets='{"rng":{"0":20,"1":-1}}',
            minPartitions="6",
            useArrow=use_arrow,
        )
        assert df.rdd.getNumPartitions() >= 6
        rows = df.collect()
        assert {(r.partition, r.offset) for r in rows} == want
        assert len(rows) == len(want)
        assert all(r.value == f"{r.partition}:{r.offset}".encode() for r in rows)
    # assign reads only the listed partition
    rows = _read(spark, bs, assign='{"rng":[1]}').collect()
    assert {r.partition for r in rows} == {1} and len(rows) == 50


def test_bad_ending_offsets_fail_with_option_named(spark: Any, broker_server: Any) -> None:
    bs = broker_server.bootstrap
    create_topic(bs, "bad", 1)
    produce(bs, "bad", {0: [(None, b"x")] * 5})
    with pytest.raises(Exception, match="endingOffsets"):  # noqa: PT011 - wrapped by Spark
        _read(
            spark,
            bs,
            subscribe="bad",
            startingOffsets='{"bad":{"0":4}}',
            endingOffsets='{"bad":{"0":2}}',
        ).collect()


def test_offsets_json_of_a_recreated_topic_is_data_loss(spark: Any, broker_server: Any) -> None:
    """startingOffsets/endingOffsets taken from a checkpoint (with "topicId") of a topic since
    deleted and recreated: the reason names both ids first; failOnDataLoss=false reads the new
    topic whole instead of applying the old offsets to it."""
    from client import Admin

    bs = broker_server.bootstrap
    create_topic(bs, "again", 1)
    with Admin(bootstrap_servers=bs) as admin:
        old = admin.describe_topic("again").topic_id
        admin.delete_topic("again")
        admin.create_topic("again", partitions=1)
        new = admin.describe_topic("again").topic_id
    assert old and new and old != new
    produce(bs, "again", {0: [(None, f"{i}".encode()) for i in range(8)]})
    opts = {
        "subscribe": "again",
        "startingOffsets": f'{{"again":{{"0":3,"topicId":"{old}"}}}}',
        "endingOffsets": f'{{"again":{{"0":5,"topicId":"{old}"}}}}',
    }
    with pytest.raises(Exception) as ei:  # noqa: PT011 - wrapped by Spark
        _read(spark, bs, **opts).collect()
    head = str(ei.value)[:300]
    want = (
        f"topic again was deleted and recreated (id {old} in option 'startingOffsets', {new} now)"
    )
    assert want in head, str(ei.value)[:2000]
    rows = _read(spark, bs, failOnDataLoss="false", **opts).collect()
    assert sorted(r.offset for r in rows) == list(range(8))
    # the current id: no data loss, the offsets are used as given
    cur = {k: v.replace(old, new) for k, v in opts.items()}
    assert sorted(r.offset for r in _read(spark, bs, **cur).collect()) == [3, 4]


def test_timestamps_and_headers(spark: Any, broker_server: Any) -> None:
    bs = broker_server.bootstrap
    create_topic(bs, "ts", 1)
    base = 1_700_000_000_000
    send_records(
        bs,
        "ts",
        [
            {
                "value": f"v{i}".encode(),
                "key": None,
                "partition": 0,
                "timestamp_ms": base + i * 1000,
                "headers": [("h", f"x{i}".encode()), ("n", None)],
            }
            for i in range(20)
        ],
    )
    for use_arrow in ("true", "false"):
        df = _read(spark, bs, subscribe="ts", includeHeaders="true", useArrow=use_arrow)
        rows = df.selectExpr(
            "offset", "unix_millis(timestamp) AS ms", "timestampType", "headers"
        ).collect()
        rows.sort(key=lambda r: r.offset)
        assert len(rows) == 20
        for i, r in enumerate(rows):
            assert r.ms == base + i * 1000
            assert r.timestampType == 0
            assert [(h.key, None if h.value is None else bytes(h.value)) for h in r.headers] == [
                ("h", f"x{i}".encode()),
                ("n", None),
            ]
    rows = _read(spark, bs, subscribe="ts", startingTimestamp=str(base + 5000)).collect()
    assert sorted(r.offset for r in rows) == list(range(5, 20))
    rows = _read(
        spark, bs, subscribe="ts", startingOffsetsByTimestamp=f'{{"ts":{{"0":{base + 12500}}}}}'
    ).collect()
    assert sorted(r.offset for r in rows) == list(range(13, 20))
    with pytest.raises(Exception, match="startingOffsetsByTimestampStrategy"):  # noqa: PT011
        _read(spark, bs, subscribe="ts", startingTimestamp=str(base + 10**9)).collect()
    rows = _read(
        spark,
        bs,
        subscribe="ts",
        startingTimestamp=str(base + 10**9),
        startingOffsetsByTimestampStrategy="latest",
    ).collect()
    assert rows == []


def test_retention_removed_range(spark: Any, broker_factory: Any) -> None:
    """Offsets removed by retention: failOnDataLoss=true names the reason, false skips ahead."""
    from helpers import wait_until

    from client import Admin

    b = broker_factory(
        **{
            "log.segment.bytes": 2048,
            "log.retention.bytes": 4096,
            "log.retention.check.interval.ms": 50,
        }
    )
    bs = b.bootstrap
    create_topic(bs, "ret", 1)
    for i in range(10):  # several produce requests -> several batches -> several segments
        produce(bs, "ret", {0: [(None, b"%03d-" % i + b"x" * 100) for _ in range(20)]})

    def log_start() -> int:
        with Admin(bootstrap_servers=bs) as admin:
            return admin.describe_topic("ret").partitions[0].log_start_offset

    start = wait_until(log_start, timeout=30, msg="retention to move the log start")
    opts = {"subscribe": "ret", "startingOffsets": '{"ret":{"0":0}}'}
    with pytest.raises(Exception, match="removed by retention"):  # noqa: PT011
        _read(spark, bs, **opts).collect()
    rows = _read(spark, bs, failOnDataLoss="false", **opts).collect()
    offsets = sorted(r.offset for r in rows)
    assert offsets and offsets[0] >= start and offsets[-1] == 199
    assert offsets == list(range(offsets[0], 200))


def test_delete_records_removed_range(spark: Any, broker_server: Any) -> None:
    """Offsets removed by Admin.delete_records are reported as data loss exactly as retention's:
    failOnDataLoss=true fails naming the new log start, false skips to it."""
    from client import Admin, TopicPartition

    bs = broker_server.bootstrap
    create_topic(bs, "delrec", 1)
    produce(bs, "delrec", {0: [(None, b"%03d" % i) for i in range(50)]})
    with Admin(bootstrap_servers=bs) as admin:
        assert admin.delete_records({TopicPartition("delrec", 0): 30}) == {
            TopicPartition("delrec", 0): 30
        }
    opts = {"subscribe": "delrec", "startingOffsets": '{"delrec":{"0":0}}'}
    with pytest.raises(Exception, match=r"offsets 0\.\.29 were removed.*DeleteRecords"):  # noqa: PT011
        _read(spark, bs, **opts).collect()
    rows = _read(spark, bs, failOnDataLoss="false", **opts).collect()
    assert sorted(r.offset for r in rows) == list(range(30, 50))
    assert next(bytes(r.value) for r in sorted(rows, key=lambda r: r.offset)) == b"030"
    # "earliest" is the new log start: no data loss to report
    rows = _read(spark, bs, subscribe="delrec").collect()
    assert sorted(r.offset for r in rows) == list(range(30, 50))
