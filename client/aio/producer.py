"""Asyncio Producer: partitioning, batching, delivery futures (aiokafka's shape).

    p = Producer(bootstrap_servers="localhost:9092", linger_ms=5)
    await p.start()                       # or `async with Producer(...) as p:`
    fut = await p.send("t", b"v", key=b"k")   # queued; fut resolves to RecordMetadata
    md = await fut
    await p.send_many("t", [b"a", b"b"])  # bulk: one future for the whole call
    await p.flush(); await p.close()

`send()` returns once the record is in the accumulator (it waits for metadata of a new topic
and for buffer space, up to max.block.ms). An explicit `partition` at or past the partition
count this client knows (the topic may have grown since) refreshes metadata with back-off until
the partition appears, up to max.block.ms, then fails with GregorTimeoutError (Kafka's
"Partition P of topic T with partition count N is not present in metadata after X ms"); a
negative partition is a ConfigError at once. Keyed records go to murmur2(key) % partitions
(Kafka's default partitioner); keyless ones stick to one partition until its batch fills.

Thread-safety: coroutines run on the producer's loop. `_try_append` and `_bulk_nowait` are also
safe from other threads (the sync facade's fast path); they never block.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections.abc import Iterable, Mapping
from time import time_ns as _time_ns
from typing import Any

from client.aio.accumulator import RECORD_OVERHEAD, BulkItems, BulkResult, RecordAccumulator
from client.aio.cluster import ClusterClient, ClusterMetadata
from client.aio.config import resolve_config
from client.aio.producer_settings import ProducerSettings
from client.aio.sender import Sender
from client.aio.transactions import TransactionManager
from client.aio.types import ConsumerGroupMetadata, RecordMetadata, TopicPartition
from client.errors import (
    ClientClosedError,
    ConfigError,
    GregorError,
    GregorTimeoutError,
    MessageTooLargeError,
    TransactionAbortedError,
    TransactionStateError,
)
from client.metrics import ProducerMetrics
from client.partitioner import StickyPartitioner, default_partition

log = logging.getLogger(__name__)


def _to_bytes(v: Any, what: str) -> bytes | None:
    if v is None or type(v) is bytes:
        return v
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    raise TypeError(
        f"{what} must be bytes, str or None (or set a {what}_serializer), got {type(v).__name__}"
    )


Headers = list[tuple[str, bytes | None]]
# a record ready to append: (timestamp ms, key, value, headers, size in bytes)
Prepared = tuple[int, bytes | None, bytes | None, Headers | None, int]


def _headers(headers: Any) -> Headers | None:
    if not headers:
        return None
    items = headers.items() if isinstance(headers, Mapping) else headers
    return [(str(k), _to_bytes(v, "header value")) for k, v in items]


def _all_bytes_or_none(items: BulkItems) -> bool:
    """True when every item is bytes or None (checked at C speed)."""
    return set(map(type, items)) <= {bytes, type(None)}


class Producer:
    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self.config = cfg = resolve_config("producer", config, kwargs)
        self.settings = settings = ProducerSettings.from_config(cfg)
        self._cluster = ClusterClient(
            cfg, allow_auto_topic_creation=settings.allow_auto_create_topics
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._wake_pending = False
        self._tps: dict[str, list[TopicPartition]] = {}  # topic -> its TopicPartitions
        # _append_plain's view of a topic: (metadata snapshot, TopicPartitions, available)
        self._plain_topics: dict[str, tuple[ClusterMetadata, list[TopicPartition], list[int]]] = {}
        # send() of a bare bytes value may skip _prepare (no serializer to run)
        self._plain = settings.value_serializer is None
        self._max_record = settings.max_request_size
        self._acc = RecordAccumulator(
            batch_size=settings.batch_size,
            linger_ms=settings.linger_ms,
            buffer_memory=settings.buffer_memory,
            max_request_size=settings.max_request_size,
            delivery_timeout_ms=settings.delivery_timeout_ms,
            wake=self._wake,
        )
        self._idempotent = settings.idempotent
        self._txn: TransactionManager | None = None  # with a transactional.id, from start()
        self._sticky = StickyPartitioner()
        self._sender: Sender | None = None
        self._started = False
        self._closed = False
        self._start_lock: asyncio.Lock | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect to a bootstrap broker and start the sender. Idempotent."""
        if self._closed:
            raise ClientClosedError("producer is closed")
        if self._started:
            return
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self._started:
                return
            self._loop = asyncio.get_running_loop()
            self._loop_thread = threading.get_ident()
            self._sender = sender = Sender(self.config, self._cluster, self._acc, self._idempotent)
            settings = self.settings
            if settings.transactional_id is not None:
                assert sender.gate.idem is not None  # (a transactional.id implies idempotence)
                sender.gate.txn = self._txn = TransactionManager(
                    settings.transactional_id,
                    settings.transaction_timeout_ms,
                    sender.gate.idem,
                    self._cluster,
                    settings,
                    sender.wake_event.set,
                )
            await self._cluster.refresh()
            self._sender.start()
            self._started = True

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self, timeout: float | None = None) -> None:
        """Deliver queued records (up to `timeout` seconds), fail the rest, disconnect."""
        if self._closed:
            return
        self._closed = True
        self._acc.closed = True
        if self._txn is not None:
            await self._txn.close()
        if self._sender is not None:
            await self._sender.stop(timeout)
        await self._cluster.close()

    def _abandon(self) -> None:
        """The loop this producer ran on has stopped (the sync facade's, after close() or when
        the producer was garbage-collected without it): no record is sent from now on, and
        every one not finished fails, its future with it (DeliveryFutures are kept out of the
        cyclic GC while they run, client/aio/futures.py: none may be left running)."""
        self._closed = True
        self._acc.closed = True
        if self._sender is not None:
            self._sender.fail_incomplete(
                ClientClosedError("the producer stopped before these records were delivered")
            )

    async def flush(self, timeout: float | None = None) -> None:
        """Wait until every record sent before this call is acknowledged or failed."""
        self._check_open()
        if not self._started:
            return
        sender = self._sender
        assert sender is not None
        done = asyncio.get_running_loop().create_future()
        countdown = self._acc.start_flush(functools.partial(_resolve, done))
        if countdown is None:
            return
        sender.flushing += 1
        sender.wake_event.set()
        try:
            await asyncio.wait_for(asyncio.shield(done), timeout)
        except TimeoutError:
            raise GregorTimeoutError(
                f"flush: {countdown.remaining} batches still undelivered after {timeout} s"
            ) from None
        finally:
            sender.flushing -= 1
            self._acc.end_flush(countdown)

    # -- transactions (docs/transactions.md, "The producer") -----------------------------------

    def _transaction(self) -> TransactionManager:
        self._check_open()
        if self._txn is None:
            raise TransactionStateError(
                "not a transactional producer: set transactional.id"
                if self.settings.transactional_id is None
                else "producer not started: call init_transactions() first"
            )
        return self._txn

    async def init_transactions(self) -> None:
        """Register the transactional.id with its coordinator (InitProducerId): fences every
        earlier producer with this id and waits for its open transaction to be aborted. Once,
        before the first begin_transaction(); up to max.block.ms (GregorTimeoutError)."""
        if self.settings.transactional_id is None:
            raise TransactionStateError("not a transactional producer: set transactional.id")
        await self.start()
        await self._transaction().init()

    def begin_transaction(self) -> None:
        """Start a transaction (no request: partitions join it as records are sent to them).
        On the producer's loop."""
        self._transaction().begin()

    async def commit_transaction(self) -> None:
        """Flush, then commit (EndTxn). If a record failed, raises; the transaction must then
        be aborted (ProducerFencedError and other fatal errors: the producer can only close)."""
        txn = self._transaction()
        txn.begin_commit()
        await self.flush()
        await txn.end(commit=True)

    async def abort_transaction(self) -> None:
        """Fail the records not yet sent (TransactionAbortedError), wait for those in flight,
        then abort (EndTxn): read_committed consumers never see the transaction's records."""
        txn = self._transaction()
        txn.begin_abort()
        assert self._sender is not None
        self._sender.abort_undrained(TransactionAbortedError("the transaction was aborted"))
        await self.flush()
        await txn.end(commit=False)

    async def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, int],
        group_metadata: ConsumerGroupMetadata | str,
    ) -> None:
        """Commit the consumer group's `offsets` ({tp: next offset to read}) as part of the
        transaction: AddOffsetsToTxn to the transaction coordinator, then TxnOffsetCommit to
        the group's coordinator. They become the group's committed offsets when the
        transaction commits, and are dropped if it aborts. `group_metadata` is
        `consumer.group_metadata()` (a bare group id skips the member check). A refused
        member (CommitFailedError family: UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH, ...) leaves
        the transaction to be aborted."""
        txn = self._transaction()
        if isinstance(group_metadata, str):
            group_metadata = ConsumerGroupMetadata(group_metadata)
        await txn.send_offsets(
            {TopicPartition(*tp): int(off) for tp, off in offsets.items()}, group_metadata
        )

    # -- sending -------------------------------------------------------------------------------

    async def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        headers: Any = None,
        timestamp_ms: int | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """Queue one record; returns a future that resolves to its RecordMetadata."""
        fut = asyncio.get_running_loop().create_future()
        await self._send_into(fut, topic, value, key, partition, headers, timestamp_ms)
        return fut

    async def send_and_wait(
        self, topic: str, value: Any = None, key: Any = None, **kw: Any
    ) -> RecordMetadata:
        return await (await self.send(topic, value, key, **kw))

    async def _send_into(
        self,
        fut: Any,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        headers: Any,
        timestamp_ms: int | None,
    ) -> None:
        """Slow path shared with the sync facade: wait for metadata and buffer space."""
        await self.start()
        deadline = time.monotonic() + self.settings.max_block_ms / 1000
        rec = self._prepare(topic, value, key, headers, timestamp_ms)
        while True:
            status = self._try_append(topic, partition, rec, fut)
            if status == "ok":
                return
            remaining = deadline - time.monotonic()
            if status == "partition":
                assert partition is not None
                await self._wait_for_partition(topic, partition, deadline)
                continue
            if remaining <= 0:
                raise GregorTimeoutError(
                    f"send to {topic!r} blocked for max.block.ms={self.settings.max_block_ms} "
                    f"({'no metadata' if status == 'metadata' else 'buffer full'})"
                )
            if status == "metadata":
                await self._cluster.wait_for_partitions(topic, remaining * 1000)
            else:
                await self._wait_for_space(remaining)

    async def _wait_for_partition(self, topic: str, partition: int, deadline: float) -> None:
        """Refresh metadata (back-off from retry.backoff.ms, doubling to 1 s) until `topic` has
        more than `partition` partitions; GregorTimeoutError at `deadline` (max.block.ms)."""
        backoff = self.settings.retry_backoff_ms / 1000
        while True:
            self._cluster.request_update()
            try:
                md = await self._cluster.refresh([topic])
                if md.num_partitions(topic) > partition:
                    return
            except GregorError as exc:
                if not exc.retriable:
                    raise
                log.debug("metadata refresh for %s-%d failed: %s", topic, partition, exc)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                n = self._cluster.metadata.num_partitions(topic)
                raise GregorTimeoutError(
                    f"partition {partition} of topic {topic!r} with partition count {n} is not "
                    f"present in metadata after {self.settings.max_block_ms} ms (max.block.ms)"
                )
            await asyncio.sleep(min(backoff, remaining))
            backoff = min(backoff * 2, 1.0)

    async def _wait_for_space(self, timeout: float) -> None:
        assert self._sender is not None
        ev = self._sender.space_freed
        ev.clear()
        try:
            await asyncio.wait_for(ev.wait(), timeout)
        except TimeoutError:
            pass

    def _prepare(
        self, topic: str, value: Any, key: Any, headers: Any, timestamp_ms: int | None
    ) -> Prepared:
        settings = self.settings
        if settings.key_serializer is not None and key is not None:
            key = settings.key_serializer(key)
        if settings.value_serializer is not None and value is not None:
            value = settings.value_serializer(value)
        key = _to_bytes(key, "key")
        value = _to_bytes(value, "value")
        hdrs = _headers(headers)
        size = RECORD_OVERHEAD + (len(value) if value else 0) + (len(key) if key else 0)
        if hdrs:
            size += sum(len(k) + len(v or b"") + 4 for k, v in hdrs)
        if size > settings.max_request_size:
            raise MessageTooLargeError(
                f"record of {size} bytes exceeds max.request.size={settings.max_request_size}"
            )
        ts = int(time.time() * 1000) if timestamp_ms is None else int(timestamp_ms)
        return ts, key, value, hdrs, size

    def _try_append(self, topic: str, partition: int | None, rec: Prepared, fut: Any) -> str:
        """Fast path, any thread: 'ok', 'metadata' (topic unknown), 'partition' (an explicit
        partition past the known count) or 'space' (buffer full)."""
        self._check_open()
        if self._txn is not None:
            self._txn.check_send()
        md = self._cluster.metadata
        n = md.num_partitions(topic)
        if n == 0:
            return "metadata"
        ts, key, value, hdrs, size = rec
        sticky = False
        if partition is None:
            if key is not None:
                partition = default_partition(key, n)
            else:
                with self._acc.lock:
                    partition = self._sticky.partition(topic, n, md.available_partitions(topic))
                sticky = True
        elif partition >= n:
            return "partition"  # maybe added since the last refresh: wait for it
        elif partition < 0:
            raise ConfigError(f"partition {partition} of {topic!r}: must be >= 0")
        tps = self._tps.get(topic)
        if tps is None or partition >= len(tps):  # (kept: no new tuple per record)
            tps = self._tps[topic] = [TopicPartition(topic, p) for p in range(n)]
        ok, full = self._acc.try_append(tps[partition], ts, key, value, hdrs, size, fut)
        if not ok:
            return "space"
        if full and sticky:
            with self._acc.lock:
                self._sticky.next_partition(topic, partition, n, md.available_partitions(topic))
        return "ok"

    def _append_plain(
        self, topic: str, value: bytes, fut: Any, partition: int | None = None
    ) -> bool:
        """The per-record fast path, any thread: a keyless `bytes` value with no headers or
        timestamp, appended to `partition`, or without one to the sticky partition. False when
        it cannot be taken here (topic unknown, a partition it does not know of, record too
        large, buffer full): the caller takes the general path, which waits or raises. What it
        saves against _prepare + _try_append is calls and lookups per record: the topic's
        partitions are cached per metadata snapshot, and the sticky choice and the append
        share one acquisition of the accumulator's lock. With a partition it is the path of a
        record that starts a batch (the C append takes the others), which a send() loop over
        many partitions takes every few dozen records."""
        if self._closed:
            raise ClientClosedError("producer is closed")
        if self._txn is not None:
            self._txn.check_send()
        st = self._plain_view(topic)
        if st is None:
            return False
        size = RECORD_OVERHEAD + len(value)
        if size > self._max_record:
            return False
        ts = _time_ns() // 1_000_000
        if partition is None:
            return self._acc.append_sticky(self._sticky, topic, st[1], st[2], ts, value, size, fut)
        tps = st[1]
        if not 0 <= partition < len(tps):
            return False  # (one added since the snapshot, or an error the caller words)
        return self._acc.try_append(tps[partition], ts, None, value, None, size, fut)[0]

    def _plain_view(
        self, topic: str
    ) -> tuple[ClusterMetadata, list[TopicPartition], list[int]] | None:
        """`topic`'s (metadata snapshot, TopicPartitions, available partitions) as of the
        current snapshot, cached per snapshot; None when the topic is unknown. Any thread (a
        race makes the same tuple twice)."""
        md = self._cluster.metadata
        st = self._plain_topics.get(topic)
        if st is None or st[0] is not md:
            n = md.num_partitions(topic)
            if n == 0:
                return None
            tps = self._tps.get(topic)
            if tps is None or len(tps) != n:
                tps = self._tps[topic] = [TopicPartition(topic, p) for p in range(n)]
            st = self._plain_topics[topic] = (md, tps, md.available_partitions(topic))
        return st

    async def send_many(
        self, topic: str, values_or_pairs: Iterable[Any], partition: int | None = None
    ) -> asyncio.Future[int]:
        """Queue many records without per-record futures. Items are values, or (key, value)
        pairs. Returns one future: the number of records once all are acknowledged, or the
        first error."""
        fut = asyncio.get_running_loop().create_future()
        await self._send_many_into(fut, topic, values_or_pairs, partition)
        return fut

    async def _send_many_into(
        self, fut: Any, topic: str, values_or_pairs: Iterable[Any], partition: int | None
    ) -> None:
        await self.start()
        items = values_or_pairs if isinstance(values_or_pairs, list) else list(values_or_pairs)
        deadline = time.monotonic() + self.settings.max_block_ms / 1000
        if self._cluster.metadata.num_partitions(topic) == 0:
            await self._cluster.wait_for_partitions(topic, self.settings.max_block_ms)
        if partition is not None and partition >= self._cluster.metadata.num_partitions(topic):
            await self._wait_for_partition(topic, partition, deadline)
        while self._acc.buffered > 0 and self._acc.buffered >= self.settings.buffer_memory:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise GregorTimeoutError("send_many blocked for max.block.ms (buffer full)")
            await self._wait_for_space(remaining)
        self._bulk_nowait(fut, topic, items, partition)

    def _bulk_nowait(
        self, fut: Any, topic: str, items: BulkItems, partition: int | None
    ) -> BulkResult:
        """Append `items` (metadata for `topic` must be known). Any thread."""
        self._check_open()
        if self._txn is not None:
            self._txn.check_send()
        settings = self.settings
        md = self._cluster.metadata
        n = md.num_partitions(topic)
        if n == 0:
            raise GregorTimeoutError(f"no metadata for topic {topic!r}")
        bulk = BulkResult(fut)
        ts = int(time.time() * 1000)
        keyed = bool(items) and isinstance(items[0], tuple)
        if keyed:
            items = [self._serialize_pair(kv) for kv in items]
        elif settings.value_serializer is not None or not _all_bytes_or_none(items):
            items = [self._serialize_value(v) for v in items]
        try:
            if partition is not None:
                if not 0 <= partition < n:
                    raise ConfigError(
                        f"partition {partition} out of range: {topic!r} has {n} partitions"
                    )
                self._acc.append_bulk(TopicPartition(topic, partition), ts, items, bulk, keyed)
            elif keyed:
                groups: dict[int, BulkItems] = {}
                sticky_items: BulkItems = []
                for kv in items:
                    if kv[0] is None:
                        sticky_items.append(kv)
                    else:
                        groups.setdefault(default_partition(kv[0], n), []).append(kv)
                for p, group in groups.items():
                    self._acc.append_bulk(TopicPartition(topic, p), ts, group, bulk, True)
                if sticky_items:
                    self._bulk_sticky(topic, n, md, ts, sticky_items, bulk, True)
            else:
                self._bulk_sticky(topic, n, md, ts, items, bulk, False)
        finally:
            bulk.seal()
        return bulk

    def _bulk_sticky(
        self, topic: str, n: int, md: Any, ts: int, items: BulkItems, bulk: BulkResult, keyed: bool
    ) -> None:
        with self._acc.lock:
            p = self._sticky.partition(topic, n, md.available_partitions(topic))
        if self._acc.append_bulk(TopicPartition(topic, p), ts, items, bulk, keyed):
            with self._acc.lock:
                self._sticky.next_partition(topic, p, n, md.available_partitions(topic))

    def _serialize_value(self, v: Any) -> bytes | None:
        if self.settings.value_serializer is not None and v is not None:
            v = self.settings.value_serializer(v)
        return _to_bytes(v, "value")

    def _serialize_pair(self, kv: Any) -> tuple[bytes | None, bytes | None]:
        settings = self.settings
        k, v = kv
        if settings.key_serializer is not None and k is not None:
            k = settings.key_serializer(k)
        if settings.value_serializer is not None and v is not None:
            v = settings.value_serializer(v)
        return _to_bytes(k, "key"), _to_bytes(v, "value")

    # -- metadata ------------------------------------------------------------------------------

    def metrics(self) -> dict[str, dict[str, float]]:
        """kafka-python's `producer.metrics()`: {"producer-metrics": {name: value}} with record,
        byte, request and retry/error rates, batch sizes and request latency (ms), over the
        last 30-60 s (client/metrics.py; docs/client.md, "Metrics"). On the loop thread."""
        sender = self._sender
        return (ProducerMetrics() if sender is None else sender.metrics).snapshot()

    async def partitions_for(self, topic: str) -> list[int]:
        """The partition ids of `topic` (waits for its metadata up to max.block.ms)."""
        await self.start()
        md = await self._cluster.wait_for_partitions(topic, self.settings.max_block_ms)
        return md.partitions_for(topic) or []

    # -- internals -----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("producer is closed")

    def _wake(self) -> None:
        """Wake the sender: directly on the loop thread, else via call_soon_threadsafe (once)."""
        sender = self._sender
        if sender is None:
            return
        if threading.get_ident() == self._loop_thread:
            sender.wake_event.set()
        elif not self._wake_pending:
            self._wake_pending = True
            assert self._loop is not None
            self._loop.call_soon_threadsafe(self._wake_from_thread)

    def _wake_from_thread(self) -> None:
        self._wake_pending = False
        if self._sender is not None:
            self._sender.wake_event.set()


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
