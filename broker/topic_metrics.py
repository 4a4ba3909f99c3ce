"""Per-topic series of the broker (docs/metrics.md, "Topics and storage", "Replication"):
bytes and records in and out, counted where produce and fetch happen, and the followers' lag
behind this broker as leader, read at scrape time.

Labels: `topic` by default; with `metrics.partition.labels=true`, `topic` and `partition`
(one series per partition: mind the cardinality on brokers with thousands of partitions).

Threads: `appended`/`fetched` from any thread (each counts in cells of its own);
`collect`, `log_size` and `replica_lag` on the scrape thread, reading the partitions' state without their locks (a scrape may see a fetch
half-applied, never a negative lag).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

_COUNTERS = (
    ("gregor_topic_bytes_in",
     "record-batch bytes appended by produce requests, by topic (Kafka: BytesInPerSec)"),
    ("gregor_topic_records_in",
     "records appended by produce requests, by topic (Kafka: MessagesInPerSec)"),
    ("gregor_topic_bytes_out",
     "record-batch bytes returned by fetch requests (consumers and followers), by topic"
     " (Kafka: BytesOutPerSec)"),
    ("gregor_topic_records_out",
     "records returned by fetch requests (consumers and followers), by topic: the offsets the"
     " returned batches span (on a compacted topic, an upper bound)"),
)  # fmt: skip


class TopicMetrics(Collector):
    """Bytes and records in (appended by produce, as leader) and out (returned by fetch) per
    topic, or per partition with `partition_labels`; registers itself in `registry`. A deleted
    topic's series go (`forget`, on the metadata that deletes it), so topic churn does not grow
    the registry.

    Each thread that counts keeps its own cells (plain integers: no lock per increment, a
    prometheus_client counter's lock cost ~0.7 µs an increment, four times per partition of a
    produce and a fetch); a scrape sums the threads' cells. The cells of a thread that ended
    stay (a counter never goes back); threads that count are the broker's long-lived ones."""

    def __init__(self, registry: CollectorRegistry, partition_labels: bool = False) -> None:
        self.partition_labels = partition_labels
        self._local = threading.local()
        self._lock = threading.Lock()  # guards the list of cells and forget()
        self._threads: list[dict[Any, list[int]]] = []  # each thread's {key: [4 counts]}
        registry.register(self)

    def _own(self) -> dict[Any, list[int]]:
        cells: dict[Any, list[int]] = {}
        with self._lock:
            self._threads.append(cells)
        self._local.cells = cells
        return cells

    def appended(self, topic: str, partition: int, nbytes: int, nrecords: int) -> None:
        """A produce appended `nbytes` holding `nrecords` to `topic`-`partition`."""
        key = (topic, partition) if self.partition_labels else topic
        try:
            cells = self._local.cells
        except AttributeError:
            cells = self._own()
        c = cells.get(key)
        if c is None:
            c = cells[key] = [0, 0, 0, 0]
        c[0] += nbytes
        c[1] += nrecords

    def fetched(self, topic: str, partition: int, nbytes: int, nrecords: int) -> None:
        """A fetch returned `nbytes` spanning `nrecords` offsets of `topic`-`partition`."""
        key = (topic, partition) if self.partition_labels else topic
        try:
            cells = self._local.cells
        except AttributeError:
            cells = self._own()
        c = cells.get(key)
        if c is None:
            c = cells[key] = [0, 0, 0, 0]
        c[2] += nbytes
        c[3] += nrecords

    def forget(self, topic: str) -> None:
        """Drop `topic`'s series (it was deleted). An increment racing with this may be lost,
        or start the series again from what it counted: it belonged to the deleted topic."""
        by_partition = self.partition_labels
        with self._lock:
            for cells in self._threads:
                for key in [k for k in list(cells) if (k[0] if by_partition else k) == topic]:
                    cells.pop(key, None)

    def on_metadata(self, image: Any, delta: Any) -> None:
        """MetadataPublisher subscriber: forget the topics the delta deleted (and did not
        re-create)."""
        if delta is None:
            return
        for name in delta.deleted_topics:
            if name not in image.topics:
                self.forget(name)

    def collect(self) -> Iterator[CounterMetricFamily]:
        totals: dict[Any, list[int]] = {}
        with self._lock:
            threads = list(self._threads)
        for cells in threads:
            for key, c in list(cells.items()):
                t = totals.get(key)
                if t is None:
                    totals[key] = list(c)
                else:
                    for i in range(4):
                        t[i] += c[i]
        labels = _labels(self.partition_labels)
        families = [CounterMetricFamily(name, doc, labels=labels) for name, doc in _COUNTERS]
        for key in sorted(totals):
            values = [key[0], str(key[1])] if self.partition_labels else [key]
            for family, v in zip(families, totals[key], strict=True):
                family.add_metric(values, v)
        yield from families


def _labels(partition_labels: bool) -> list[str]:
    return ["topic", "partition"] if partition_labels else ["topic"]


def _values(p: Any, partition_labels: bool) -> list[str]:
    return [p.topic, str(p.partition)] if partition_labels else [p.topic]


def log_size(partitions: Iterable[Any], partition_labels: bool) -> GaugeMetricFamily:
    """The bytes of this broker's replicas' segments, by topic (or partition)."""
    sizes: dict[tuple[str, ...], int] = {}
    for p in partitions:
        log = getattr(p, "log", None)
        if log is not None:
            key = tuple(_values(p, partition_labels))
            sizes[key] = sizes.get(key, 0) + log.size_bytes
    family = GaugeMetricFamily(
        "gregor_topic_log_size_bytes",
        "bytes of the segments of this broker's replicas of a topic, by topic"
        " (Kafka: kafka.log:type=Log,name=Size, summed per topic)",
        labels=_labels(partition_labels),
    )
    for key in sorted(sizes):
        family.add_metric(list(key), sizes[key])
    return family


def replica_lag(
    leaders: Iterable[Any], partition_labels: bool, now_ms: int | None = None
) -> Iterator[GaugeMetricFamily]:
    """The followers' lag behind this broker, over the partitions it leads, by topic (or
    partition): the largest in records (log end - the follower's fetch offset; followers that
    have not fetched in this leader epoch not counted) and the largest in time (now - when the
    follower was last caught up with the leader's log end; one never caught up since this
    leader started tracking it: now - that start). A partition without followers reports 0."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    records: dict[tuple[str, ...], int] = {}
    millis: dict[tuple[str, ...], int] = {}
    for p in leaders:
        key = tuple(_values(p, partition_labels))
        end = p.log.end_offset
        lag_r = records.get(key, 0)
        lag_ms = millis.get(key, 0)
        for st in list(p.followers.values()):
            if st.log_end_offset >= 0:
                lag_r = max(lag_r, end - st.log_end_offset)
            since = st.last_caught_up_ms or st.tracked_since_ms
            if since > 0:
                lag_ms = max(lag_ms, now - since)
        records[key] = lag_r
        millis[key] = lag_ms
    lag_records = GaugeMetricFamily(
        "gregor_replica_lag_records",
        "the largest lag in offsets of a follower behind this broker's log end, by topic, over"
        " the partitions this broker leads (Kafka: kafka.server:type=FetcherLagMetrics,"
        "name=ConsumerLag, there on the follower)",
        labels=_labels(partition_labels),
    )
    lag_seconds = GaugeMetricFamily(
        "gregor_replica_lag_seconds",
        "the longest time since a follower was last caught up with this broker's log end, by"
        " topic, over the partitions this broker leads (what replica.lag.time.max.ms is"
        " compared with)",
        labels=_labels(partition_labels),
    )
    for key in sorted(records):
        lag_records.add_metric(list(key), records[key])
        lag_seconds.add_metric(list(key), max(0, millis[key]) / 1000.0)
    yield lag_records
    yield lag_seconds
