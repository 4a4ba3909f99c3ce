"""The client's own metrics (`Producer.metrics()`, `Consumer.metrics()`; docs/client.md,
"Metrics"), with kafka-python's names and meaning.

A `Sensor` keeps, for one kind of observation, the total count and sum since the client was
made, and count, sum and max over a sliding window of two 30 s samples (Kafka's
metrics.sample.window.ms=30000, metrics.num.samples=2): `rate()` is per second over the window,
`avg()`/`max()` over the observations in it.

Recorded per request and per batch (never per record: a consumer's records once per poll) on
the client's event-loop thread, and read there too (the blocking facade's `metrics()` runs on
it), so no lock is taken.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from typing import Any

WINDOW_S = 30.0


class Sensor:
    __slots__ = ("count", "total", "_clock", "_start", "_cur", "_prev", "_prev_start", "_born")

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        now = clock()
        self._born = now
        self.count = 0  # since creation
        self.total = 0.0
        self._start = now  # the current sample's start
        self._cur = [0, 0.0, -math.inf]  # count, sum, max of the current sample
        self._prev: list[float] | None = None  # the previous sample (None: none, or too old)
        self._prev_start = now

    def _roll(self, now: float) -> None:
        age = now - self._start
        if age < WINDOW_S:
            return
        if age < 2 * WINDOW_S:
            self._prev, self._prev_start = self._cur, self._start
            self._start += WINDOW_S
        else:  # idle for a whole window: nothing in it survives
            self._prev = None
            self._start = now
        self._cur = [0, 0.0, -math.inf]

    def record(self, value: float = 1.0) -> None:
        now = self._clock()
        if now - self._start >= WINDOW_S:
            self._roll(now)
        cur = self._cur
        cur[0] += 1
        cur[1] += value
        if value > cur[2]:
            cur[2] = value
        self.count += 1
        self.total += value

    def _samples(self) -> list[list[float]]:
        self._roll(self._clock())
        return [self._cur] if self._prev is None else [self._prev, self._cur]

    def rate(self, of_counts: bool = False) -> float:
        """Sum of the values per second over the window; `of_counts`: observations per
        second instead (for a sensor of durations)."""
        now = self._clock()
        samples = self._samples()
        oldest = self._prev_start if self._prev is not None else self._start
        # (a young client: over its life; at least one second, so the first observations do
        # not read as a burst)
        elapsed = max(1.0, now - max(oldest, self._born))
        return sum(x[0] if of_counts else x[1] for x in samples) / elapsed

    def avg(self) -> float:
        samples = self._samples()
        n = sum(s[0] for s in samples)
        return sum(s[1] for s in samples) / n if n else 0.0

    def max(self) -> float:
        m = max(s[2] for s in self._samples())
        return 0.0 if m == -math.inf else m


class ProducerMetrics:
    """Recorded by the sender (client/aio/sender.py)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.records = Sensor(clock)  # records acknowledged (value: the batch's record count)
        self.bytes = Sensor(clock)  # record-batch bytes sent in produce requests
        self.batch_size = Sensor(clock)  # bytes per batch
        self.batch_records = Sensor(clock)  # records per batch
        self.requests = Sensor(clock)  # request latency, seconds
        self.retries = Sensor(clock)  # records of batches sent again
        self.errors = Sensor(clock)  # records failed
        self.throttle = Sensor(clock)  # throttle_time_ms of each produce response (quotas)

    def snapshot(self) -> dict[str, dict[str, float]]:
        return {
            "producer-metrics": {
                "record-send-rate": self.records.rate(),
                "record-send-total": self.records.total,
                "byte-rate": self.bytes.rate(),
                "byte-total": self.bytes.total,
                "batch-size-avg": self.batch_size.avg(),
                "batch-size-max": self.batch_size.max(),
                "records-per-request-avg": _per(self.batch_records.total, self.requests.count),
                "request-rate": self.requests.rate(of_counts=True),
                "request-total": float(self.requests.count),
                "request-latency-avg": self.requests.avg() * 1000,
                "request-latency-max": self.requests.max() * 1000,
                "record-retry-rate": self.retries.rate(),
                "record-retry-total": self.retries.total,
                "record-error-rate": self.errors.rate(),
                "record-error-total": self.errors.total,
                "produce-throttle-time-avg": self.throttle.avg(),
                "produce-throttle-time-max": self.throttle.max(),
            }
        }


class ConsumerMetrics:
    """Recorded by the fetcher (client/aio/fetcher.py)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.records = Sensor(clock)  # records returned by poll()
        self.bytes = Sensor(clock)  # record-batch bytes fetched
        self.fetches = Sensor(clock)  # fetch latency, seconds
        self.throttle = Sensor(clock)  # throttle_time_ms of each fetch response (quotas)

    def snapshot(self, lags: dict[str, int]) -> dict[str, dict[str, float]]:
        """`lags`: {"topic-partition": high watermark - position} of the assigned partitions
        whose both are known."""
        out = {
            "records-consumed-rate": self.records.rate(),
            "records-consumed-total": self.records.total,
            "bytes-consumed-rate": self.bytes.rate(),
            "bytes-consumed-total": self.bytes.total,
            "fetch-rate": self.fetches.rate(of_counts=True),
            "fetch-total": float(self.fetches.count),
            "fetch-latency-avg": self.fetches.avg() * 1000,
            "fetch-latency-max": self.fetches.max() * 1000,
            "fetch-throttle-time-avg": self.throttle.avg(),
            "fetch-throttle-time-max": self.throttle.max(),
            "records-lag-max": float(max(lags.values(), default=0)),
        }
        for tp, lag in sorted(lags.items()):
            out[f"{tp}.records-lag"] = float(lag)
        return {"consumer-fetch-manager-metrics": out}


def _per(total: float, count: int) -> float:
    return total / count if count else 0.0


class PrometheusCollector:
    """A prometheus_client collector of a client's `metrics()`, for the application's own
    registry (the client never registers anything itself):

        registry.register(PrometheusCollector(producer.metrics, client_id="orders"))

    `metrics` is called at each scrape, on the scraping thread: give the blocking client's
    `metrics` (it reads on the client's loop thread), or for an asyncio client a callable that
    does the same. Each figure becomes `gregor_client_<name>` (dashes as underscores; `-total`
    figures as counters `..._total`, the others as gauges) labelled with `group` (the
    kafka-python group), `client_id` and, for per-partition lag, `partition` ("topic-p")."""

    def __init__(
        self, metrics: Callable[[], dict[str, dict[str, float]]], client_id: str = ""
    ) -> None:
        self._metrics = metrics
        self._client_id = client_id

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        families: dict[str, Any] = {}
        for group, figures in self._metrics().items():
            for key, value in figures.items():
                partition, _, name = key.rpartition(".")
                total = name.endswith("-total")
                base = "gregor_client_" + (name[: -len("-total")] if total else name).replace(
                    "-", "_"
                )
                labels = ["group", "client_id"] + (["partition"] if partition else [])
                fam = families.get(base)
                if fam is None:
                    kind = CounterMetricFamily if total else GaugeMetricFamily
                    fam = families[base] = kind(
                        base, f"kafka-python's {group} {name}", labels=labels
                    )
                fam.add_metric([group, self._client_id] + ([partition] if partition else []), value)
        yield from families.values()
