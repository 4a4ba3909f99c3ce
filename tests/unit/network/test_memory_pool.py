"""MemoryPool (queued.max.request.bytes): reservations within the capacity, FIFO waiters granted
as memory is released, no deadlock between frames waiting on each other, one oversized frame
through an empty pool, and the accounting back to zero."""

from __future__ import annotations

import random
import threading

import pytest

from broker.network.memory_pool import MemoryPool


class Waiter:
    def __init__(self) -> None:
        self.granted = 0

    def __call__(self) -> None:
        self.granted += 1


def test_reserve_within_capacity_then_wait_fifo() -> None:
    pool = MemoryPool(100)
    assert pool.reserve_or_wait(60, 0, Waiter())
    a, b = Waiter(), Waiter()
    assert not pool.reserve_or_wait(50, 0, a)
    assert not pool.reserve_or_wait(10, 0, b)  # would fit, but must not overtake `a`
    assert pool.waiting == 2 and pool.used == 60
    pool.release(60)
    assert a.granted == 1 and b.granted == 1 and pool.used == 60 and pool.waiting == 0
    pool.release(60)
    assert pool.used == 0 and pool.high_water == 60


def test_small_requests_counted_never_wait() -> None:
    pool = MemoryPool(100)
    pool.force_reserve(150)
    assert pool.used == 150 and pool.available == 0
    w = Waiter()
    assert not pool.reserve_or_wait(10, 0, w)
    pool.release(100)
    assert w.granted == 1 and pool.used == 60


def test_one_frame_larger_than_the_pool_passes_when_it_holds_everything() -> None:
    pool = MemoryPool(100)
    big = Waiter()
    assert pool.reserve_or_wait(500, 0, big)  # empty pool: allowed, as in Kafka
    assert pool.reserve_or_wait(1000, 500, big)  # it owns the overcommit until complete
    assert pool.used == 1500
    w = Waiter()
    assert not pool.reserve_or_wait(10, 0, w)  # someone else waits until it is released
    pool.frame_done(big)
    assert w.granted == 0
    pool.release(1500)
    assert w.granted == 1 and pool.used == 10


def test_frames_waiting_on_each_other_do_not_deadlock() -> None:
    """Two half-received frames each hold half the pool and each need more: the head of the
    queue becomes the one frame allowed past the capacity, until it is complete; the other
    waits for real memory (no cascade of overcommits)."""
    pool = MemoryPool(100)
    a, b = Waiter(), Waiter()
    assert pool.reserve_or_wait(50, 0, a)
    assert pool.reserve_or_wait(50, 0, b)
    assert not pool.reserve_or_wait(100, 50, a)
    assert a.granted == 0  # b's frame holds memory and is not waiting: it may still complete
    assert not pool.reserve_or_wait(100, 50, b)
    # Now every reserved byte belongs to a waiting frame: the head (a) is granted.
    assert a.granted == 1 and b.granted == 0 and pool.used == 200
    assert pool.reserve_or_wait(200, 150, a)  # the owner grows on without waiting
    assert b.granted == 0 and pool.used == 400
    pool.frame_done(a)  # a's request is complete; its 350 bytes are in the broker
    assert b.granted == 0
    pool.release(350)  # ... and answered: b holds all there is, it becomes the owner
    assert b.granted == 1 and pool.used == 150
    pool.frame_done(b)
    pool.release(150)
    assert pool.used == 0 and pool.waiting == 0


def test_cancel_removes_a_waiter_and_unblocks_the_next() -> None:
    pool = MemoryPool(100)
    assert pool.reserve_or_wait(90, 0, Waiter())
    a, b = Waiter(), Waiter()
    assert not pool.reserve_or_wait(50, 0, a)
    assert not pool.reserve_or_wait(5, 0, b)
    assert pool.cancel(a)
    assert b.granted == 1 and pool.used == 95
    assert not pool.cancel(a) and not pool.cancel(b)


def test_threads_hammering_the_pool_keep_the_bound() -> None:
    seed = random.randrange(1 << 30)
    print("seed", seed)
    pool = MemoryPool(1000)
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        rng = random.Random(seed + i)
        try:
            for _ in range(500):
                n = rng.randrange(1, 300)
                ev = threading.Event()
                if not pool.reserve_or_wait(n, 0, ev.set):
                    assert ev.wait(10), "never granted"
                assert pool.used <= 1000 + 300
                pool.release(n)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    assert pool.used == 0 and pool.waiting == 0 and pool.high_water <= 1000


def test_rejects_zero_capacity() -> None:
    with pytest.raises(ValueError, match="queued.max.request.bytes"):
        MemoryPool(0)
