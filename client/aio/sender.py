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
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from client.aio.accumulator import ProducerBatch, RecordAccumulator
from client.aio.cluster import ClusterClient
from client.aio.idempotence import IdempotenceState
from client.aio.types import RecordMetadata, TopicPartition
from client.errors import (
    ClientClosedError,
    ErrorCode,
    GregorError,
    GregorTimeoutError,
    error_for_code,
)
from client.protocol import VECTORED_MIN_BYTES, ApiKey, BinParts
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
        config: Any,
        cluster: ClusterClient,
        acc: RecordAccumulator,
        idempotent: bool = False,
    ) -> None:
        self.config = config
        self.idem = IdempotenceState() if idempotent else None
        self._init_task: asyncio.Task | None = None
        self.cluster = cluster
        self.acc = acc
        self.wake_event = asyncio.Event()
        self.muted: set[TopicPartition] = set()
        self.flushing = 0
        self.stopping = False
        self.stopping_hard = False
        self._task: asyncio.Task | None = None
        self._requests: set[asyncio.Task] = set()
        self._refresh: asyncio.Task | None = None
        self.space_freed = asyncio.Event()
        self.idle = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        acc = self.acc
        while True:
            self.wake_event.clear()
            now = time.monotonic()
            if self.cluster.stale and (self._refresh is None or self._refresh.done()):
                self._refresh = asyncio.ensure_future(self._refresh_metadata())
            if self.idem is not None and not self.idem.ready:
                # no producer id yet (or a new one after a reset): nothing is sent until it
                # comes, but batches still expire
                if self._init_task is None or self._init_task.done():
                    self._init_task = asyncio.ensure_future(self._init_producer_id())
                ready: dict[TopicPartition, list[ProducerBatch]] = {}
                expired, next_at = acc.pop_expired(now), None
            else:
                ready, expired, next_at = acc.drain(
                    now, self.muted, self.flushing > 0 or self.stopping
                )
            for b in expired:
                self._finish(b, self._expired(b))
            if ready:
                next_at = self._dispatch(ready, now, next_at)
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

    def _encode_ahead(self) -> bool:
        """Encode one full batch of a partition whose request is in flight, so the next request
        is ready the moment the answer arrives (encoding overlaps the broker's append and
        fsync instead of following it). Returns True if it encoded one."""
        if self.idem is not None and not self.idem.ready:
            return False
        todo = self.acc.full_unencoded(self.muted, self.config.max_request_size)
        if not todo:
            return False
        self._encode(todo[0])
        return True

    async def _init_producer_id(self) -> None:
        assert self.idem is not None
        try:
            await self.idem.init(self.cluster)
        except GregorError as exc:
            log.info("InitProducerId failed: %s; retrying", exc)
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)
        finally:
            self.wake_event.set()

    def _encode(self, b: ProducerBatch) -> None:
        """Build the batch's payload; with idempotence, numbered once (retries resend it)."""
        pid, epoch, seq = (-1, -1, -1) if self.idem is None else self.idem.number(b)
        b.payload = build_batch(
            b.entries,
            compression=self.config.compression_type,
            timestamp_ms=b.timestamp_ms,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
        )

    async def _refresh_metadata(self) -> None:
        try:
            await self.cluster.refresh()
        except GregorError as exc:
            log.info("metadata refresh failed: %s", exc)
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)
        finally:
            self.wake_event.set()

    def _dispatch(
        self, ready: dict[TopicPartition, list[ProducerBatch]], now: float, next_at: float | None
    ) -> float | None:
        md = self.cluster.metadata
        by_node: dict[int, list[tuple[TopicPartition, list[ProducerBatch]]]] = {}
        backoff = now + self.config.retry_backoff_ms / 1000
        for tp, batches in ready.items():
            leader = md.leader_for(tp)
            if leader < 0 or leader not in md.brokers or self.cluster.connect_delay(leader) > 0:
                # No leader, or one that just refused a connection: look at fresh metadata
                # every retry.backoff.ms instead of waiting out the reconnect back-off, so a
                # new leader is used as soon as the cluster names it (Kafka's Sender skips
                # nodes that are not ready the same way).
                self.cluster.request_update()
                self.acc.reenqueue(batches, backoff)  # keep order; look again after back-off
                next_at = backoff if next_at is None else min(next_at, backoff)
                continue
            if self.idem is not None:  # numbered now, in queue order, before any encoding ahead
                for b in batches:
                    self.idem.number(b)
            by_node.setdefault(leader, []).append((tp, batches))
        for node, parts in by_node.items():
            for tp, _ in parts:
                self.muted.add(tp)
            task = asyncio.ensure_future(self._send(node, parts))
            self._requests.add(task)
            task.add_done_callback(self._request_done)
        return next_at

    def _request_done(self, task: asyncio.Task) -> None:
        self._requests.discard(task)
        self.wake_event.set()  # the loop may be waiting for in-flight requests to end
        if not task.cancelled() and task.exception() is not None:
            log.error("produce request task failed", exc_info=task.exception())

    async def _send(
        self, node: int, parts: list[tuple[TopicPartition, list[ProducerBatch]]]
    ) -> None:
        cfg = self.config
        topics: dict[str, list[dict]] = {}
        nbytes = 0
        if self.idem is not None and not self.idem.ready:
            # the producer id was reset since these were drained: send them under the next one
            for tp, batches in parts:
                self.muted.discard(tp)
                for b in batches:
                    if b.attempts == 0:  # never sent: numbered again
                        b.producer = b.payload = None
                self.acc.reenqueue(batches, 0.0)
            self.wake_event.set()
            return
        try:
            for tp, batches in parts:
                for b in batches:
                    if b.payload is None:
                        self._encode(b)
                payloads: list[bytes] = [b.payload for b in batches]  # type: ignore[misc]
                nbytes += sum(map(len, payloads))
                topics.setdefault(tp.topic, []).append(
                    {"partition": tp.partition, "records": payloads}
                )
        except GregorError as exc:  # e.g. MissingCodecError: not retriable
            for tp, batches in parts:
                self.muted.discard(tp)
                for b in batches:
                    self._finish(b, exc)
            self.wake_event.set()
            return
        # A large request is written as its batches' own buffers (no join, no packb copy);
        # a small one as one packb'd frame, which is faster below VECTORED_MIN_BYTES.
        vectored = nbytes >= VECTORED_MIN_BYTES
        for ps in topics.values():
            for p in ps:
                bufs = p["records"]
                p["records"] = (
                    bufs[0] if len(bufs) == 1 else BinParts(bufs) if vectored else b"".join(bufs)
                )
        body = {
            "transactional_id": None,
            "acks": cfg.acks,
            "timeout_ms": cfg.request_timeout_ms,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        }
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
        except GregorError as exc:
            self.cluster.request_update(avoid=node)
            for tp, batches in parts:
                self._retry_or_fail(tp, batches, exc)
            self.wake_event.set()
            return
        if resp is None:  # acks=0
            for tp, batches in parts:
                self.muted.discard(tp)
                for b in batches:
                    self._finish(b, None, -1, -1)
            self.wake_event.set()
            return
        answered: dict[TopicPartition, dict] = {}
        for t in resp["topics"]:
            for p in t["partitions"]:
                answered[TopicPartition(t["name"], p["partition"])] = p
        for tp, batches in parts:
            got = answered.get(tp)
            if got is None:
                self._retry_or_fail(
                    tp,
                    batches,
                    error_for_code(ErrorCode.UNKNOWN_SERVER_ERROR)(
                        f"Produce response from broker {node} lacks {tp.topic}-{tp.partition}"
                    ),
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
                self._retry_or_fail(tp, batches, err)
                continue
            self.muted.discard(tp)
            offset = got["base_offset"]
            append_time = got["log_append_time_ms"]
            for b in batches:  # one request may carry several batches of a partition
                count = len(b.entries)  # _finish frees the entries
                self._finish(b, None, offset, append_time)
                offset += count
        self.wake_event.set()

    def _expired(self, b: ProducerBatch) -> GregorTimeoutError:
        """The error of a batch that ran out of delivery.timeout.ms: it names the last error
        its attempts met (e.g. KAFKA_STORAGE_ERROR from a broker whose log dir is offline),
        also kept as its `__cause__`."""
        msg = (
            f"{b.tp.topic}-{b.tp.partition}: {len(b.entries)} records expired after "
            f"delivery.timeout.ms={self.config.delivery_timeout_ms}"
        )
        last = b.last_error
        if last is not None:
            msg += f" ({b.attempts} attempt(s); last error: {last})"
        err = GregorTimeoutError(msg)
        err.__cause__ = last
        return err

    def _retry_or_fail(
        self, tp: TopicPartition, batches: list[ProducerBatch], exc: BaseException
    ) -> None:
        self.muted.discard(tp)
        now = time.monotonic()
        retriable = getattr(exc, "retriable", False) and not self.stopping_hard
        if self.idem is not None and getattr(exc, "code", None) == ErrorCode.UNKNOWN_PRODUCER_ID:
            # the leader has no state for this producer id (and stored nothing): number these
            # batches again under a new producer id and send them again
            self.idem.reset(str(exc), self.acc.queued())
            for b in batches:
                b.producer = b.payload = None
            retriable = not self.stopping_hard
        keep: list[ProducerBatch] = []
        for b in batches:
            b.attempts += 1
            b.last_error = exc
            if retriable and b.attempts <= self.config.retries and b.deadline > now:
                keep.append(b)
            else:
                self._finish(b, exc)
        if keep:
            log.info(
                "retrying %d batch(es) of %s-%d after %s (attempt %d)",
                len(keep),
                tp.topic,
                tp.partition,
                exc,
                keep[0].attempts,
            )
            self.acc.reenqueue(keep, now + self.config.retry_backoff_ms / 1000)

    def _finish(
        self,
        b: ProducerBatch,
        error: BaseException | None,
        base_offset: int = -1,
        append_time: int = -1,
    ) -> None:
        """Resolve every future of the batch and free its buffer space."""
        idem = self.idem
        if (
            error is not None
            and idem is not None
            and b.producer is not None
            and b.producer[0] == idem.producer_id
        ):  # its partition's sequence now has a gap the leader would refuse
            idem.reset(
                f"a batch of {b.tp.topic}-{b.tp.partition} failed: {error}", self.acc.queued()
            )
        self.acc.release(b)
        self.space_freed.set()
        topic, partition = b.tp
        if error is None:
            entries = b.entries
            for idx, fut in b.futures:
                if not fut.done():
                    ts = append_time if append_time != -1 else entries[idx][3]
                    off = base_offset + idx if base_offset >= 0 else -1
                    fut.set_result(RecordMetadata(topic, partition, off, ts))
        else:
            if not isinstance(error, ClientClosedError):
                log.warning(
                    "failed to deliver %d records to %s-%d: %s",
                    len(b.entries),
                    topic,
                    partition,
                    error,
                )
            for _idx, fut in b.futures:
                if not fut.done():
                    fut.set_exception(error)
        for bulk in b.bulks:
            bulk.batch_done(error)
        for w in b.done_waiters:
            if not w.done():
                w.set_result(None)
        b.entries = []  # free the records; payload too
        b.payload = None

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
            err = ClientClosedError("producer closed before these records were delivered")
            for b in self.acc.take_all():
                self._finish(b, err)
        if self._refresh is not None and not self._refresh.done():
            self._refresh.cancel()
            await asyncio.gather(self._refresh, return_exceptions=True)
