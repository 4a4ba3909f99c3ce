"""RecordAccumulator without a broker: batching by size and linger, muting, retries keep
order, expiry, the buffer.memory bound, bulk appends and their one future."""

from __future__ import annotations

import concurrent.futures
import gc
import weakref

import pytest

from client.aio.accumulator import RECORD_OVERHEAD, BulkResult, RecordAccumulator
from client.aio.types import TopicPartition

TP = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def make(clock: Clock, **kw) -> tuple[RecordAccumulator, list[int]]:
    wakes: list[int] = []
    args = {
        "batch_size": 1000,
        "linger_ms": 5,
        "buffer_memory": 10_000,
        "max_request_size": 5000,
        "delivery_timeout_ms": 1000,
    }
    args.update(kw)
    acc = RecordAccumulator(**args, wake=lambda: wakes.append(1), clock=clock)
    return acc, wakes


def append(acc: RecordAccumulator, tp: TopicPartition, value: bytes, fut=None):
    return acc.try_append(tp, 1, None, value, None, RECORD_OVERHEAD + len(value), fut)


def test_batch_fills_by_size_and_is_ready_at_once() -> None:
    clock = Clock()
    acc, wakes = make(clock, batch_size=10 * 116)
    for _ in range(9):
        assert append(acc, TP, b"x" * 100) == (True, False)
    assert append(acc, TP, b"x" * 100) == (True, True)  # 10 * 116 bytes
    ready, expired, _ = acc.drain(clock.now, set(), False)
    assert [len(b.entries) for b in ready[TP]] == [10]
    assert not expired
    append(acc, TP, b"y")  # a new batch, not yet lingered
    assert acc.drain(clock.now, set(), False)[0] == {}
    assert wakes


def test_linger_then_ready() -> None:
    clock = Clock()
    acc, _ = make(clock)
    append(acc, TP, b"a")
    ready, _, next_at = acc.drain(clock.now, set(), False)
    assert not ready and next_at == clock.now + 0.005
    clock.now = next_at
    ready, _, _ = acc.drain(clock.now, set(), False)
    assert [b.entries[0][1] for b in ready[TP]] == [b"a"]


def test_force_drains_everything_and_muted_waits() -> None:
    clock = Clock()
    acc, _ = make(clock)
    append(acc, TP, b"a")
    append(acc, TP1, b"b")
    ready, _, _ = acc.drain(clock.now, {TP1}, True)
    assert list(ready) == [TP]


def test_retry_goes_back_to_the_head_in_order() -> None:
    clock = Clock()
    acc, _ = make(clock, batch_size=100)
    for v in (b"1" * 90, b"2" * 90, b"3" * 90):
        append(acc, TP, v)
    ready, _, _ = acc.drain(clock.now, set(), True)
    first = ready[TP]
    assert [b.entries[0][1][:1] for b in first] == [b"1", b"2", b"3"]
    append(acc, TP, b"4")
    acc.reenqueue(first, clock.now + 0.1)
    ready, _, next_at = acc.drain(clock.now, set(), True)
    assert not ready and next_at == clock.now + 0.1
    clock.now += 0.1
    ready, _, _ = acc.drain(clock.now, set(), True)
    assert [b.entries[0][1][:1] for b in ready[TP]] == [b"1", b"2", b"3", b"4"]


def test_max_request_size_splits_drains() -> None:
    clock = Clock()
    acc, _ = make(clock, batch_size=1000, max_request_size=2500, buffer_memory=100_000)
    for _ in range(40):
        append(acc, TP, b"x" * 100)
    ready, _, _ = acc.drain(clock.now, set(), True)
    assert sum(b.size for b in ready[TP]) <= 2500
    assert acc.has_queued()


def test_buffer_memory_bound() -> None:
    clock = Clock()
    acc, _ = make(clock, buffer_memory=1000, batch_size=10_000)
    assert append(acc, TP, b"x" * 900)[0]
    assert append(acc, TP, b"x" * 200) == (False, False)
    ready, _, _ = acc.drain(clock.now, set(), True)
    acc.release(ready[TP][0])
    assert acc.buffered == 0
    assert append(acc, TP, b"x" * 200)[0]


def test_first_record_always_fits() -> None:
    clock = Clock()
    acc, _ = make(clock, buffer_memory=1024)
    assert append(acc, TP, b"x" * 5000)[0]


def test_expired_batches_are_returned() -> None:
    clock = Clock()
    acc, _ = make(clock)
    append(acc, TP, b"a")
    clock.now += 2
    ready, expired, _ = acc.drain(clock.now, set(), False)
    assert not ready and len(expired) == 1


def test_bulk_append_splits_batches_and_counts() -> None:
    clock = Clock()
    acc, _ = make(clock, batch_size=1000, buffer_memory=1 << 20, max_request_size=1 << 20)
    fut: concurrent.futures.Future = concurrent.futures.Future()
    bulk = BulkResult(fut)
    filled = acc.append_bulk(TP, 1, [b"x" * 100] * 25, bulk, keyed=False)
    bulk.seal()
    assert filled == 2 and bulk.count == 25
    ready, _, _ = acc.drain(clock.now, set(), True)
    batches = ready[TP]
    assert sum(len(b.entries) for b in batches) == 25
    assert acc.buffered == sum(b.size for b in batches)
    for b in batches:
        assert not fut.done()
        for blk in b.bulks:
            blk.batch_done(None)
    assert fut.result(0) == 25


def test_bulk_error_resolves_future_with_first_error() -> None:
    clock = Clock()
    acc, _ = make(clock, batch_size=200, buffer_memory=1 << 20, max_request_size=1 << 20)
    fut: concurrent.futures.Future = concurrent.futures.Future()
    bulk = BulkResult(fut)
    acc.append_bulk(TP, 1, [(b"k", b"x" * 100)] * 4, bulk, keyed=True)
    bulk.seal()
    ready, _, _ = acc.drain(clock.now, set(), True)
    errs = [ValueError("first"), ValueError("second")]
    for i, b in enumerate(ready[TP]):
        for blk in b.bulks:
            blk.batch_done(errs[min(i, 1)])
    assert str(fut.exception(0)) == "first"


def test_empty_bulk_resolves_to_zero() -> None:
    clock = Clock()
    acc, _ = make(clock)
    fut: concurrent.futures.Future = concurrent.futures.Future()
    bulk = BulkResult(fut)
    acc.append_bulk(TP, 1, [], bulk, keyed=False)
    bulk.seal()
    assert fut.result(0) == 0
    assert not acc.has_queued()


def test_bulk_batch_boundaries_match_a_naive_fill() -> None:
    """Bulk boundaries (sum-guided by the average size) equal a record-by-record fill: each
    batch takes records up to and including the one that brings it to >= batch.size."""
    import random

    seed = random.randrange(1 << 30)
    print("seed", seed)
    rng = random.Random(seed)
    for _ in range(40):
        bs = rng.choice([50, 300, 1000, 5000])
        values = [
            None if rng.random() < 0.05 else b"v" * rng.choice([0, 1, 10, 100, 900, 3000])
            for _ in range(rng.randrange(1, 300))
        ]
        if rng.random() < 0.5:
            values = [v or b"" for v in values]  # the map(len) path
        clock = Clock()
        acc, _ = make(clock, batch_size=bs, buffer_memory=1 << 30, max_request_size=1 << 30)
        acc.append_bulk(TP, 1, values, BulkResult(concurrent.futures.Future()), keyed=False)
        expected: list[list] = [[]]
        size = 0
        for v in values:
            expected[-1].append(v)
            size += RECORD_OVERHEAD + (len(v) if v else 0)
            if size >= bs:
                expected.append([])
                size = 0
        if not expected[-1]:
            expected.pop()
        got = [[e[1] for e in b.entries] for b in acc.batches[TP]]
        assert got == expected, (seed, bs)
        assert [b.size for b in acc.batches[TP]] == [
            sum(RECORD_OVERHEAD + (len(v) if v else 0) for v in batch) for batch in expected
        ]


def test_a_new_batch_wakes_the_sender_only_if_due_before_its_next_look() -> None:
    clock = Clock()
    acc, wakes = make(clock, batch_size=10 * 116)
    append(acc, TP, b"x" * 100)  # the sender has no deadline yet: woken
    assert len(wakes) == 1
    _, _, next_at = acc.drain(clock.now, set(), False)
    assert next_at == 100.005 and acc.sender_deadline == next_at
    clock.now = 100.001
    for p in range(2, 50):  # due after the sender looks anyway: no wake-up each
        append(acc, TopicPartition("t", p), b"x" * 100)
    assert len(wakes) == 1
    clock.now = 100.0055  # TP's batch has lingered, the later ones not yet
    ready, _, next_at = acc.drain(clock.now, set(), False)
    assert set(ready) == {TP}
    assert next_at is not None and abs(next_at - 100.006) < 1e-9
    # a full batch always wakes
    for _ in range(10):
        append(acc, TP1, b"x" * 100)
    assert len(wakes) >= 2
    # with no deadline (the sender waits to be woken), a new batch wakes it
    acc.pop_expired(clock.now)
    n = len(wakes)
    append(acc, TopicPartition("t", 99), b"x" * 100)
    assert len(wakes) == n + 1


def test_full_unencoded_looks_only_at_partitions_with_full_batches() -> None:
    clock = Clock()
    acc, _ = make(clock, batch_size=2 * 116, buffer_memory=1 << 20)
    muted = {TopicPartition("t", p) for p in range(100)}
    for p in range(100):  # one small batch each: none full
        append(acc, TopicPartition("t", p), b"x" * 100)
    assert acc.full_unencoded(muted, 1 << 20) == []
    for _ in range(2):  # partition 7 fills one batch and starts another
        append(acc, TopicPartition("t", 7), b"x" * 100)
    [b] = acc.full_unencoded(muted, 1 << 20)
    assert b.tp == TopicPartition("t", 7) and b.full and b.payload is None
    b.payload = b"encoded"
    assert acc.full_unencoded(muted, 1 << 20) == []


def test_a_queued_record_keeps_no_gc_tracked_object_of_its_own() -> None:
    """Beyond its future (the caller's), a queued record holds nothing the cyclic GC must keep
    visiting: its entry tuple holds only bytes, None and ints (untracked at the first
    collection) and its future sits in the batch's flat list. An (index, future) tuple per
    record stayed tracked: with thousands of partitions records wait longer, more survive into
    the old generations, and full collections were a quarter of the producer's CPU."""
    from client.aio.futures import DeliveryFuture

    clock = Clock()
    acc, _ = make(clock, batch_size=1 << 20, buffer_memory=1 << 24, max_request_size=1 << 20)
    futures = [DeliveryFuture() for _ in range(1000)]
    gc.collect()
    before = len(gc.get_objects())
    for i, fut in enumerate(futures):
        assert append(acc, TP, b"v%d" % i, fut)[0]
    gc.collect()
    assert len(gc.get_objects()) - before < 50  # the batch, its lists, the deque
    ready, _, _ = acc.drain(clock.now, set(), True)
    (batch,) = ready[TP]
    assert batch.futures[1::2] == futures and batch.futures[::2] == list(range(1000))


def _untracking_built() -> bool:
    from client.aio import accumulator

    return accumulator._gc_untrack is not None


@pytest.mark.skipif(
    not _untracking_built(), reason="C extension client.records._speedups not built"
)
def test_a_batch_keeps_what_cannot_form_a_cycle_out_of_the_cyclic_gc() -> None:
    """A batch's `entries` (bytes, str, ints, None) never hold anything that leads back, so
    the GC never walks them. For the asyncio producer the batch and its `futures` stay
    tracked (an asyncio future's callback may lead back to it); for the blocking one
    (`untracked_batches`: its DeliveryFutures are out of the GC while they run) they are out
    of it too, until an attempt fails (the exception's traceback may lead back). Walking every
    queued batch's lists, and full collections set off by the batches promoted into the oldest
    generation, were most of the producer's collections when records spread over many
    partitions."""
    clock = Clock()
    acc, _ = make(clock)
    append(acc, TP, b"a")
    (batch,) = acc.batches[TP]
    assert not gc.is_tracked(batch.entries)
    assert gc.is_tracked(batch.futures) and gc.is_tracked(batch)
    acc.untracked_batches = True
    append(acc, TP1, b"b")
    (other,) = acc.batches[TP1]
    assert not any(map(gc.is_tracked, (other, other.entries, other.futures)))
    error = ConnectionError("lost")
    other.failed_attempt(error)
    assert gc.is_tracked(other) and other.attempts == 1 and other.last_error is error


def test_an_untracked_batch_in_a_cycle_through_its_error_is_collected() -> None:
    """The cycle a failed attempt can make (the batch -> its last error -> the traceback's
    frame -> the batch) is found by the GC once the batch is dropped: failed_attempt put the
    batch back in the GC."""
    clock = Clock()
    acc, _ = make(clock)
    acc.untracked_batches = True
    append(acc, TP, b"a")
    ready, _, _ = acc.drain(clock.now, set(), True)
    (batch,) = ready[TP]
    acc.incomplete.discard(batch)

    class Lost(ConnectionError):  # (a subclass: weakly referable)
        pass

    def fail(b):  # the frame keeps `b`; the exception keeps the frame
        try:
            raise Lost("lost")
        except Lost as exc:
            b.failed_attempt(exc)

    fail(batch)
    gone = weakref.ref(batch.last_error)
    del batch, ready
    gc.collect()
    assert gone() is None


def test_an_emptied_partition_queue_is_reused_for_the_next_batch() -> None:
    """drain() drops a partition whose queue it emptied (a drain costs O(partitions with
    data)); the empty deque is kept and taken by the next partition that starts a batch, so
    a send() loop over many partitions does not make (and the GC does not promote) a deque
    per batch."""
    clock = Clock()
    acc, _ = make(clock)
    append(acc, TP, b"a")
    dq = acc.batches[TP]
    ready, _, _ = acc.drain(clock.now, set(), True)
    assert list(ready) == [TP] and TP not in acc.batches and not dq
    append(acc, TP1, b"b")
    assert acc.batches[TP1] is dq and [b.tp for b in dq] == [TP1]
    append(acc, TP, b"c")  # (no spare left: a new one)
    assert acc.batches[TP] is not dq and len(acc.batches[TP]) == 1


def test_a_lingered_batch_of_a_busy_leader_waits_and_keeps_filling() -> None:
    """`held(tp)` (its leader answers an earlier request of this producer): a lingered batch
    that is not full stays open and is not a reason to wake (the end of that request wakes
    the sender); a full batch still goes, and so does everything when forced."""
    clock = Clock()
    acc, _ = make(clock, batch_size=3 * 116)
    append(acc, TP, b"x" * 100)
    append(acc, TP1, b"y" * 100)
    clock.now += 0.01  # both lingered
    busy = {TP}
    ready, _, next_at = acc.drain(clock.now, set(), False, busy.__contains__)
    assert list(ready) == [TP1] and next_at is None
    append(acc, TP, b"x" * 100)  # into the same, still open batch
    assert append(acc, TP, b"x" * 100) == (True, True)  # now full: it goes all the same
    ready, _, _ = acc.drain(clock.now, set(), False, busy.__contains__)
    assert [len(b.entries) for b in ready[TP]] == [3]
    append(acc, TP, b"z")
    clock.now += 0.01
    assert acc.drain(clock.now, set(), False, busy.__contains__)[0] == {}
    ready, _, _ = acc.drain(clock.now, set(), True, busy.__contains__)  # flush / close
    assert [b.entries[0][1] for b in ready[TP]] == [b"z"]
    append(acc, TP, b"w")
    clock.now += 0.01
    busy.clear()  # the request ended
    ready, _, _ = acc.drain(clock.now, set(), False, busy.__contains__)
    assert [b.entries[0][1] for b in ready[TP]] == [b"w"]


def test_append_sticky_fills_a_batch_then_moves_and_respects_the_buffer() -> None:
    import random

    from client.partitioner import StickyPartitioner

    clock = Clock()
    acc, wakes = make(clock, buffer_memory=2500)
    sticky = StickyPartitioner(random.Random(1))
    tps = [TP, TP1]
    value = b"x" * (100 - RECORD_OVERHEAD)  # 100 bytes a record: 10 fill a batch
    futs = [object() for _ in range(25)]
    placed = []
    for f in futs:
        assert acc.append_sticky(sticky, "t", tps, [0, 1], 7, value, 100, f)
        placed.append(sticky.partition("t", 2, [0, 1]))
    # the sticky partition changed exactly when a batch filled (every 10 records)
    assert [i for i in range(1, 25) if placed[i] != placed[i - 1]] == [9, 19]
    first = acc.batches[tps[placed[0]]][0]
    assert len(first.entries) == 10 and first.full
    assert first.entries[0] == (None, value, None, 7)
    assert first.futures[:4] == [0, futs[0], 1, futs[1]]
    assert acc.buffered == 2500
    assert wakes  # a new batch and each full one woke the sender
    # buffer.memory reached: nothing appended, the caller waits (the general path)
    assert not acc.append_sticky(sticky, "t", tps, [0, 1], 7, value, 100, object())
    assert acc.buffered == 2500
    total = sum(len(b.entries) for dq in acc.batches.values() for b in dq)
    assert total == 25
