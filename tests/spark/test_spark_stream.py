"""Streaming reads through spark.readStream.format("gregor") against a real loopback broker."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import create_topic, produce, wait_query

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _stream(spark: Any, bootstrap: str, **opts: str) -> Any:
    return (
        spark.readStream.format("gregor")
        .option("bootstrap.servers", bootstrap)
        .options(**opts)
        .load()
    )


def _batch_sizes(query: Any) -> list[int]:
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"] > 0]


def test_available_now_with_max_offsets_per_trigger(
    spark: Any, broker_server: Any, tmp_path: Path
) -> None:
    bs = broker_server.bootstrap
    create_topic(bs, "rate", 4)
    produce(bs, "rate", {p: [(None, f"{p}-{i}".encode()) for i in range(100)] for p in range(4)})
    q = (
        _stream(spark, bs, subscribe="rate", startingOffsets="earliest", maxOffsetsPerTrigger="100")
        .writeStream.format("memory")
        .queryName("rate_sink")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(120), "availableNow query did not finish"
    assert q.exception() is None
    assert _batch_sizes(q) == [100, 100, 100, 100]
    rows = spark.sql("SELECT partition, offset FROM rate_sink").collect()
    assert sorted((r.partition, r.offset) for r in rows) == [
        (p, o) for p in range(4) for o in range(100)
    ]


def test_stop_restart_exactly_once(spark: Any, broker_server: Any, tmp_path: Path) -> None:
    """Stop mid-stream, produce more, restart from the checkpoint: no gap, no duplicate."""
    bs = broker_server.bootstrap
    create_topic(bs, "resume", 2)
    produce(bs, "resume", {p: [(None, f"a{p}-{i}".encode()) for i in range(200)] for p in range(2)})
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")

    def start(**extra: str) -> Any:
        return (
            _stream(spark, bs, subscribe="resume", startingOffsets="earliest", **extra)
            .selectExpr("partition", "offset", "value")
            .writeStream.format("parquet")
            .option("path", out)
            .option("checkpointLocation", ck)
        )

    q1 = start(maxOffsetsPerTrigger="100").trigger(processingTime="0 seconds").start()
    wait_query(q1, lambda: len(_batch_sizes(q1)) >= 1, 60, "a first micro-batch")
    q1.stop()
    done_first = sum(_batch_sizes(q1))
    assert 0 < done_first < 400, f"expected the query stopped mid-stream, read {done_first}"
    produce(bs, "resume", {p: [(None, f"b{p}-{i}".encode()) for i in range(100)] for p in range(2)})
    q2 = start().trigger(availableNow=True).start()
    assert q2.awaitTermination(120)
    assert q2.exception() is None
    rows = spark.read.parquet(out).collect()
    keys = [(r.partition, r.offset) for r in rows]
    assert len(keys) == 600
    assert sorted(keys) == [(p, o) for p in range(2) for o in range(300)]


def test_pattern_discovers_new_topics(spark: Any, broker_server: Any, tmp_path: Path) -> None:
    bs = broker_server.bootstrap
    create_topic(bs, "disc-a", 1)
    produce(bs, "disc-a", {0: [(None, b"a")] * 10})
    q = (
        _stream(spark, bs, subscribePattern="disc-.*", startingOffsets="earliest")
        .writeStream.format("memory")
        .queryName("disc_sink")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:

        def counts() -> dict[str, int]:
            rows = spark.sql("SELECT topic, count(*) AS n FROM disc_sink GROUP BY topic").collect()
            return {r.topic: r.n for r in rows}

        wait_query(q, lambda: counts() == {"disc-a": 10}, 60, "disc-a rows")
        create_topic(bs, "disc-b", 2)
        produce(bs, "disc-b", {0: [(None, b"b")] * 5, 1: [(None, b"c")] * 7})
        wait_query(q, lambda: counts() == {"disc-a": 10, "disc-b": 12}, 60, "disc-b rows")
    finally:
        q.stop()


def _deleted_topic_run(
    spark: Any, bs: str, tmp_path: Path, topic: str, fail: str, recreate: bool = True
) -> tuple[Any, Any, tuple[str, str]]:
    """Read a topic to its end (20 records a partition), delete it (and re-create it with MORE
    records, 30 a partition: the checkpointed offsets lie inside the new topic, so without ids
    its first 20 records a partition would be skipped), then restart the query from its
    checkpoint. Returns both runs and (old id, new id)."""
    from client import Admin

    create_topic(bs, topic, 2)
    produce(bs, topic, {p: [(None, b"x")] * 20 for p in range(2)})
    ck, out = str(tmp_path / f"ck-{fail}"), str(tmp_path / f"out-{fail}")

    def run() -> Any:
        q = (
            _stream(spark, bs, subscribe=topic, startingOffsets="earliest", failOnDataLoss=fail)
            .selectExpr("partition", "offset", "value")
            .writeStream.format("parquet")
            .option("path", out)
            .option("checkpointLocation", ck)
            .trigger(availableNow=True)
            .start()
        )
        from pyspark.errors import StreamingQueryException

        with contextlib.suppress(StreamingQueryException):  # inspected via q.exception()
            q.awaitTermination(120)
        return q

    first = run()
    assert first.exception() is None and sum(_batch_sizes(first)) == 40
    with Admin(bootstrap_servers=bs) as admin:
        old_id = admin.describe_topic(topic).topic_id
        admin.delete_topic(topic)
        new_id = ""
        if recreate:
            admin.create_topic(topic, partitions=2)
            new_id = admin.describe_topic(topic).topic_id
    if recreate:
        produce(bs, topic, {p: [(None, b"y")] * 30 for p in range(2)})
        assert old_id and new_id and old_id != new_id
    return first, run(), (old_id, new_id)


def test_fail_on_data_loss_true_names_reason(
    spark: Any, broker_server: Any, tmp_path: Path
) -> None:
    _, q, _ = _deleted_topic_run(
        spark, broker_server.bootstrap, tmp_path, "lossy-deleted", "true", recreate=False
    )
    exc = q.exception()
    assert exc is not None, "query should fail on data loss"
    msg = str(exc)
    assert "data loss" in msg and "deleted" in msg and "failOnDataLoss" in msg


def test_recreated_topic_fails_naming_both_ids(
    spark: Any, broker_server: Any, tmp_path: Path
) -> None:
    _, q, (old, new) = _deleted_topic_run(
        spark, broker_server.bootstrap, tmp_path, "lossy-recreated", "true"
    )
    exc = q.exception()
    assert exc is not None, "query should fail: the topic was deleted and recreated"
    head = str(exc)[:300]  # what a user sees first, not ~900 characters into a traceback
    want = (
        f"topic lossy-recreated was deleted and recreated (id {old} in the checkpoint, {new} now)"
    )
    assert want in head, str(exc)[:2000]
    assert "GregorSparkError: data loss: " in head


@pytest.mark.long  # the same recreated-topic run as above, read on (test_stream_planning covers the plan)
def test_recreated_topic_read_whole_when_not_failing(
    spark: Any, broker_server: Any, tmp_path: Path
) -> None:
    _, q, _ = _deleted_topic_run(spark, broker_server.bootstrap, tmp_path, "lossy-renewed", "false")
    assert q.exception() is None
    rows = spark.read.parquet(str(tmp_path / "out-false")).collect()
    new = sorted((r.partition, r.offset) for r in rows if r.value == b"y")
    # every record of the new topic once, the first 20 a partition included (not skipped)
    assert new == [(p, o) for p in range(2) for o in range(30)]
    assert sum(1 for r in rows if r.value == b"x") == 40
