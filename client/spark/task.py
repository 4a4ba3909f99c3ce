"""Executor side of the `gregor` source: read exactly one planned offset range.

A `RangePartition` (picklable, no sockets) carries everything a task needs: bootstrap servers,
(topic, partition, start, end), the schema flags and the data-loss policy. `read_range` opens a
Consumer lazily inside the task, reads [start, end) — never past `end`, which was the high
watermark (or a rate-limited offset below it) at planning time — and closes it, so re-running a
task yields the same rows.

Rows go to Spark either as tuples (`useArrow=false`) or as Arrow RecordBatches (default): one
batch per poll, built column-wise against `to_arrow_schema(schema)` (columns pulled with
`map(itemgetter)`, ~4x cheaper than `zip(*records)`; all-null keys become `pa.nulls`).

Called on a Spark Python worker (one thread per task).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Iterable, Iterator
from operator import itemgetter
from typing import Any

from pyspark.sql.datasource import InputPartition

from client.errors import GregorTimeoutError, OffsetOutOfRangeError, UnknownTopicOrPartitionError
from client.records.record import ConsumerRecord
from client.spark.offsets import PartitionState, data_loss_reason, report_data_loss

log = logging.getLogger(__name__)

_POLL_MS = 500
_MAX_POLL_RECORDS = 20_000
_UTC = dt.UTC
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=_UTC)


class RangePartition(InputPartition):
    """One Spark task: records [start, end) of topic/partition."""

    def __init__(
        self,
        index: int,
        bootstrap: str,
        topic: str,
        partition: int,
        start: int,
        end: int,
        include_headers: bool,
        fail_on_data_loss: bool,
        use_arrow: bool,
        poll_timeout_ms: int,
        consumer_config: tuple[tuple[str, str], ...] = (),
    ) -> None:
        super().__init__(index)
        self.bootstrap = bootstrap
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end
        self.include_headers = include_headers
        self.fail_on_data_loss = fail_on_data_loss
        self.use_arrow = use_arrow
        self.poll_timeout_ms = poll_timeout_ms
        self.consumer_config = consumer_config

    def __repr__(self) -> str:
        return f"RangePartition({self.topic}-{self.partition} [{self.start}, {self.end}))"


def _state(consumer: Any, tp: Any) -> PartitionState | None:
    try:
        lo = consumer.beginning_offsets([tp])[tp]
        hi = consumer.end_offsets([tp])[tp]
    except UnknownTopicOrPartitionError:
        return None
    return PartitionState(lo, hi)


def iter_records(part: RangePartition) -> Iterator[list[ConsumerRecord]]:
    """Lists of ConsumerRecords with start <= offset < end, in offset order."""
    from client import Consumer, TopicPartition

    tp = TopicPartition(part.topic, part.partition)
    pos, end = part.start, part.end
    if pos >= end:
        return
    settings: dict[str, Any] = {
        "max.poll.records": _MAX_POLL_RECORDS,
        "fetch.max.wait.ms": 100,
        "max.partition.fetch.bytes": 4 * 1024 * 1024,
        **dict(part.consumer_config),  # kafka.* options win over the defaults above ...
    }
    consumer = Consumer(
        settings,
        bootstrap_servers=part.bootstrap,
        auto_offset_reset="none",  # ... but not over these (options.py refuses them)
        enable_auto_commit=False,
    )
    try:
        consumer.assign([tp])
        consumer.seek(tp, pos)
        deadline = time.monotonic() + part.poll_timeout_ms / 1000
        while pos < end:
            try:
                recs = consumer.poll(timeout_ms=_POLL_MS)
            except (OffsetOutOfRangeError, UnknownTopicOrPartitionError) as exc:
                st = _state(consumer, tp)
                reason = data_loss_reason((tp.topic, tp.partition), pos, st) or str(exc)
                report_data_loss(reason, part.fail_on_data_loss)
                if st is None or st.log_start >= end or st.log_start <= pos:
                    return  # nothing left of this range to read
                pos = st.log_start
                consumer.seek(tp, pos)
                continue
            if not recs:
                # a compacted topic may hold no record at all in [pos, end): the consumer's
                # position moves past the offsets the log no longer has
                if consumer.position(tp) >= end:
                    return
                if time.monotonic() > deadline:
                    raise GregorTimeoutError(
                        f"{tp.topic}-{tp.partition}: no record at offset {pos} within "
                        f"pollTimeoutMs={part.poll_timeout_ms} (planned range ends at {end})"
                    )
                continue
            deadline = time.monotonic() + part.poll_timeout_ms / 1000
            if recs[0].offset > pos:
                st = _state(consumer, tp)
                if st is not None and st.log_start > pos:
                    report_data_loss(
                        data_loss_reason((tp.topic, tp.partition), pos, st) or "",
                        part.fail_on_data_loss,
                    )
            if recs[-1].offset >= end:
                recs = [r for r in recs if r.offset < end]
            if recs:
                pos = recs[-1].offset + 1
                yield recs
            else:
                pos = end
    finally:
        consumer.close()


def _headers(h: Iterable[tuple[str, bytes | None]]) -> list[tuple[str, bytes | None]]:
    return [(k, v) for k, v in h]


def read_tuples(part: RangePartition) -> Iterator[tuple[object, ...]]:
    """Rows as tuples in schema order."""
    topic, partition, hdr = part.topic, part.partition, part.include_headers
    td = dt.timedelta
    rows: list[tuple[object, ...]]
    for recs in iter_records(part):
        if hdr:
            rows = [
                (
                    r.key,
                    r.value,
                    topic,
                    partition,
                    r.offset,
                    _EPOCH + td(milliseconds=r.timestamp),
                    0,
                    _headers(r.headers),
                )
                for r in recs
            ]
        else:
            rows = [
                (
                    r.key,
                    r.value,
                    topic,
                    partition,
                    r.offset,
                    _EPOCH + td(milliseconds=r.timestamp),
                    0,
                )
                for r in recs
            ]
        yield from rows


def read_arrow(part: RangePartition, schema: Any) -> Iterator[Any]:
    """Rows as pyarrow RecordBatches matching `to_arrow_schema(schema)` exactly."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyspark.sql.pandas.types import to_arrow_schema

    pa_schema = to_arrow_schema(schema, timezone="UTC")
    types = [f.type for f in pa_schema]
    ts_type = types[5]
    g_off, g_ts, g_key, g_val, g_hdr = (itemgetter(i) for i in (2, 3, 4, 5, 6))

    def binary(values: list[bytes | None], typ: Any) -> Any:
        if values.count(None) == len(values):  # all null (keyless): pa.array is slow on None
            return pa.nulls(len(values), typ)
        return pa.array(values, typ)

    for recs in iter_records(part):
        n = len(recs)
        ms = pa.array(list(map(g_ts, recs)), pa.int64())
        cols = [
            binary(list(map(g_key, recs)), types[0]),
            binary(list(map(g_val, recs)), types[1]),
            pa.repeat(pa.scalar(part.topic, types[2]), n),
            pa.repeat(pa.scalar(part.partition, types[3]), n),
            pa.array(list(map(g_off, recs)), types[4]),
            pc.multiply(ms, 1000).cast(ts_type) if ts_type.unit == "us" else ms.cast(ts_type),
            pa.repeat(pa.scalar(0, types[6]), n),
        ]
        if part.include_headers:
            cols.append(
                pa.array(
                    [[{"key": k, "value": v} for k, v in h] for h in map(g_hdr, recs)], types[7]
                )
            )
        yield pa.RecordBatch.from_arrays(cols, schema=pa_schema)


def read_partition(part: InputPartition, schema: Any) -> Iterator[Any]:
    """Rows of one planned range (Spark hands a bare InputPartition when nothing was planned)."""
    if not isinstance(part, RangePartition):
        return iter([])
    if part.use_arrow:
        return read_arrow(part, schema)
    return read_tuples(part)
