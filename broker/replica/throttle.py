"""ReplicationThrottle: the bound on a broker's catch-up traffic for replicas it is adding
(a partition reassignment's new replicas, KIP-455), in bytes per second.

    throttle = ReplicationThrottle()               # one per broker, shared by its fetchers
    throttle.set_rate(10_000_000)                  # follower.replication.throttled.rate; None: off
    throttle.set_throttled(("orders", 0), True)    # this broker is adding that replica
    throttle.allowed(tp)                           # may the next fetch name tp?
    throttle.record(tp, nbytes)                    # bytes a fetch appended for tp

A token bucket: tokens refill at the rate, up to BURST_S (a tenth of a second) worth, and a
fetch's bytes are taken after the fact (the balance may go below zero: Kafka's quota does the
same, since a fetch's size is known only once it is answered); a throttled partition is left
out of fetches while the balance is not positive. So over any period the bytes copied stay
within the rate plus BURST_S's burst and one fetch's overshoot.

Paced, not bursty: a fetch of a throttled partition asks for PACE_S (10 ms) of the rate
(`fetch_max_bytes`), at most what an in-step replica asks (replica.fetch.max.bytes, 1 MiB) and
never the catch-up size (replica.fetch.catchup.max.bytes, 8 MiB). At 50 MB/s that is ~100
fetches of 0.5 MB a second instead of 10 of 5 MB: what one fetch costs the producers beside
it (its encode on the leader, its decode, append and fsync on the follower, each holding the
GIL or the disk) stays small, and nothing arrives in a burst (docs/operations.md, "What a move
costs producers"). A leader still returns a first batch larger than that
whole, so a copy always progresses, and the bucket's debt makes the next fetch wait for it.
Replicas in sync, and replicas not being added, are never throttled.

Thread-safe: the metadata applier sets, every fetcher thread asks and records. Time comes
from the injected monotonic `clock` (seconds).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

TopicPartition = tuple[str, int]

# the smallest per-fetch size a throttled partition asks for (a very low rate still moves)
MIN_FETCH_BYTES = 1024
# a throttled fetch asks for this many seconds of the rate
PACE_S = 0.01
# the bucket saves at most this many seconds of the rate (the largest burst after a pause)
BURST_S = 0.1


class ReplicationThrottle:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._rate: float | None = None
        self._tokens = 0.0
        self._at = clock()
        self._throttled: set[TopicPartition] = set()
        self.bytes_throttled = 0  # bytes copied for throttled partitions (metrics, tests)

    @property
    def rate(self) -> float | None:
        return self._rate

    def set_rate(self, rate: float | None) -> None:
        """Bytes per second; None (or unset) removes the bound."""
        with self._lock:
            if rate == self._rate:
                return
            self._refill_locked()
            self._rate = rate
            if rate is not None:
                self._tokens = min(self._tokens, rate * BURST_S)

    def set_throttled(self, tp: TopicPartition, throttled: bool) -> None:
        with self._lock:
            if throttled:
                self._throttled.add(tp)
            else:
                self._throttled.discard(tp)

    def is_throttled(self, tp: TopicPartition) -> bool:
        return self._rate is not None and tp in self._throttled

    def _refill_locked(self) -> None:
        now = self._clock()
        if self._rate is not None:
            cap = self._rate * BURST_S
            self._tokens = min(cap, self._tokens + (now - self._at) * self._rate)
        self._at = now

    def allowed(self, tp: TopicPartition) -> bool:
        """Whether a fetch may name `tp` now (always, unless it is throttled and the balance
        is spent)."""
        if not self.is_throttled(tp):
            return True
        with self._lock:
            self._refill_locked()
            return self._tokens > 0

    def wait_s(self) -> float:
        """Seconds until a throttled partition may be fetched again (0: now, or no bound)."""
        with self._lock:
            if self._rate is None or self._rate <= 0:
                return 0.0 if self._rate is None else 1.0
            self._refill_locked()
            return 0.0 if self._tokens > 0 else (-self._tokens + 1) / self._rate

    def fetch_max_bytes(self, tp: TopicPartition, default: int, in_step: int) -> int:
        """What one fetch asks for `tp`: `default` when it is not throttled; throttled, PACE_S
        of the rate, at most `in_step` (replica.fetch.max.bytes: what a replica in step asks)
        and at least MIN_FETCH_BYTES."""
        rate = self._rate
        if rate is None or tp not in self._throttled:
            return default
        return max(MIN_FETCH_BYTES, min(in_step, int(rate * PACE_S)))

    def record(self, tp: TopicPartition, nbytes: int) -> None:
        """`nbytes` were appended for `tp` by a fetch."""
        if nbytes <= 0 or not self.is_throttled(tp):
            return
        with self._lock:
            self._refill_locked()
            self._tokens -= nbytes
            self.bytes_throttled += nbytes
