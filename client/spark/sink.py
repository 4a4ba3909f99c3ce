"""The `gregor` sink: `df.write.format("gregor")` and `df.writeStream.format("gregor")`.

Columns (as Spark's Kafka sink): `value` (required, string or binary), `key` (string/binary,
optional), `topic` (string; or the option `topic`, which the column overrides per row when both
are present and the column is not null), `partition` (int, optional), `headers`
(array<struct<key string, value binary>>, optional). Other columns are ignored.

Delivery is at-least-once: each task sends its rows with acks=all (unless `kafka.acks` says
otherwise; every `kafka.*` option goes to the task's Producer), flushes, and fails if any
record was not acknowledged (Spark then retries the task, possibly writing some rows twice).
With `exactlyOnce=true` (streaming only) each task writes its rows and the batch id in one
transaction and commits it in `write()`, skipping a batch its (query, partition) already
committed (`write_rows_exactly_once`; the argument is in docs/spark.md, "Exactly-once sink").
Keyed rows without a partition go where `client.partitioner.default_partition` puts them
(Kafka-compatible murmur2), never Python's per-process `hash()`.

`write()` runs on executor Python workers (one thread per task); the writer object holds only
options, so it pickles cleanly.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql import Row
from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage

from client.errors import ConfigError
from client.spark.errors import surfaced
from client.spark.options import SinkOptions

if TYPE_CHECKING:
    from concurrent.futures import Future

    from client import Producer
    from client.aio.types import RecordMetadata

log = logging.getLogger(__name__)

_FLUSH_TIMEOUT_S = 120.0
_MAX_PENDING = 10_000  # futures held before waiting on the oldest


def _records(messages: list[WriterCommitMessage | None]) -> int:
    """Records the tasks' messages say they wrote (our writers return SinkCommitMessage)."""
    return sum(m.records for m in messages if isinstance(m, SinkCommitMessage))


class SinkCommitMessage(WriterCommitMessage):
    def __init__(self, records: int, skipped: bool = False) -> None:
        self.records = records
        self.skipped = skipped  # exactlyOnce: the batch was found committed, nothing written


def _bytes(v: Any, column: str) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    raise ConfigError(f"column {column!r}: {type(v).__name__} is not string or binary")


def _send_rows(producer: Producer, opts: SinkOptions, rows: Iterator[Row]) -> int:
    """Send every row through `producer`; return the count once all are acknowledged."""
    from client.partitioner import default_partition

    counts: dict[str, int] = {}
    pending: list[Future[RecordMetadata]] = []
    n = 0
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
            [(h["key"], _bytes(h["value"], "headers.value")) for h in headers] if headers else None
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
    return n


def write_rows(opts: SinkOptions, rows: Iterator[Any]) -> SinkCommitMessage:
    """Send every row; return once all are acknowledged (raises on any failure)."""
    from client import Producer

    settings: dict[str, Any] = {"acks": "all", **dict(opts.producer_config)}  # kafka.* win
    producer = Producer(settings, bootstrap_servers=opts.bootstrap_servers)
    try:
        n = _send_rows(producer, opts, rows)
    finally:
        producer.close()
    return SinkCommitMessage(n)


# -- exactly once (docs/spark.md, "Exactly-once sink") -----------------------------------------

QUERY_ID_PROPERTY = "sql.streaming.queryId"  # Spark's StreamExecution.QUERY_ID_KEY
BATCH_ID_PROPERTY = "streaming.sql.batchId"  # Spark's MicroBatchExecution.BATCH_ID_KEY


def transactional_id(query_id: str, partition: int) -> str:
    """The transactional id (and progress group id) of Spark partition `partition` of the
    query whose persistent id (kept in its checkpoint) is `query_id`."""
    return f"gregor-spark-{query_id}-{partition}"


def committed_batch(opts: SinkOptions, txn_id: str) -> int | None:
    """The last batch id (query, P) committed, read as read_committed offsets (OffsetFetch
    require_stable) of the group `txn_id`; None if it never committed one."""
    from client import Consumer, TopicPartition

    assert opts.topic is not None  # parse_sink_options requires it with exactlyOnce
    tp = TopicPartition(opts.topic, 0)
    from client.config import REGISTRY

    # the kafka.* options a consumer accepts too: security, client.id, timeouts, backoffs
    consumer_keys = REGISTRY.for_role("consumer")
    settings = {}
    for k, v in opts.producer_config:
        known = REGISTRY.get(k)
        if known is not None and known.name in consumer_keys:
            settings[k] = v
    with Consumer(
        settings,
        bootstrap_servers=opts.bootstrap_servers,
        group_id=txn_id,
        enable_auto_commit=False,
    ) as consumer:
        return consumer.committed([tp]).get(tp)


def write_rows_exactly_once(
    opts: SinkOptions, rows: Iterator[Row], query_id: str, partition: int, batch_id: int
) -> SinkCommitMessage:
    """Write partition `partition` of batch `batch_id` of query `query_id` at most once (and,
    with Spark's retries, exactly once): fence earlier attempts, skip a batch the progress
    says is committed, else the rows and the progress in one transaction, committed here."""
    from client import Producer, TopicPartition

    assert opts.topic is not None
    txn_id = transactional_id(query_id, partition)
    settings: dict[str, object] = {
        **dict(opts.producer_config),
        "acks": "all",
        "enable.idempotence": True,
        "transactional.id": txn_id,
    }
    producer = Producer(settings, bootstrap_servers=opts.bootstrap_servers)
    try:
        # bumps the epoch: an earlier attempt of (query, P) is fenced and its open
        # transaction aborted before this returns; only then is the progress trustworthy
        producer.init_transactions()
        done = committed_batch(opts, txn_id)
        if done is not None and done >= batch_id:
            log.info(
                "%s: batch %d already committed (progress %d): writing nothing",
                txn_id,
                batch_id,
                done,
            )
            return SinkCommitMessage(0, skipped=True)
        producer.begin_transaction()
        try:
            n = _send_rows(producer, opts, rows)
            producer.send_offsets_to_transaction({TopicPartition(opts.topic, 0): batch_id}, txn_id)
            producer.commit_transaction()
        except BaseException:
            try:
                producer.abort_transaction()
            except Exception as exc:  # fenced or gone: the next init or the timeout aborts it
                log.warning("%s: abort after a failed batch %d: %s", txn_id, batch_id, exc)
            raise
    finally:
        producer.close()
    return SinkCommitMessage(n)


def _task_identity() -> tuple[str, int, int]:
    """(query id, partition, batch id) of the running streaming task (executor side)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    query_id = ctx.getLocalProperty(QUERY_ID_PROPERTY) if ctx is not None else None
    batch = ctx.getLocalProperty(BATCH_ID_PROPERTY) if ctx is not None else None
    if ctx is None or not query_id or batch is None:
        raise ConfigError(
            "exactlyOnce=true: this task carries no streaming query id / batch id (Spark "
            f"local properties {QUERY_ID_PROPERTY!r}, {BATCH_ID_PROPERTY!r}); exactlyOnce is "
            "for writeStream micro-batch queries only"
        )
    return query_id, ctx.partitionId(), int(batch)


class GregorWriter(DataSourceWriter):
    def __init__(self, opts: SinkOptions, schema: Any) -> None:
        if opts.exactly_once:
            raise ConfigError(
                "option 'exactlyOnce' is for streaming writes (writeStream): a batch write has "
                "no query id and batch id to make a retried write recognisable; write batch "
                "data without it (at-least-once), or as a streaming query with trigger(once)"
            )
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
        if self.opts.exactly_once:
            query_id, partition, batch_id = _task_identity()
            return write_rows_exactly_once(self.opts, iterator, query_id, partition, batch_id)
        return write_rows(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        skipped = sum(1 for m in messages if isinstance(m, SinkCommitMessage) and m.skipped)
        log.info(
            "batch %d: wrote %d records (%d tasks found it already committed)",
            batchId,
            _records(messages),
            skipped,
        )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        if self.opts.exactly_once:
            log.warning(
                "batch %d aborted: tasks that committed stay committed and are skipped when "
                "the batch is replayed",
                batchId,
            )
            return
        log.warning("batch %d aborted (at-least-once: acknowledged records stay)", batchId)
