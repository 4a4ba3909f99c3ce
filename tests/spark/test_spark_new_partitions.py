"""A streaming query subscribed to a topic picks up partitions added mid-stream
(Admin.create_partitions) and reads them from their beginning: every record exactly once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_helpers import create_topic, produce, wait_query

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_subscribed_stream_picks_up_new_partitions(
    spark: Any, broker_server: Any, tmp_path: Path
) -> None:
    from client import Admin

    bs = broker_server.bootstrap
    create_topic(bs, "np", 1)
    produce(bs, "np", {0: [(None, b"a%d" % i) for i in range(10)]})
    q = (
        spark.readStream.format("gregor")
        .option("bootstrap.servers", bs)
        .option("subscribe", "np")
        .option("startingOffsets", "earliest")
        .load()
        .writeStream.format("memory")
        .queryName("np_sink")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:

        def rows() -> list[tuple[int, int, bytes]]:
            got = spark.sql("SELECT partition, offset, value FROM np_sink").collect()
            return sorted((r.partition, r.offset, bytes(r.value)) for r in got)

        wait_query(q, lambda: len(rows()) >= 10, 60, "the first 10 rows")
        with Admin(bootstrap_servers=bs) as admin:
            admin.create_partitions("np", 3)
        # records land on the new partitions before the query has planned them
        produce(
            bs,
            "np",
            {
                0: [(None, b"b%d" % i) for i in range(5)],
                1: [(None, b"c%d" % i) for i in range(7)],
                2: [(None, b"d%d" % i) for i in range(3)],
            },
        )
        expected = sorted(
            [(0, i, b"a%d" % i) for i in range(10)]
            + [(0, 10 + i, b"b%d" % i) for i in range(5)]
            + [(1, i, b"c%d" % i) for i in range(7)]
            + [(2, i, b"d%d" % i) for i in range(3)]
        )
        wait_query(q, lambda: len(rows()) >= len(expected), 60, "rows of the new partitions")
        assert rows() == expected  # none missing, none twice
    finally:
        q.stop()
