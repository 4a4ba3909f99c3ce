"""ReplicationThrottle (broker/replica/throttle.py): a token bucket over the bytes a broker
copies for the replicas it is adding. Only throttled partitions wait; the bytes let through
over a period stay within rate x period plus a tenth of a second's burst and one fetch, in
fetches of 10 ms of the rate (paced, not bursty)."""

from __future__ import annotations

from broker.replica.throttle import BURST_S, MIN_FETCH_BYTES, PACE_S, ReplicationThrottle
from controller.metadata.delta import replay
from controller.metadata.image import MetadataImage
from controller.metadata.records import RESOURCE_BROKER, Config


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


TP, OTHER = ("t", 0), ("t", 1)


def test_no_rate_or_not_throttled_means_no_bound():
    c = Clock()
    th = ReplicationThrottle(c)
    th.set_throttled(TP, True)
    assert th.allowed(TP) and th.fetch_max_bytes(TP, 8 << 20, 1 << 20) == 8 << 20  # no rate
    th.set_rate(1000)
    assert th.allowed(OTHER) and th.fetch_max_bytes(OTHER, 8 << 20, 1 << 20) == 8 << 20
    th.record(OTHER, 10**9)  # not throttled: not counted
    assert th.bytes_throttled == 0


def test_the_bucket_bounds_the_bytes_over_time():
    c = Clock()
    th = ReplicationThrottle(c)
    th.set_rate(1_000_000)
    th.set_throttled(TP, True)
    assert th.fetch_max_bytes(TP, 8 << 20, 1 << 20) == 10_000  # 10 ms of the rate
    assert not th.allowed(TP)  # starts empty
    copied = 0
    fetch = 10_000
    for _ in range(10_000):  # 10 s in 1 ms steps, fetching whenever allowed
        c.now += 0.001
        if th.allowed(TP):
            th.record(TP, fetch)
            copied += fetch
    assert 9_000_000 <= copied <= 10_000_000 + fetch, copied
    assert th.bytes_throttled == copied
    # spent: the wait until the balance is positive again
    th.record(TP, 500_000)
    assert not th.allowed(TP)
    assert 0.4 < th.wait_s() <= 0.6 + 1e-6


def test_the_burst_is_a_tenth_of_a_second_and_a_lower_rate_caps_it():
    c = Clock()
    th = ReplicationThrottle(c)
    th.set_rate(10_000)
    th.set_throttled(TP, True)
    c.now += 3600  # idle for an hour: at most BURST_S worth saved
    th.record(TP, int(10_000 * BURST_S))
    assert not th.allowed(TP)
    th.set_rate(1000)
    assert th.fetch_max_bytes(TP, 8 << 20, 1 << 20) == MIN_FETCH_BYTES
    th.set_rate(None)
    assert th.allowed(TP) and th.wait_s() == 0.0
    th.set_throttled(TP, False)
    th.set_rate(10)
    assert th.allowed(TP)


def test_the_rate_comes_from_the_broker_or_the_cluster_default():
    from broker.replica.apply import FOLLOWER_THROTTLED_RATE, throttled_rate

    img = MetadataImage.EMPTY
    assert throttled_rate(img, 4) is None
    img, _ = replay(img, [(0, Config(RESOURCE_BROKER, "", FOLLOWER_THROTTLED_RATE, "5000"))])
    assert throttled_rate(img, 4) == 5000
    img, _ = replay(img, [(1, Config(RESOURCE_BROKER, "4", FOLLOWER_THROTTLED_RATE, "700"))])
    assert throttled_rate(img, 4) == 700 and throttled_rate(img, 5) == 5000


def test_throttled_fetches_are_small_and_paced():
    """At 50 MB/s a throttled partition is fetched in 0.5 MB pieces (never the 8 MiB catch-up
    size, at most replica.fetch.max.bytes however high the rate), one about every 10 ms: no
    100 ms window carries more than the rate's share, its burst and one fetch, even right
    after an hour's pause."""
    c = Clock()
    th = ReplicationThrottle(c)
    rate = 50_000_000
    th.set_rate(rate)
    th.set_throttled(TP, True)
    fetch = th.fetch_max_bytes(TP, 8 << 20, 1 << 20)
    assert fetch == int(rate * PACE_S) == 500_000
    th.set_rate(10**9)  # 1 GB/s: capped at what a replica in step asks
    assert th.fetch_max_bytes(TP, 8 << 20, 1 << 20) == 1 << 20
    th.set_rate(rate)
    c.now += 3600
    times: list[float] = []
    step = 0.0005
    for _ in range(int(2 / step)):  # 2 s, a fetch whenever allowed, each answered in 0.5 ms
        c.now += step
        if th.allowed(TP):
            th.record(TP, fetch)
            times.append(c.now)
    window = 0.1
    worst = max(sum(1 for t in times if s <= t < s + window) for s in times) * fetch
    assert worst <= rate * (window + BURST_S) + fetch, worst
    # after the burst: one fetch per PACE_S, evenly
    steady = [b - a for a, b in zip(times[-50:-1], times[-49:], strict=True)]
    assert all(PACE_S - 2 * step <= gap <= PACE_S + 2 * step for gap in steady), steady
    assert len(times) * fetch <= rate * (2 + BURST_S) + fetch
