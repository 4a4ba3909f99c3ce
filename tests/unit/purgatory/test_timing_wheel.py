"""The pure timing wheel, driven by a virtual clock: every task fires exactly at its expiration."""

from __future__ import annotations

import heapq
import itertools
import random

import pytest

from broker.purgatory.timing_wheel import TimerBucket, TimerTaskEntry, TimingWheel


class VirtualDriver:
    """What SystemTimer does, on a virtual millisecond clock, one tick at a time."""

    def __init__(self, tick_ms: int, wheel_size: int, start_ms: int) -> None:
        self.heap: list[tuple[int, int, TimerBucket]] = []
        self.seq = itertools.count()
        self.wheel = TimingWheel(tick_ms, wheel_size, start_ms, self._enqueue)
        self.now = start_ms
        self.fired: dict[str, int] = {}

    def _enqueue(self, bucket: TimerBucket) -> None:
        heapq.heappush(self.heap, (bucket.expiration_ms, next(self.seq), bucket))

    def add(self, name: str, delay_ms: int) -> TimerTaskEntry:
        entry = TimerTaskEntry(name, self.now + delay_ms)
        if not self.wheel.add(entry):
            self.fired[name] = self.now
        return entry

    def step_to(self, t: int) -> None:
        while self.now < t:
            self.now += 1
            while self.heap and self.heap[0][0] <= self.now:
                exp, _, bucket = heapq.heappop(self.heap)
                if bucket.expiration_ms != exp:
                    continue
                self.wheel.advance_clock(exp)
                for entry in bucket.drain():
                    if not self.wheel.add(entry):
                        self.fired[entry.task] = self.now
            self.wheel.advance_clock(self.now)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_task_fires_exactly_at_expiration(seed: int) -> None:
    print(f"seed={seed}")
    rng = random.Random(seed)
    d = VirtualDriver(tick_ms=1, wheel_size=20, start_ms=rng.randrange(0, 10_000))
    expected: dict[str, int] = {}
    for i in range(400):
        if rng.random() < 0.3:
            d.step_to(d.now + rng.randrange(0, 50))
        delay = rng.choice([0, 1, 2, 19, 20, 21, 399, 400, 401, rng.randrange(0, 9000)])
        name = f"t{i}"
        d.add(name, delay)
        expected[name] = d.now + delay
    d.step_to(max(expected.values()) + 1)
    assert d.fired.keys() == expected.keys()
    for name, exp in expected.items():
        assert d.fired[name] == exp, (name, exp, d.fired[name])
    assert d.wheel.levels >= 3  # delays up to 9 s needed the 8 s wheel


def test_coarse_tick_fires_within_one_tick() -> None:
    d = VirtualDriver(tick_ms=10, wheel_size=8, start_ms=1005)
    expected = {f"t{delay}": d.now + delay for delay in (0, 5, 10, 15, 79, 80, 81, 700, 5000)}
    for name, exp in expected.items():
        d.add(name, exp - d.now)
    d.step_to(7000)
    for name, exp in expected.items():
        # Never later than expiration (a due task fires at the start of its tick), never more
        # than one tick early.
        assert exp - 10 < d.fired[name] <= exp, (name, exp, d.fired[name])


def test_removed_entry_never_fires() -> None:
    d = VirtualDriver(tick_ms=1, wheel_size=20, start_ms=0)
    keep = d.add("keep", 300)
    gone = d.add("gone", 300)
    gone.remove()
    gone.remove()  # idempotent
    d.step_to(400)
    assert "keep" in d.fired and "gone" not in d.fired
    assert keep.bucket is None


def test_rejects_bad_geometry() -> None:
    with pytest.raises(ValueError):
        TimingWheel(0, 20, 0, lambda b: None)
    with pytest.raises(ValueError):
        TimingWheel(1, 1, 0, lambda b: None)
