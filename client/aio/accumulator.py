"""Per-partition record accumulator: the producer's bounded buffer between send() and the sender.

    send() / send_many()  ──append──>  {tp: deque[ProducerBatch]}  ──drain──>  sender task
    (any thread, under `lock`)          head batch ready when full,     (event loop thread)
                                        lingered, flushing or closing

A batch holds entries `(key, value, headers, timestamp_ms)` (or `(key, value)` from send_many,
stamped with the batch's `timestamp_ms`) until the sender drains it; it is
encoded once (client.records) and the same bytes are resent on retry. A partition with a
request in flight is *muted*: nothing else is drained for it until the answer, so retries keep
per-partition order. Bytes buffered are bounded by buffer.memory; a record that does not fit
makes try_append return False and the caller waits on the loop for space.

Thread-safety: try_append/append_bulk may run on any thread (they take `lock`); everything
else runs on the event loop thread.
"""

from __future__ import annotations

import collections
import itertools
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any

from client.aio.types import TopicPartition
from client.records.extensions import optional_extension

RECORD_OVERHEAD = 16  # rough per-record bytes beyond key and value (msgpack framing, deltas)
_NO_BULKS: Mapping[Any, int] = MappingProxyType({})
# (None without the C extension: the lists then stay in the cyclic GC, as any list)
_speedups = optional_extension("client.records._speedups")
_gc_untrack: Callable[[object], None] | None = getattr(_speedups, "gc_untrack", None)
_gc_track: Callable[[object], None] | None = getattr(_speedups, "gc_track", None)
_SPARE_DEQUES = 4096  # empty partition queues kept for reuse (see RecordAccumulator.drain)


# A record in a batch: (key, value, headers, timestamp), or a send_many() item, (key, value)
# (values and keys bytes or None; a tuple per record, built on the hot path)
Entry = tuple[Any, ...]
# send_many()'s items once serialized: values, or (key, value) pairs when keyed
BulkItems = list[Any]


class ProducerBatch:
    """Records for one partition, sent and acknowledged together."""

    __slots__ = (
        "tp",
        "entries",
        "size",
        "created",
        "deadline",
        "futures",
        "bulks",
        "attempts",
        "payload",
        "retry_at",
        "seq",
        "full",
        "timestamp_ms",
        "last_error",
        "producer",
    )

    def __init__(self, tp: TopicPartition, now: float, delivery_timeout: float) -> None:
        self.tp = tp
        self.entries: list[Entry] = []
        self.size = 0
        self.created = now
        self.deadline = now + delivery_timeout
        # index in entries, future, index, future, ...: flat, so a record's future costs the
        # GC no (index, future) tuple (tracked, as it holds a future) while it is queued
        self.futures: list[Any] = []
        # BulkResult -> records of it in this batch; waiters for the batch's end. Both are
        # read-only empties until something is added (a batch is made per record or two when
        # records are spread over thousands of partitions: fewer objects for the GC)
        self.bulks: Mapping[Any, int] = _NO_BULKS
        self.attempts = 0
        self.payload: bytes | None = None
        self.retry_at = 0.0
        self.seq = 0  # the accumulator's count of batches when this one was made (flush)
        self.full = False
        self.timestamp_ms = time.time_ns() // 1_000_000  # for (key, value) entries
        self.last_error: BaseException | None = None  # of the last failed attempt (retried)
        self.producer: tuple[int, int, int] | None = None  # idempotence: (id, epoch, sequence)

    def failed_attempt(self, exc: BaseException) -> None:
        """An attempt to send it failed with `exc` (kept for the error it ends with if no
        retry succeeds). Back in the cyclic GC from now on if it was out of it
        (RecordAccumulator.untracked_batches): the exception's traceback may lead back here."""
        self.attempts += 1
        self.last_error = exc
        if _gc_track is not None:
            _gc_track(self)

    def __repr__(self) -> str:
        return f"<ProducerBatch {self.tp.topic}-{self.tp.partition} n={len(self.entries)} size={self.size}>"


class BulkResult:
    """One future for a send_many() call: resolves to the record count when every batch holding
    its records is acknowledged, or to the first error. Thread-safe."""

    __slots__ = ("future", "count", "_pending", "_sealed", "_error", "_lock")

    def __init__(self, future: Any) -> None:
        self.future = future
        self.count = 0
        self._pending = 0
        self._sealed = False
        self._error: BaseException | None = None
        self._lock = threading.Lock()

    def add_batch(self) -> None:
        with self._lock:
            self._pending += 1

    def batch_done(self, error: BaseException | None) -> None:
        with self._lock:
            self._pending -= 1
            if error is not None and self._error is None:
                self._error = error
            ready = self._sealed and self._pending == 0
        if ready:
            self._resolve()

    def seal(self) -> None:
        with self._lock:
            self._sealed = True
            ready = self._pending == 0
        if ready:
            self._resolve()

    def _resolve(self) -> None:
        f = self.future
        if f.done():
            return
        if self._error is not None:
            f.set_exception(self._error)
        else:
            f.set_result(self.count)


class FlushCountdown:
    """A flush's wait: the batches made up to `upto` (their `seq`) that were incomplete when it
    began, `remaining` of them still to finish. One object per flush, not a future per batch:
    a producer spread over 5,000 partitions flushes thousands of batches."""

    __slots__ = ("upto", "remaining", "fire")

    def __init__(self, upto: int, remaining: int, fire: Callable[[], None]) -> None:
        self.upto = upto
        self.remaining = remaining
        self.fire = fire


class RecordAccumulator:
    def __init__(
        self,
        *,
        batch_size: int,
        linger_ms: float,
        buffer_memory: int,
        max_request_size: int,
        delivery_timeout_ms: int,
        wake: Callable[[], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.batch_size = batch_size
        self.linger = linger_ms / 1000
        self.buffer_memory = buffer_memory
        self.max_request_size = max_request_size
        self.delivery_timeout = delivery_timeout_ms / 1000
        self.lock = threading.Lock()
        self._wake = wake
        self._clock = clock
        self.batches: dict[TopicPartition, collections.deque[ProducerBatch]] = {}
        self.buffered = 0  # bytes appended and not yet acknowledged/failed
        self.incomplete: set[ProducerBatch] = set()
        self._made = 0  # batches made so far: a batch's `seq`
        self.flushes: list[FlushCountdown] = []  # flushes waiting (loop thread)
        self.closed = False
        # When the sender will look at the queues next without being woken (the earliest
        # linger or back-off deadline of its last drain; None: only when woken). A new batch
        # due later than that needs no wake-up: one producer spreading records over thousands
        # of partitions starts a batch with nearly every record, and waking the sender for
        # each cost a loop turn and a drain apiece.
        self.sender_deadline: float | None = None
        self._full: set[TopicPartition] = set()  # partitions that may hold full, unencoded batches
        # The cyclic GC and the batches. A send() loop over many partitions starts a batch
        # every few dozen records, and each batch and its `entries` and `futures` lists outlived
        # the young collections: every collection of the older generations walked all their
        # items (a record's entry and future each), and the batches promoted into the oldest
        # generation set off full collections, 150-250 ms of the caller's CPU per 200,000
        # records spread over 1,000 partitions. `entries` holds only bytes, str, ints, None and
        # header pairs (what Producer._prepare makes): it cannot lead back to anything, so it
        # is always out of the GC. With `untracked_batches` (the blocking producer, whose
        # DeliveryFutures are out of the GC while they run and which fails whatever is still
        # queued when it is closed or its loop stops: client/aio/futures.py) the batch and its
        # `futures` are too, until an attempt fails (`failed_attempt`: an exception's traceback
        # may lead back to the batch). The asyncio producer's stay tracked: a callback of an
        # asyncio future may lead back to it. And a partition's emptied queue is kept for
        # reuse (`_spare`) instead of a new deque per batch.
        self.untracked_batches = False
        self._spare: list[collections.deque[ProducerBatch]] = []

    # -- any thread ------------------------------------------------------------------------------

    def try_append(
        self,
        tp: TopicPartition,
        ts: int,
        key: Any,
        value: Any,
        headers: Any,
        size: int,
        future: Any,
    ) -> tuple[bool, bool]:
        """Append one record; returns (appended, batch_became_full). Not appended when the
        buffer is full (the caller waits for space)."""
        with self.lock:
            ok, full, wake = self._append_locked(tp, ts, key, value, headers, size, future)
        if wake:
            self._wake()
        return ok, full

    def append_sticky(
        self,
        sticky: Any,
        topic: str,
        tps: list[TopicPartition],
        available: list[int],
        ts: int,
        value: bytes,
        size: int,
        future: Any,
    ) -> bool:
        """The per-record fast path of a keyless record with no explicit partition: choose the
        sticky partition of `topic` (`sticky`, a StickyPartitioner, over `tps`), append, and
        move the sticky partition on when the batch filled, all under one acquisition of
        `lock`. False when the buffer is full (nothing appended)."""
        n = len(tps)
        with self.lock:
            p = sticky.partition(topic, n, available)
            tp = tps[p]
            buffered = self.buffered
            if buffered + size > self.buffer_memory and buffered > 0:
                return False
            # (_append_locked inlined: this is the per-record path of a plain send loop)
            dq = self.batches.get(tp)
            batch = dq[-1] if dq else None
            if batch is None or batch.full or batch.size + size > self.batch_size:
                _, full, wake = self._append_locked(tp, ts, None, value, None, size, future)
            else:
                entries = batch.entries
                if future is not None:
                    futures = batch.futures
                    futures.append(len(entries))
                    futures.append(future)
                entries.append((None, value, None, ts))
                bsize = batch.size = batch.size + size
                self.buffered = buffered + size
                wake = full = bsize >= self.batch_size
                if full:
                    batch.full = True
                    self._full.add(tp)
            if full:
                sticky.next_partition(topic, p, n, available)
        if wake:
            self._wake()
        return True

    def _append_locked(
        self,
        tp: TopicPartition,
        ts: int,
        key: Any,
        value: Any,
        headers: Any,
        size: int,
        future: Any,
    ) -> tuple[bool, bool, bool]:
        """try_append's body, under `lock`: (appended, batch became full, wake the sender)."""
        buffered = self.buffered
        if buffered + size > self.buffer_memory and buffered > 0:
            return False, False, False
        dq = self._queue_locked(tp)
        batch = dq[-1] if dq else None
        wake = False
        if batch is None or batch.full or (batch.size + size > self.batch_size and batch.entries):
            if batch is not None:
                batch.full = True
                self._full.add(tp)
                wake = True
            batch = self._new_batch(tp, dq)
            due = batch.created + self.linger
            deadline = self.sender_deadline
            if deadline is None or due < deadline:
                self.sender_deadline = due
                wake = True
        entries = batch.entries
        if future is not None:
            futures = batch.futures
            futures.append(len(entries))
            futures.append(future)
        entries.append((key, value, headers, ts))
        bsize = batch.size = batch.size + size
        self.buffered = buffered + size
        if bsize >= self.batch_size:
            batch.full = True
            self._full.add(tp)
            return True, True, True
        return True, False, wake

    def append_bulk(
        self, tp: TopicPartition, ts: int, items: BulkItems, bulk: BulkResult, keyed: bool
    ) -> int:
        """Append many records to `tp` (values, or (key, value) pairs when keyed) without
        per-record futures; ignores buffer.memory (the caller waits for space first).
        Returns how many batches it filled, so the caller can move a sticky partition.

        Sizes and batch boundaries are computed with C-level iteration: `map(len)` once, then
        `sum()` over slices per batch, guided by the average record size (no per-record Python
        step, no per-record int objects for uniform sizes)."""
        n = len(items)
        if n == 0:
            return 0
        ovh = RECORD_OVERHEAD
        extra = 0  # overhead not yet counted in `sizes` (added per record when summing)
        if keyed:
            entries_all = items
            sizes: list[int] = [
                ovh + (len(k) if k is not None else 0) + (len(v) if v is not None else 0)
                for k, v in items
            ]
        else:
            entries_all = list(zip(itertools.repeat(None), items))
            try:
                sizes = list(map(len, items))
                extra = ovh
            except TypeError:  # a None value (tombstone)
                sizes = [ovh + (len(v) if v is not None else 0) for v in items]
        avg = (sum(sizes) + extra * n) / n
        bs = self.batch_size
        filled = 0
        with self.lock:
            dq = self._queue_locked(tp)
            batch = dq[-1] if dq and not dq[-1].full else None
            if batch is None:
                batch = self._new_batch(tp, dq)
            start = 0
            while start < n:
                # The records [start, end) go to this batch: up to and including the one that
                # brings it to >= batch.size bytes (or all that are left).
                end, added = _fill(sizes, extra, start, n, bs - batch.size, avg)
                batch.entries.extend(entries_all[start:end])
                self.buffered += added
                batch.size += added
                self._note_bulk(batch, bulk, end - start)
                start = end
                if batch.size >= bs:
                    batch.full = True
                    self._full.add(tp)
                    filled += 1
                    if start < n:
                        batch = self._new_batch(tp, dq)
        self._wake()
        return filled

    @staticmethod
    def _note_bulk(batch: ProducerBatch, bulk: BulkResult, count: int) -> None:
        bulks = batch.bulks
        if bulk not in bulks:
            bulk.add_batch()
            if bulks is _NO_BULKS:
                bulks = batch.bulks = {}
            bulks[bulk] = 0  # type: ignore[index]
        bulks[bulk] += count  # type: ignore[index]
        bulk.count += count

    def _queue_locked(self, tp: TopicPartition) -> collections.deque[ProducerBatch]:
        """`tp`'s queue of batches, made (a spare one if drain() left any) when it has none."""
        dq = self.batches.get(tp)
        if dq is None:
            dq = self.batches[tp] = self._spare.pop() if self._spare else collections.deque()
        return dq

    def _new_batch(self, tp: TopicPartition, dq: collections.deque[ProducerBatch]) -> ProducerBatch:
        batch = ProducerBatch(tp, self._clock(), self.delivery_timeout)
        if _gc_untrack is not None:
            _gc_untrack(batch.entries)
            if self.untracked_batches:
                _gc_untrack(batch.futures)
                _gc_untrack(batch)
        self._made = batch.seq = self._made + 1
        dq.append(batch)
        self.incomplete.add(batch)
        return batch

    # -- event loop thread -----------------------------------------------------------------------

    def drain(
        self,
        now: float,
        muted: set[TopicPartition],
        force: bool,
        held: Callable[[TopicPartition], bool] | None = None,
    ) -> tuple[dict[TopicPartition, list[ProducerBatch]], list[ProducerBatch], float | None]:
        """Take the ready batches of every unmuted partition (up to max.request.size each).

        Returns (ready by partition, expired batches, when to look again or None). A batch is
        ready when full, lingered, being retried, or when `force` (flush/close) is set; a
        lingered batch that is not full stays (open to appends) while `held(tp)` (its leader
        is busy with an earlier request: the sender is woken when that ends). Taken batches
        are closed to further appends.
        """
        ready: dict[TopicPartition, list[ProducerBatch]] = {}
        expired: list[ProducerBatch] = []
        next_at: float | None = None
        linger = self.linger
        limit = self.max_request_size
        force = force or self.closed
        emptied: list[TopicPartition] = []
        with self.lock:
            for tp, dq in self.batches.items():
                if not dq:
                    emptied.append(tp)
                    continue
                if tp in muted:
                    continue
                while dq and dq[0].deadline <= now:
                    expired.append(dq.popleft())
                taken: list[ProducerBatch] | None = None  # (no list per partition looked at)
                total = 0
                while dq:
                    b = dq[0]
                    if b.retry_at > now:
                        next_at = b.retry_at if next_at is None else min(next_at, b.retry_at)
                        break
                    if not (force or b.full or b.attempts or now >= b.created + linger):
                        due = b.created + linger
                        next_at = due if next_at is None else min(next_at, due)
                        break
                    if held is not None and not (force or b.full or b.attempts) and held(tp):
                        break  # (no next_at: the end of the busy request wakes the sender)
                    if taken and (total + b.size > limit or b.attempts != taken[0].attempts):
                        break  # (a retried request goes out again with the same batches)
                    b.full = True
                    if taken is None:
                        taken = [dq.popleft()]
                    else:
                        taken.append(dq.popleft())
                    total += b.size
                if taken is not None:
                    ready[tp] = taken
                if not dq:
                    emptied.append(tp)
            # only partitions with queued batches stay: a drain costs O(partitions with
            # data), not O(partitions ever written to) (one producer over 5,000 partitions
            # drains after nearly every record)
            full = self._full
            spare = self._spare
            for tp in emptied:
                dq = self.batches.pop(tp)
                full.discard(tp)
                if len(spare) < _SPARE_DEQUES:
                    spare.append(dq)  # (empty: taken again by the next batch of any partition)
            self.sender_deadline = next_at
        return ready, expired, next_at

    def pop_expired(self, now: float) -> list[ProducerBatch]:
        """Remove and return the batches past their delivery deadline (head of each queue)."""
        out: list[ProducerBatch] = []
        with self.lock:
            for dq in self.batches.values():
                while dq and dq[0].deadline <= now:
                    out.append(dq.popleft())
            self.sender_deadline = None  # the sender waits to be woken
        return out

    def queued(self) -> list[ProducerBatch]:
        """Every queued batch, in partition order (not removed)."""
        with self.lock:
            return [b for dq in self.batches.values() for b in dq]

    def full_unencoded(self, partitions: set[TopicPartition], limit: int) -> list[ProducerBatch]:
        """Full, not yet encoded batches of `partitions` (up to `limit` bytes in all). Full
        batches take no more appends, so the caller may encode them without the lock."""
        out: list[ProducerBatch] = []
        total = 0
        with self.lock:
            full = self._full
            if not full:
                return out
            for tp in [tp for tp in full if tp in partitions]:
                found = False
                for b in self.batches.get(tp, ()):
                    if not b.full or total >= limit:
                        break
                    if b.payload is None:
                        out.append(b)
                        total += b.size
                        found = True
                if not found and total < limit:
                    full.discard(tp)  # nothing full and unencoded left there
        return out

    def reenqueue(self, batches: list[ProducerBatch], retry_at: float) -> None:
        """Put batches back at the head of their partition (original order) for a retry."""
        with self.lock:
            for b in reversed(batches):
                b.retry_at = retry_at
                self._queue_locked(b.tp).appendleft(b)

    def release(self, batch: ProducerBatch) -> None:
        """The batch is finished (acknowledged or failed): free its bytes."""
        self.release_many((batch,))

    def release_many(self, batches: Iterable[ProducerBatch]) -> None:
        """The batches are finished (an answered request's, or one failed): their bytes freed
        under one lock, and counted off the flushes waiting for them. Loop thread: a flush
        whose last batch this was resolves its future here, and its waiter runs on a later
        turn of the loop, after the caller has resolved these batches' records."""
        with self.lock:
            incomplete = self.incomplete
            flushes = self.flushes
            for b in batches:
                self.buffered -= b.size
                if flushes and b in incomplete:
                    for f in list(flushes):
                        if b.seq <= f.upto:
                            f.remaining -= 1
                            if not f.remaining:
                                flushes.remove(f)
                                f.fire()
                incomplete.discard(b)

    def start_flush(self, fire: Callable[[], None]) -> FlushCountdown | None:
        """A countdown of the batches incomplete now (None when there are none); `fire` is
        called once they are all finished. Loop thread."""
        with self.lock:
            if not self.incomplete:
                return None
            f = FlushCountdown(self._made, len(self.incomplete), fire)
            self.flushes.append(f)
            return f

    def end_flush(self, f: FlushCountdown) -> None:
        """Forget a flush that stopped waiting (timed out or cancelled)."""
        with self.lock:
            if f in self.flushes:
                self.flushes.remove(f)

    def take_all(self) -> list[ProducerBatch]:
        """Remove every queued batch (for an aborting close)."""
        with self.lock:
            out = [b for dq in self.batches.values() for b in dq]
            for dq in self.batches.values():
                dq.clear()
            return out

    def has_queued(self) -> bool:
        with self.lock:
            return any(self.batches.values())


def _fill(
    sizes: list[int], extra: int, start: int, n: int, room: int, avg: float
) -> tuple[int, int]:
    """(end, bytes): the shortest run sizes[start:end] whose total (each record + `extra`)
    reaches `room`, or everything left when it never does. Guesses the length from `avg`,
    then corrects with C-level sums; for uniform sizes the guess is exact."""
    left = n - start
    m = min(left, max(1, math.ceil(room / avg)))
    total = sum(sizes[start : start + m]) + extra * m
    while total < room and m < left:
        step = min(left - m, max(1, math.ceil((room - total) / avg)))
        total += sum(sizes[start + m : start + m + step]) + extra * step
        m += step
    while m > 1 and total - sizes[start + m - 1] - extra >= room:
        m -= 1
        total -= sizes[start + m] + extra
    return start + m, total
