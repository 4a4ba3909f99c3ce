"""The `gregor` sink: `df.write.format("gregor")` and `df.writeStream.format("gregor")`.

Columns (as Spark's Kafka sink): `value` (required, string or binary), `key` (string/binary,
optional), `topic` (string; or the option `topic`, which the column overrides per row when both
are present and the column is not null), `partition` (int, optional), `headers`
(array<struct<key string, value binary>>, optional). Other columns are ignored.

Delivery is at-least-once: each task sends its rows with acks=all (unless `kafka.acks` says
otherwise; every `kafka.*` option goes to the task's Producer), flushes, and fails if any
record was not acknowledged (Spark then retries the task, possibly writing some rows twice).
Keyed rows without a partition go where `client.partitioner.default_partition` puts them
(Kafka-compatible murmur2), never Python's per-process `hash()`.

`write()` runs on executor Python workers (one thread per task); the writer object holds only
options, so it pickles cleanly.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage

from client.errors import ConfigError
from client.spark.errors import surfaced
from client.spark.options import SinkOptions

log = logging.getLogger(__name__)

_FLUSH_TIMEOUT_S = 120.0
_MAX_PENDING = 10_000  # futures held before waiting on the oldest


def _records(messages: list[WriterCommitMessage | None]) -> int:
    """Records the tasks' messages say they wrote (our writers return SinkCommitMessage)."""
    return sum(m.records for m in messages if isinstance(m, SinkCommitMessage))


class SinkCommitMessage(WriterCommitMessage):
    def __init__(self, records: int) -> None:
        self.records = records


def _bytes(v: Any, column: str) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    raise ConfigError(f"column {column!r}: {type(v).__name__} is not string or binary")


def write_rows(opts: SinkOptions, rows: Iterator[Any]) -> SinkCommitMessage:
    """Send every row; return once all are acknowledged (raises on any failure)."""
    from client import Producer
    from client.partitioner import default_partition

    settings: dict[str, Any] = {"acks": "all", **dict(opts.producer_config)}  # kafka.* win
    producer = Producer(settings, bootstrap_servers=opts.bootstrap_servers)
    counts: dict[str, int] = {}
    pending: list[Any] = []
    n = 0
    try:
        for row in rows:
            d = row.asDict() if hasattr(row, "asDict") else dict(row)
            topic = d.get("topic") or opts.topic
            if not topic:
                raise ConfigError("row without a topic: the 'topic' column is null and no option")
            key = _bytes(d.get("key"), "key")
            value = _bytes(d.get("value"), "value")
            partition = d.get("partition")
            if partition is None and key is not None:
                nparts = counts.get(topic)
                if nparts is None:
                    nparts = counts[topic] = len(producer.partitions_for(topic))
                partition = default_partition(key, nparts)
            headers = d.get("headers")
            hdrs = (
                [(h["key"], _bytes(h["value"], "headers.value")) for h in headers]
                if headers
                else None
            )
            pending.append(producer.send(topic, value, key=key, partition=partition, headers=hdrs))
            n += 1
            if len(pending) >= _MAX_PENDING:
                for f in pending:
                    f.result(_FLUSH_TIMEOUT_S)
                pending.clear()
        producer.flush(_FLUSH_TIMEOUT_S)
        for f in pending:
            f.result(_FLUSH_TIMEOUT_S)
    finally:
        producer.close()
    return SinkCommitMessage(n)


class GregorWriter(DataSourceWriter):
    def __init__(self, opts: SinkOptions, schema: Any) -> None:
        self.opts = opts
        self.schema = schema

    @surfaced
    def write(self, iterator: Iterator[Any]) -> SinkCommitMessage:
        return write_rows(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        log.info("wrote %d records", _records(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        log.warning(
            "write aborted after %d acknowledged records (at-least-once: they stay)",
            _records(messages),
        )


class GregorStreamWriter(DataSourceStreamWriter):
    def __init__(self, opts: SinkOptions, schema: Any) -> None:
        self.opts = opts
        self.schema = schema

    @surfaced
    def write(self, iterator: Iterator[Any]) -> SinkCommitMessage:
        return write_rows(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        log.info("batch %d: wrote %d records", batchId, _records(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        log.warning("batch %d aborted (at-least-once: acknowledged records stay)", batchId)
