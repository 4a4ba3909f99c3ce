"""What a user sees when a gregor read or write fails, through a real local[2] SparkSession:
unknown options, missing topics (docs/spark.md "Missing topics"), and the reason on the first
line of the exception PySpark raises (`GregorSparkError: ...`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_helpers import create_topic, produce, wait_query

from client.spark.errors import reason_of

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0]


def _read(spark: Any, bootstrap: str, **opts: str) -> Any:
    return spark.read.format("gregor").option("bootstrap.servers", bootstrap).options(**opts)


def test_unknown_option_fails_at_load_with_a_suggestion(spark: Any) -> None:
    with pytest.raises(Exception) as ei:  # noqa: PT011 - PySpark's AnalysisException
        _read(spark, "127.0.0.1:1", subscribe="a", startingOffset="earliest").load()
    first = _first_line(ei.value)
    assert "GregorSparkError: unknown option 'startingoffset' for the gregor source" in first
    assert "did you mean startingOffsets?" in first
    with pytest.raises(Exception) as ei:  # noqa: PT011 - no subscribe: caught by reader()
        _read(spark, "127.0.0.1:1", subscrib="a").load().collect()
    assert "GregorSparkError: unknown option 'subscrib'" in _first_line(ei.value)
    assert "did you mean subscribe?" in _first_line(ei.value)


def test_batch_read_of_a_missing_topic_fails_clearly(spark: Any, broker_server: Any) -> None:
    bs = broker_server.bootstrap
    create_topic(bs, "present", 2)
    produce(bs, "present", {0: [(None, b"x")]})
    with pytest.raises(Exception) as ei:  # noqa: PT011
        _read(spark, bs, subscribe="present,presnt").load().collect()
    first = _first_line(ei.value)
    assert (
        "GregorSparkError: option 'subscribe': topic 'presnt' does not exist — did you mean 'present'?"
        in first
    )
    assert reason_of(ei.value).startswith("GregorSparkError: option 'subscribe': topic 'presnt'")
    # failOnDataLoss=false: the missing topic reads as empty, the other one as usual
    rows = _read(spark, bs, subscribe="present,presnt", failOnDataLoss="false").load().collect()
    assert [(r.topic, r.value) for r in rows] == [("present", b"x")]
    with pytest.raises(Exception) as ei:  # noqa: PT011
        _read(spark, bs, assign='{"present":[0,5]}').load().collect()
    assert "GregorSparkError: option 'assign': partition present-5 does not exist" in (
        _first_line(ei.value)
    )


def test_streaming_assign_of_a_missing_topic_fails_the_query(
    spark: Any, broker_server: Any, tmp_path: Path
) -> None:
    q = (
        spark.readStream.format("gregor")
        .option("bootstrap.servers", broker_server.bootstrap)
        .option("assign", '{"absent":[0]}')
        .load()
        .writeStream.format("memory")
        .queryName("absent_sink")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .start()
    )
    with pytest.raises(Exception) as ei:  # noqa: PT011 - StreamingQueryException
        q.awaitTermination(120)
    assert "GregorSparkError: option 'assign': topic 'absent' does not exist" in (
        _first_line(ei.value)
    )


def test_streaming_subscribe_waits_for_the_topic_to_be_created(
    spark: Any, broker_server: Any, tmp_path: Path
) -> None:
    bs = broker_server.bootstrap
    q = (
        spark.readStream.format("gregor")
        .option("bootstrap.servers", bs)
        .option("subscribe", "later")
        .load()
        .writeStream.format("memory")
        .queryName("later_sink")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        wait_query(q, lambda: len(q.recentProgress) >= 2, 120, "two empty micro-batches")
        create_topic(bs, "later", 1)
        produce(bs, "later", {0: [(None, b"first"), (None, b"second")]})

        def values() -> list[bytes]:
            return [bytes(r.value) for r in spark.sql("SELECT value FROM later_sink").collect()]

        wait_query(q, lambda: len(values()) == 2, 120, "the records of the new topic")
        assert values() == [b"first", b"second"]  # from its beginning, not from "latest"
    finally:
        q.stop()


def test_task_side_error_also_leads_with_the_reason(spark: Any) -> None:
    """In a task, PySpark puts its own header line first; the reason is the line after it."""
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception) as ei:  # noqa: PT011 - raised in the task, on an executor
        df.write.format("gregor").mode("append").option("bootstrap.servers", "127.0.0.1:1").option(
            "topic", "t"
        ).save()
    lines = str(ei.value).splitlines()
    assert lines[0] == "An exception was thrown from the Python worker:"
    assert lines[1].startswith("client.spark.errors.GregorSparkError: no broker reachable")
    assert reason_of(ei.value).startswith("GregorSparkError: no broker reachable")
