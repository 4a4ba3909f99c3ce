"""df.write.format("gregor"): rows land in the topic, read back by the client library."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from spark_helpers import consume_all, create_topic

from client.partitioner import default_partition

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_batch_write_read_back_by_client(spark: Any, broker_server: Any) -> None:
    bs = broker_server.bootstrap
    create_topic(bs, "sink-a", 3)
    create_topic(bs, "sink-b", 1)
    rows = [(f"key{i}", f"value{i}") for i in range(1000)]
    df = spark.createDataFrame(rows, "key string, value string").repartition(2)
    df.write.format("gregor").mode("append").option("bootstrap.servers", bs).option(
        "topic", "sink-a"
    ).save()
    got = consume_all(bs, "sink-a", 3)
    assert Counter((r.key, r.value) for r in got) == Counter(
        (k.encode(), v.encode()) for k, v in rows
    )
    for r in got:  # keyed rows go where the Kafka-compatible partitioner puts them
        assert r.partition == default_partition(r.key, 3)

    # topic / partition / headers columns, binary value, null key
    df2 = spark.createDataFrame(
        [("sink-b", 0, None, bytearray(b"\x00\x01"), [("h", bytearray(b"1"))])],
        "topic string, partition int, key binary, value binary, "
        "headers array<struct<key:string,value:binary>>",
    )
    df2.write.format("gregor").mode("append").option("bootstrap.servers", bs).save()
    (rec,) = consume_all(bs, "sink-b", 1)
    assert rec.key is None and rec.value == b"\x00\x01"
    assert [(k, bytes(v)) for k, v in rec.headers] == [("h", b"1")]
