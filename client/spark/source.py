"""The `gregor` PySpark Python Data Source: batch and streaming readers.

    from client.spark import register; register(spark)
    spark.read.format("gregor").option("bootstrap.servers", "h:p").option("subscribe", "t").load()

Output schema = Spark's Kafka source: key binary, value binary, topic string, partition int,
offset long, timestamp timestamp, timestampType int (+ headers array<struct<key string, value
binary>> with includeHeaders=true). Options: see client/spark/options.py and docs/spark.md.

Threads/processes: the DataSource and readers live on the driver's Python workers; readers are
pickled into executor workers, so they hold no open client there (`__getstate__` drops the
Planner) and `read()` opens its own Consumer per task (client/spark/task.py).
"""

from __future__ import annotations

import logging
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from client.errors import ConfigError
from client.spark.errors import surfaced, surfaced_iter
from client.spark.offsets import (
    EARLIEST_SENTINEL,
    LATEST_SENTINEL,
    READ_NEW_TOPIC,
    TP,
    OffsetRange,
    OffsetsJson,
    PartitionState,
    data_loss_reason,
    from_json,
    ids_from_json,
    plan_ranges,
    rate_limit,
    recreated,
    recreated_reason,
    report_data_loss,
    to_json,
)
from client.spark.options import SourceOptions, parse_sink_options, parse_source_options
from client.spark.planner import Planner
from client.spark.task import RangePartition, read_partition

log = logging.getLogger(__name__)

_HEADERS = ArrayType(
    StructType([StructField("key", StringType(), True), StructField("value", BinaryType(), True)]),
    True,
)


def source_schema(include_headers: bool) -> StructType:
    fields = [
        StructField("key", BinaryType(), True),
        StructField("value", BinaryType(), True),
        StructField("topic", StringType(), True),
        StructField("partition", IntegerType(), True),
        StructField("offset", LongType(), True),
        StructField("timestamp", TimestampType(), True),
        StructField("timestampType", IntegerType(), True),
    ]
    if include_headers:
        fields.append(StructField("headers", _HEADERS, True))
    return StructType(fields)


def _to_partitions(opts: SourceOptions, ranges: list[OffsetRange]) -> list[RangePartition]:
    return [
        RangePartition(
            i,
            opts.bootstrap_servers,
            r.topic,
            r.partition,
            r.start,
            r.end,
            opts.include_headers,
            opts.fail_on_data_loss,
            opts.use_arrow,
            opts.poll_timeout_ms,
            opts.consumer_config,
        )
        for i, r in enumerate(ranges)
    ]


class _PlannerHolder:
    """A lazily opened Planner that is never pickled."""

    opts: SourceOptions
    _planner: Planner | None = None

    @property
    def planner(self) -> Planner:
        if self._planner is None:
            self._planner = Planner(self.opts)
        return self._planner

    def _close_planner(self) -> None:
        if self._planner is not None:
            p, self._planner = self._planner, None
            p.close()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_planner"] = None
        return state


class GregorBatchReader(_PlannerHolder, DataSourceReader):
    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema

    @surfaced
    def partitions(self) -> list[RangePartition]:
        o = self.opts
        try:
            pl = self.planner
            state = pl.state()
            pl.check_missing(state, batch=True)
            # a topic recreated since the JSON offsets were taken: its new records, all of them
            starting = pl.forget_recreated(o.starting, state, "startingOffsets", EARLIEST_SENTINEL)
            ending = pl.forget_recreated(o.ending, state, "endingOffsets", LATEST_SENTINEL)
            start = pl.resolve(starting, state, "earliest", "startingOffsets")
            end = pl.resolve(ending, state, "latest", "endingOffsets")
        finally:
            self._close_planner()
        eff: dict[TP, int] = {}
        for tp, s in sorted(start.items()):
            st = state[tp]
            e = end[tp]
            if e > st.high_watermark:
                raise ConfigError(
                    f"option 'endingOffsets': {tp[0]}/{tp[1]} = {e} is beyond the high "
                    f"watermark {st.high_watermark}"
                )
            if e < s:
                raise ConfigError(
                    f"option 'endingOffsets': {tp[0]}/{tp[1]} = {e} is before the starting "
                    f"offset {s} (startingOffsets)"
                )
            reason = data_loss_reason(tp, s, st)
            if reason is not None:
                report_data_loss(reason, o.fail_on_data_loss)
                s = min(max(s, st.log_start), e)
            eff[tp] = s
        ranges = plan_ranges(eff, end, o.min_partitions)
        log.info("batch plan: %d ranges, %d records", len(ranges), sum(r.size for r in ranges))
        return _to_partitions(o, ranges)

    def read(self, partition: InputPartition) -> Any:
        # (a bare InputPartition when nothing was planned)
        return surfaced_iter(read_partition(partition, self.schema))


class GregorStreamReader(_PlannerHolder, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader. Offsets: {"topic": {"partition": next offset, "topicId": id}}.

    A topic whose id in the start offset is not the one in the end offset was deleted and
    recreated in between: reported as data loss (raised with failOnDataLoss=true), else the new
    topic is read from its earliest offset. Start offsets without ids (written before ids were
    kept) compare nothing; the end offset carries them, so the next batch does."""

    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self._initial: OffsetsJson | None = None
        self._target: dict[TP, int] | None = None  # Trigger.AvailableNow cap

    @surfaced
    def initialOffset(self) -> OffsetsJson:
        if self._initial is None:  # Spark may call this more than once: answer the same
            pl = self.planner
            state = pl.state()
            pl.check_missing(state, batch=False)
            spec = pl.forget_recreated(
                self.opts.starting, state, "startingOffsets", EARLIEST_SENTINEL
            )
            start = pl.resolve(spec, state, "latest", "startingOffsets")
            self._initial = to_json(start, pl.topic_ids)
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    @surfaced
    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {tp: st.high_watermark for tp, st in self.planner.state().items()}
        log.info("availableNow target: %s", to_json(self._target))

    @surfaced
    def latestOffset(self, start: OffsetsJson, limit: ReadLimit) -> OffsetsJson:
        state = self.planner.state()
        ids = self.planner.topic_ids
        s = from_json(start)
        renewed = recreated(ids_from_json(start), ids)  # partitions() reports them
        if self._target is not None:  # nothing added after prepareForTriggerAvailableNow
            state = {
                tp: PartitionState(st.log_start, min(st.high_watermark, self._target[tp]))
                for tp, st in state.items()
                if tp in self._target
            }
        # effective start without reporting (partitions() reports, once per batch)
        eff: dict[TP, int] = {}
        for tp, st in state.items():
            w = st.log_start if tp[0] in renewed else s.get(tp, st.log_start)
            eff[tp] = min(max(w, st.log_start), st.high_watermark)
        end = {tp: st.high_watermark for tp, st in state.items()}
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(eff, end, limit.max_rows)
        return to_json(end, ids)

    @surfaced
    def reportLatestOffset(self) -> OffsetsJson | None:
        state = self.planner.state()
        return to_json({tp: st.high_watermark for tp, st in state.items()}, self.planner.topic_ids)

    @surfaced
    def partitions(self, start: OffsetsJson, end: OffsetsJson) -> list[RangePartition]:
        s, e = from_json(start), from_json(end)
        fail = self.opts.fail_on_data_loss
        renewed = recreated(ids_from_json(start), ids_from_json(end))
        for t, (old, new) in renewed.items():
            report_data_loss(recreated_reason(t, old, new), fail, READ_NEW_TOPIC)
        state = self.planner.state() if s != e or renewed else {}
        eff: dict[TP, int] = {}
        for tp, w in sorted(s.items()):
            if tp[0] in renewed:  # the old topic's offsets say nothing of the new one
                continue
            if tp not in e:
                st = state.get(tp)
                reason = data_loss_reason(tp, w, None if st is None else st)
                report_data_loss(reason or data_loss_reason(tp, w, None) or "", fail)
                continue
            if e[tp] < w:
                st = state.get(tp) or PartitionState(e[tp], e[tp])
                trunc = PartitionState(min(st.log_start, e[tp]), e[tp])
                report_data_loss(data_loss_reason(tp, w, trunc) or "", fail)
                continue
            st = state.get(tp)
            if st is not None and w < st.log_start and e[tp] > w:
                report_data_loss(data_loss_reason(tp, w, st) or "", fail)
                w = min(st.log_start, e[tp])
            eff[tp] = w
        for tp in e:
            if tp not in s or tp[0] in renewed:  # new partition or topic: from its beginning
                st = state.get(tp)
                if tp[0] not in renewed:
                    log.info("new partition %s-%d discovered", tp[0], tp[1])
                eff[tp] = min(st.log_start if st is not None else 0, e[tp])
        ranges = plan_ranges(eff, e, self.opts.min_partitions)
        return _to_partitions(self.opts, ranges)

    def read(self, partition: InputPartition) -> Any:
        # (a bare InputPartition when nothing was planned)
        return surfaced_iter(read_partition(partition, self.schema))

    def commit(self, end: OffsetsJson) -> None:
        log.debug("committed %s", end)

    def stop(self) -> None:
        self._close_planner()


class GregorDataSource(DataSource):
    """`format("gregor")`: Spark's Kafka source/sink semantics against a Gregor cluster."""

    @classmethod
    def name(cls) -> str:
        return "gregor"

    def _include_headers(self) -> bool:
        raw = str(self.options.get("includeHeaders", "false")).strip().lower()
        if raw not in ("true", "false"):
            raise ConfigError(
                f"option 'includeHeaders': {raw!r} is not a boolean (accepted: true, false)"
            )
        return raw == "true"

    @surfaced
    def schema(self) -> StructType:
        if any(k in self.options for k in ("subscribe", "subscribePattern", "assign")):
            # reader options: validate now so a bad one fails at load(); batch/streaming-only
            # rules are checked again by reader()/streamReader()
            parse_source_options(self.options, batch=None)
        return source_schema(self._include_headers())

    @surfaced
    def reader(self, schema: StructType) -> DataSourceReader:
        return GregorBatchReader(parse_source_options(self.options, batch=True), schema)

    @surfaced
    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return GregorStreamReader(parse_source_options(self.options, batch=False), schema)

    @surfaced
    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from client.spark.sink import GregorWriter

        return GregorWriter(parse_sink_options(self.options, schema.fieldNames()), schema)

    @surfaced
    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from client.spark.sink import GregorStreamWriter

        return GregorStreamWriter(parse_sink_options(self.options, schema.fieldNames()), schema)
