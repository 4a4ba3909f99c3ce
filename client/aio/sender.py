"""The producer's sender: one task on the event loop that drains ready batches from the
accumulator, groups them by partition leader into Produce requests, and completes or retries
them from the responses.

    loop: clear wake-up -> refresh metadata if stale (background) -> drain ready batches ->
          one Produce per leader (tasks; the connection bounds requests in flight) -> wait for a
          wake-up (append, answer, flush, close) or the next linger/back-off deadline

Retriable errors (NOT_LEADER_OR_FOLLOWER, timeouts, lost connections, ...) put the batches back
at the head of their partition after retry.backoff.ms (with a metadata refresh for leader
errors) until `retries` or delivery.timeout.ms run out. A leader in reconnect back-off is not
sent to: the metadata is asked again every retry.backoff.ms until a leader answers. The
partition stays muted while its request is in flight, so records of one partition are written
in send order, and a retried request goes out again with the same batches.

An idempotent or transactional producer's producer id, sequence numbers and transaction are
its `ProducerGate`'s (client/aio/producer_gate.py): the sender asks it which batches may go and
tells it which failed.

A partition whose sends keep failing that way, and InitProducerId or metadata requests that
keep failing, are reported through `RetryLog` (client/aio/retry_log.py): a WARNING naming the
error, the partition and the broker at the first failure, then at most one every 10 s with
the number of retries since, and an INFO once it works again.

Every task the sender starts (its loop, one per Produce request, InitProducerId, metadata
refreshes) is cancelled and awaited by `stop()`: closing a producer in any state leaves no
task pending on its loop.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from client.aio.accumulator import ProducerBatch, RecordAccumulator
from client.aio.cluster import ClusterClient
from client.aio.futures import ack_delivery_futures
from client.aio.link_settings import SenderSettings
from client.aio.producer_gate import ProducerGate
from client.aio.retry_log import RetryLog
from client.aio.types import RecordMetadata, TopicPartition
from client.errors import (
    ClientClosedError,
    ConnectionFailedError,
    ErrorCode,
    GregorError,
    GregorTimeoutError,
    error_for_code,
)
from client.metrics import ProducerMetrics
from client.protocol import VECTORED_MIN_BYTES, ApiKey, BinParts
from client.protocol.body import Body
from client.records import build_batch

log = logging.getLogger(__name__)

_METADATA_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.KAFKA_STORAGE_ERROR,
        # the leader could not reach its followers in time: often a leader cut off from the
        # cluster, which another broker's metadata already shows replaced
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    }
)


class Sender:
    """Loop-owned. Started by Producer.start(), stopped by Producer.close()."""

    def __init__(
        self,
        config: SimpleNamespace,
        cluster: ClusterClient,
        acc: RecordAccumulator,
        idempotent: bool = False,
    ) -> None:
        self.settings = SenderSettings.from_config(config)  # (config: resolve_config's)
        self.cluster = cluster
        self.acc = acc
        self.wake_event = asyncio.Event()
        self.muted: set[TopicPartition] = set()
        self.flushing = 0
        self.stopping = False
        self.stopping_hard = False
        self._task: asyncio.Task[None] | None = None
        self._requests: set[asyncio.Task[None]] = set()
        self._busy_nodes: dict[int, int] = {}  # node -> produce requests in flight to it
        self._refresh: asyncio.Task[None] | None = None
        self.space_freed = asyncio.Event()
        self.idle = asyncio.Event()
        self.retry_log = RetryLog(log)
        self.metrics = ProducerMetrics()  # Producer.metrics(): per request and batch
        self.gate = ProducerGate(
            idempotent,
            cluster,
            acc.queued,
            self.retry_log,
            self.settings.retry_backoff_ms,
            self.wake_event.set,
        )

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        acc = self.acc
        while True:
            self.wake_event.clear()
            now = time.monotonic()
            if self.cluster.stale and (self._refresh is None or self._refresh.done()):
                self._refresh = asyncio.ensure_future(self._refresh_metadata())
            next_at = self._drain_and_dispatch(now)
            if self.muted and self._encode_ahead():
                # One batch per turn, then let the loop run: socket writes of the request in
                # flight and reads of its answer interleave with encoding instead of waiting
                # for a whole request's worth of it.
                await asyncio.sleep(0)
                continue
            if not self._requests and not acc.has_queued():
                self.idle.set()
                if self.stopping:
                    return
            else:
                self.idle.clear()
            timeout = None if next_at is None else max(0.0, next_at - time.monotonic())
            if timeout is None or timeout > 0:
                try:
                    await asyncio.wait_for(self.wake_event.wait(), timeout)
                except TimeoutError:
                    pass

    def _drain_and_dispatch(self, now: float) -> float | None:
        """Expire, drain and start a request per leader for what is ready; returns when to
        look again (None: when woken). The loop's step, and an answered request's first."""
        acc = self.acc
        if self.gate.blocked:
            # no producer id yet (or a new one after a reset): nothing is sent until it
            # comes, but batches still expire
            self.gate.ask_producer_id()
            ready: dict[TopicPartition, list[ProducerBatch]] = {}
            expired, next_at = acc.pop_expired(now), None
        else:
            force = self.flushing > 0 or self.stopping
            ready, expired, next_at = acc.drain(
                now, self.muted, force, None if force else self._held()
            )
        for b in expired:
            self._finish(b, self._expired(b))
        if ready:
            next_at = self._dispatch(ready, now, next_at)
        return next_at

    def _held(self) -> Callable[[TopicPartition], bool] | None:
        """Whether a partition's lingered, not yet full batches wait (and keep filling): while
        its leader is answering an earlier produce request of this producer. The broker reads
        one request per connection at a time, so a second request would only wait in its
        socket, and splitting the partitions into groups of their own requests cost a
        group-commit round and per-request work each, in batches half the size (one producer
        over 5,000 partitions: 20-70 requests per 200,000 records instead of 4, 8 records per
        batch instead of 15). Full batches and retries go at once, up to
        max.in.flight.requests.per.connection; flush() and close() send everything."""
        busy = self._busy_nodes
        if not busy:
            return None
        leader_for = self.cluster.metadata.leader_for
        return lambda tp: leader_for(tp) in busy

    def _encode_ahead(self) -> bool:
        """Encode one full batch of a partition whose request is in flight, so the next request
        is ready the moment the answer arrives (encoding overlaps the broker's append and
        fsync instead of following it). Returns True if it encoded one."""
        if self.gate.blocked:
            return False
        todo = self.acc.full_unencoded(self.muted, self.settings.max_request_size)
        if not todo:
            return False
        self._encode(todo[0])
        return True

    def _encode(self, b: ProducerBatch) -> None:
        """Build the batch's payload; with idempotence, numbered once (retries resend it)."""
        pid, epoch, seq = self.gate.numbers(b)  # (numbered by _dispatch, or earlier)
        b.payload = build_batch(
            b.entries,
            compression=self.settings.compression_type,
            timestamp_ms=b.timestamp_ms,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            is_transactional=self.gate.transactional,
        )

    async def _refresh_metadata(self) -> None:
        try:
            await self.cluster.refresh()
            self.retry_log.succeeded("metadata")
        except GregorError as exc:
            self.retry_log.failed("metadata", "metadata refresh", exc)
            await asyncio.sleep(self.settings.retry_backoff_ms / 1000)
        finally:
            self.wake_event.set()

    def _dispatch(
        self, ready: dict[TopicPartition, list[ProducerBatch]], now: float, next_at: float | None
    ) -> float | None:
        md = self.cluster.metadata
        by_node: dict[int, list[tuple[TopicPartition, list[ProducerBatch]]]] = {}
        backoff = now + self.settings.retry_backoff_ms / 1000
        usable: dict[int, bool] = {}  # leader -> known and not backing off (asked once each)
        number = self.gate.number
        leader_for = md.leader_for
        ready, held, failed = self.gate.admit(ready)
        for b, error in failed:  # the transaction must be aborted: nothing more goes
            self._finish(b, error)
        for batches in held:  # AddPartitionsToTxn first (it wakes the loop when done)
            self.acc.reenqueue(batches, 0.0)
        for tp, batches in ready.items():
            leader = leader_for(tp)
            ok = usable.get(leader)
            if ok is None:
                ok = usable[leader] = (
                    leader >= 0 and leader in md.brokers and self.cluster.connect_delay(leader) <= 0
                )
            if not ok:
                # No leader, or one that just refused a connection: look at fresh metadata
                # every retry.backoff.ms instead of waiting out the reconnect back-off, so a
                # new leader is used as soon as the cluster names it (Kafka's Sender skips
                # nodes that are not ready the same way).
                self.cluster.request_update()
                self.retry_log.failed(
                    tp,
                    f"produce to {tp.topic}-{tp.partition}",
                    "no leader in the metadata"
                    if leader < 0 or leader not in md.brokers
                    else f"leader broker {leader} unreachable (reconnect back-off)",
                    grace_s=2.0,  # (a leader election or a new topic: routine for a moment)
                )
                self.acc.reenqueue(batches, backoff)  # keep order; look again after back-off
                next_at = backoff if next_at is None else min(next_at, backoff)
                continue
            if number is not None:  # numbered now, in queue order, before any encoding ahead
                for b in batches:
                    number(b)
            by_node.setdefault(leader, []).append((tp, batches))
        for node, parts in by_node.items():
            for tp, _ in parts:
                self.muted.add(tp)
            busy = _Busy(self._busy_nodes, node)
            task = asyncio.ensure_future(self._send(node, parts, busy))
            self._requests.add(task)
            task.add_done_callback(functools.partial(self._request_done, busy))
        return next_at

    def _request_done(self, busy: _Busy, task: asyncio.Task[None]) -> None:
        self._requests.discard(task)
        busy.release()
        self.wake_event.set()  # the loop may be waiting for in-flight requests to end
        if not task.cancelled() and task.exception() is not None:
            log.error("produce request task failed", exc_info=task.exception())

    async def _send(
        self,
        node: int,
        parts: list[tuple[TopicPartition, list[ProducerBatch]]],
        busy: _Busy,
    ) -> None:
        cfg = self.settings
        topics: dict[str, list[Body]] = {}
        nbytes = 0
        if self.gate.blocked:
            # the producer id was reset since these were drained: send them under the next one
            for tp, batches in parts:
                self.muted.discard(tp)
                self.gate.unnumber_unsent(batches)
                self.acc.reenqueue(batches, 0.0)
            self.wake_event.set()
            return
        big = 0  # bytes of partitions with at least VECTORED_MIN_BYTES of batches
        several: list[Body] = []  # partitions with more than one batch in this request
        try:
            for tp, batches in parts:
                if len(batches) == 1:
                    b = batches[0]
                    if b.payload is None:
                        self._encode(b)
                    records: Any = b.payload
                    n = len(records)
                else:
                    for b in batches:
                        if b.payload is None:
                            self._encode(b)
                    records = [b.payload for b in batches]
                    n = sum(map(len, records))
                nbytes += n
                if n >= VECTORED_MIN_BYTES:
                    big += n
                entry = {"partition": tp.partition, "records": records}
                if type(records) is list:
                    several.append(entry)
                topics.setdefault(tp.topic, []).append(entry)
        except GregorError as exc:  # e.g. MissingCodecError: not retriable
            for tp, batches in parts:
                self.muted.discard(tp)
                for b in batches:
                    self._finish(b, exc)
            self.wake_event.set()
            return
        # A request made mostly of large partitions is written as its batches' own buffers
        # (no join, no packb copy). Anything else is one packb'd frame: below
        # VECTORED_MIN_BYTES a bin is copied either way, and the vectored encoder walks the
        # body in Python (~0.85 us per partition against ~0.1 us in packb: a request of 500
        # one-record batches took 424 us instead of 57 us).
        vectored = nbytes >= VECTORED_MIN_BYTES and 2 * big >= nbytes
        for entry in several:
            bufs = entry["records"]
            entry["records"] = BinParts(bufs) if vectored else b"".join(bufs)
        body = {
            "transactional_id": None,
            "acks": cfg.acks,
            "timeout_ms": cfg.request_timeout_ms,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        }
        sent_at = time.monotonic()
        try:
            resp = await self.cluster.send(
                node,
                ApiKey.PRODUCE,
                body,
                # the broker answers by its own timeout_ms; the margin covers the trip back
                # without keeping a stalled leader's batches much longer than asked
                timeout_ms=cfg.request_timeout_ms
                + min(5000, max(500, cfg.request_timeout_ms // 4)),
                expect_response=cfg.acks != 0,
                vectored=vectored,
            )
        except asyncio.CancelledError:
            closed = ClientClosedError("producer closed before these records were acknowledged")
            for tp, batches in parts:
                self.muted.discard(tp)
                for b in batches:
                    self._finish(b, closed)
            raise
        except Exception as exc:
            failure = exc
            if not isinstance(exc, GregorError):  # a bug below us: logged, batches not stranded
                log.exception("sending a produce request to broker %d failed unexpectedly", node)
                failure = ConnectionFailedError(f"produce request to broker {node} failed: {exc!r}")
                failure.__cause__ = exc
            self.cluster.request_update(avoid=node)
            for tp, batches in parts:
                self._retry_or_fail(tp, batches, failure, node)
            self.wake_event.set()
            return
        m = self.metrics
        m.requests.record(time.monotonic() - sent_at)
        m.bytes.record(nbytes)
        for _tp, batches in parts:
            for b in batches:
                m.batch_size.record(len(b.payload) if b.payload is not None else 0)
                m.batch_records.record(len(b.entries))
        if resp is None:  # acks=0
            for tp, batches in parts:
                self.muted.discard(tp)
                for b in batches:
                    self._finish(b, None, -1, -1)
            self.wake_event.set()
            return
        m.throttle.record(resp.get("throttle_time_ms", 0))
        answered: dict[tuple[str, int], Body] = {}  # (a TopicPartition finds its tuple key)
        for t in resp["topics"]:
            name = t["name"]
            for p in t["partitions"]:
                answered[(name, p["partition"])] = p
        acked: list[tuple[list[ProducerBatch], int, int]] = []
        failing = self.retry_log.failing
        for tp, batches in parts:
            got = answered.get(tp)
            if got is None:
                self._retry_or_fail(
                    tp,
                    batches,
                    error_for_code(ErrorCode.UNKNOWN_SERVER_ERROR)(
                        f"Produce response from broker {node} lacks {tp.topic}-{tp.partition}"
                    ),
                    node,
                )
                continue
            code = got["error_code"]
            if code:
                msg = f"{tp.topic}-{tp.partition}"
                if got["error_message"]:
                    msg += f": {got['error_message']}"
                err = error_for_code(code)(msg)
                if code in _METADATA_ERRORS:  # asked of another broker than this leader
                    self.cluster.request_update(avoid=node)
                self._retry_or_fail(tp, batches, err, node)
                continue
            self.muted.discard(tp)
            if failing and tp in failing:
                self.retry_log.succeeded(tp)
            acked.append((batches, got["base_offset"], got["log_append_time_ms"]))
        busy.release()
        if acked:
            # The leader is free: its next request goes out first (drained now, encoded and
            # written by the new request's task on the loop's next turn, before this one
            # resumes), and only then are these futures resolved (a few microseconds each), so
            # that work overlaps the leader's append of the next request instead of coming
            # before it. Cancelled meanwhile (a hard close), they are still resolved.
            self._drain_and_dispatch(time.monotonic())
            try:
                await asyncio.sleep(0)
            finally:
                self._complete(acked)
        self.wake_event.set()

    def _complete(self, acked: list[tuple[list[ProducerBatch], int, int]]) -> None:
        """Acknowledged batches: their buffer space freed under one lock, then their futures
        resolved, each batch's records from its base offset on."""
        self.acc.release_many([b for batches, _, _ in acked for b in batches])
        self.space_freed.set()
        records = self.metrics.records
        for batches, offset, append_time in acked:
            for b in batches:  # one request may carry several batches of a partition
                count = len(b.entries)  # _acked frees the entries
                _acked(b, offset, append_time)
                records.record(count)
                offset += count

    def _expired(self, b: ProducerBatch) -> GregorTimeoutError:
        """The error of a batch that ran out of delivery.timeout.ms: it names the last error
        its attempts met (e.g. KAFKA_STORAGE_ERROR from a broker whose log dir is offline),
        also kept as its `__cause__`."""
        msg = (
            f"{b.tp.topic}-{b.tp.partition}: {len(b.entries)} records expired after "
            f"delivery.timeout.ms={self.settings.delivery_timeout_ms}"
        )
        last = b.last_error
        if last is not None:
            msg += f" ({b.attempts} attempt(s); last error: {last})"
        err = GregorTimeoutError(msg)
        err.__cause__ = last
        return err

    def _retry_or_fail(
        self, tp: TopicPartition, batches: list[ProducerBatch], exc: BaseException, node: int
    ) -> None:
        self.muted.discard(tp)
        now = time.monotonic()
        retriable = getattr(exc, "retriable", False) and not self.stopping_hard
        if self.stopping_hard and getattr(exc, "retriable", False):
            # not retried only because close()'s timeout ran out: the record fails as the rest
            # of the producer's do then (Kafka's "closed forcefully"), the broker's error as
            # its cause
            closed = ClientClosedError("producer closed before these records were delivered")
            closed.__cause__ = exc
            exc = closed
        if self.gate.producer_id_unknown(exc, batches):  # sent again under a new producer id
            retriable = not self.stopping_hard
        keep: list[ProducerBatch] = []
        for b in batches:
            b.failed_attempt(exc)
            if not retriable or b.attempts > self.settings.retries:
                self._finish(b, exc)
            elif b.deadline <= now:
                # out of delivery.timeout.ms while this attempt was in flight: the same
                # timeout error (naming this last error) as a batch that expires in the queue
                self._finish(b, self._expired(b))
            else:
                keep.append(b)
        if keep:
            for b in keep:
                self.metrics.retries.record(len(b.entries))
            log.debug(
                "retrying %d batch(es) of %s-%d after %s (attempt %d)",
                len(keep),
                tp.topic,
                tp.partition,
                exc,
                keep[0].attempts,
            )
            self.retry_log.failed(tp, f"produce to {tp.topic}-{tp.partition} (broker {node})", exc)
            self.acc.reenqueue(keep, now + self.settings.retry_backoff_ms / 1000)

    def _finish(
        self,
        b: ProducerBatch,
        error: BaseException | None,
        base_offset: int = -1,
        append_time: int = -1,
    ) -> None:
        """Resolve every future of the batch and free its buffer space."""
        if error is not None:
            self.gate.batch_failed(b, error)
        self.acc.release(b)
        self.space_freed.set()
        if error is None:
            self.metrics.records.record(len(b.entries))
            _acked(b, base_offset, append_time)
            return
        self.metrics.errors.record(len(b.entries))
        if not isinstance(error, ClientClosedError):
            log.warning(
                "failed to deliver %d records to %s-%d: %s",
                len(b.entries),
                b.tp.topic,
                b.tp.partition,
                error,
            )
        for fut in b.futures[1::2]:
            if not fut.done():
                fut.set_exception(error)
        for bulk in b.bulks:
            bulk.batch_done(error)
        b.entries = []  # free the records; payload too
        b.payload = None

    def abort_undrained(self, error: BaseException) -> None:
        """abort_transaction(): fail every batch not yet sent (Kafka's abortUndrainedBatches);
        those in flight are answered as they are."""
        for b in self.acc.take_all():
            self._finish(b, error)

    def fail_incomplete(self, error: BaseException) -> None:
        """Fail every batch made and not finished (queued, in flight or waiting to retry); for
        a producer whose loop has stopped, when nothing can answer them any more."""
        self.acc.take_all()
        for b in list(self.acc.incomplete):
            self._finish(b, error)

    async def stop(self, timeout: float | None) -> None:
        """Send what is queued (until `timeout`), then fail whatever is left."""
        self.stopping = True
        self.wake_event.set()
        if self._task is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout)
        except TimeoutError:
            self.stopping_hard = True
            self._task.cancel()
            for task in list(self._requests):
                task.cancel()
            await asyncio.gather(self._task, *self._requests, return_exceptions=True)
            self.fail_incomplete(
                ClientClosedError("producer closed before these records were delivered")
            )
        # InitProducerId (asked again after a failed batch, even as the loop ends) and a
        # metadata refresh may still be running or backing off: never leave them pending
        helpers = self.gate.pending()
        if self._refresh is not None and not self._refresh.done():
            helpers.append(self._refresh)
        for t in helpers:
            t.cancel()
        await asyncio.gather(*helpers, return_exceptions=True)


class _Busy:
    """A produce request's claim on its leader (`Sender._held`), given back once: when its
    answer is in, or when the request ends otherwise."""

    __slots__ = ("_counts", "_node", "_held")

    def __init__(self, counts: dict[int, int], node: int) -> None:
        counts[node] = counts.get(node, 0) + 1
        self._counts = counts
        self._node = node
        self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            n = self._counts.pop(self._node) - 1
            if n:
                self._counts[self._node] = n


def _acked(b: ProducerBatch, base_offset: int, append_time: int) -> None:
    """Complete an acknowledged batch whose space was released (Sender._finish's success
    path; called per batch, so kept lean)."""
    tp = b.tp
    entries = b.entries
    futures = b.futures  # (index, future) pairs, flat
    if futures:
        # the sync producer's DeliveryFutures in bulk (their results made on demand); the
        # asyncio producer's futures one by one
        it = iter(ack_delivery_futures(futures, tp, base_offset, append_time, entries))
        for idx, fut in zip(it, it, strict=True):
            if not fut.done():
                offset = base_offset + idx if base_offset >= 0 else -1
                ts = append_time if append_time != -1 else entries[idx][3]
                fut.set_result(RecordMetadata(tp.topic, tp.partition, offset, ts))
    if b.bulks:
        for bulk in b.bulks:
            bulk.batch_done(None)
    b.entries = []  # free the records; payload too
    b.payload = None
