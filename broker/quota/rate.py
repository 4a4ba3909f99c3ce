"""A rate over sampled windows, and the throttle time of a rate over its quota: Kafka's
`Rate` over a `SampledStat` (quota.window.num samples of quota.window.size.seconds each), and
ClientQuotaManager's throttle time. Pure: time comes in as an argument (milliseconds); not
thread-safe (the manager holds a lock around it).

Measuring: the samples of the last `num_samples` windows are summed and divided by the time
they cover, counted as at least `num_samples - 1` whole windows, so a client's first burst is
spread over that much time instead of reading as an infinite rate.

Throttling: a client whose rate is above its quota `bound` waits

    throttle_ms = (rate - bound) / bound * window_ms

(window_ms: the time the rate was measured over), which is how long, sending nothing, it takes
for the measured rate to fall back to the bound; at most `max_throttle_ms` (Kafka bounds a
client quota's throttle time by nothing but the wire's int32).
"""

from __future__ import annotations


class SampledRate:
    """Sum of recorded values per second, over up to `num_samples` windows of `window_ms`."""

    __slots__ = ("num_samples", "window_ms", "_starts", "_values", "_current", "last_record_ms")

    def __init__(self, num_samples: int, window_ms: int, now_ms: float) -> None:
        assert num_samples >= 1 and window_ms >= 1
        self.num_samples = num_samples
        self.window_ms = window_ms
        self._starts = [float(now_ms)]
        self._values = [0.0]
        self._current = 0
        self.last_record_ms = float(now_ms)

    def record(self, value: float, now_ms: float) -> None:
        self._purge(now_ms)
        i = self._current
        if now_ms - self._starts[i] >= self.window_ms:  # the current window is over: next
            i = (i + 1) % self.num_samples
            if i == len(self._starts):
                self._starts.append(float(now_ms))
                self._values.append(0.0)
            else:
                self._starts[i], self._values[i] = float(now_ms), 0.0
            self._current = i
        self._values[i] += value
        self.last_record_ms = float(now_ms)

    def _purge(self, now_ms: float) -> float:
        """Samples older than all the windows together count nothing any more; returns the
        oldest sample's start."""
        expire = self.num_samples * self.window_ms
        starts = self._starts
        oldest = min(starts)
        if now_ms - oldest < expire:
            return oldest
        for i, start in enumerate(starts):
            if now_ms - start >= expire:
                starts[i], self._values[i] = float(now_ms), 0.0
        return min(starts)

    def elapsed_ms(self, now_ms: float) -> float:
        """The time the rate is measured over: since the oldest sample began, and at least
        num_samples - 1 whole windows."""
        return self._elapsed(now_ms, self._purge(now_ms))

    def _elapsed(self, now_ms: float, oldest: float) -> float:
        elapsed = now_ms - oldest
        full = int(elapsed // self.window_ms)
        least = self.num_samples - 1
        if full < least:
            elapsed += (least - full) * self.window_ms
        return max(elapsed, 1.0)

    def measure(self, now_ms: float) -> float:
        """Recorded value per second."""
        return self.measure_over(now_ms)[0]

    def measure_over(self, now_ms: float) -> tuple[float, float]:
        """(recorded value per second, the time in ms it is measured over)."""
        elapsed = self._elapsed(now_ms, self._purge(now_ms))
        return sum(self._values) * 1000.0 / elapsed, elapsed


def throttle_ms(rate: SampledRate, bound: float, now_ms: float, max_throttle_ms: int) -> int:
    """How long a client measured by `rate` waits for it to fall back to `bound` (0: it is
    within its quota)."""
    value, elapsed = rate.measure_over(now_ms)
    if value <= bound:
        return 0
    wait = (value - bound) / bound * elapsed
    return int(min(round(wait), max_throttle_ms))
