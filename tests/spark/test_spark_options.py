"""Wrong options fail at load()/planning with a message naming the option (real Spark, no broker
needed: validation happens before any connection)."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.spark


def _load_error(spark: Any, **opts: str) -> str:
    reader = spark.read.format("gregor")
    for k, v in opts.items():
        reader = reader.option(k, v)
    with pytest.raises(Exception) as ei:  # noqa: PT011 - Spark wraps the Python error
        reader.load()
    return str(ei.value)


def test_bad_options_fail_at_load(spark: Any) -> None:
    msg = _load_error(
        spark, **{"bootstrap.servers": "127.0.0.1:1", "subscribe": "a", "assign": '{"a":[0]}'}
    )
    assert "exactly one of" in msg
    msg = _load_error(
        spark,
        **{"bootstrap.servers": "127.0.0.1:1", "subscribe": "a", "failOnDataLoss": "maybe"},
    )
    assert "failOnDataLoss" in msg and "true, false" in msg
    msg = _load_error(
        spark, **{"bootstrap.servers": "127.0.0.1:1", "subscribe": "a", "startingOffsets": "x"}
    )
    assert "startingOffsets" in msg and "earliest" in msg


def test_schema_matches_kafka_source(spark: Any) -> None:
    base = {"bootstrap.servers": "127.0.0.1:1", "subscribe": "a"}
    df = spark.read.format("gregor").options(**base).load()
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int>"
    )
    df = spark.read.format("gregor").options(**base, includeHeaders="true").load()
    assert df.schema.simpleString().endswith(
        "timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )


def test_write_without_value_column_fails_before_connecting(spark: Any) -> None:
    df = spark.createDataFrame([("k",)], "key string")
    with pytest.raises(Exception, match="'value' column"):  # noqa: PT011 - wrapped by Spark
        df.write.format("gregor").mode("append").option("bootstrap.servers", "127.0.0.1:1").option(
            "topic", "x"
        ).save()
    with pytest.raises(Exception, match="no topic"):  # noqa: PT011
        spark.createDataFrame([("v",)], "value string").write.format("gregor").mode(
            "append"
        ).option("bootstrap.servers", "127.0.0.1:1").save()
