"""Per-topic series of the broker (docs/metrics.md, "Topics and storage", "Replication"):
bytes and records in and out, counted where produce and fetch happen, and the followers' lag
behind this broker as leader, read at scrape time.

Labels: `topic` by default; with `metrics.partition.labels=true`, `topic` and `partition`
(one series per partition: mind the cardinality on brokers with thousands of partitions).

Threads: `appended`/`fetched` from the I/O threads (prometheus_client's counters are
thread-safe; the label children are cached and created under a lock); `replica_lag` on the
scrape thread, reading the partitions' state without their locks (a scrape may see a fetch
half-applied, never a negative lag).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily


class TopicMetrics:
    """Bytes and records in (appended by produce, as leader) and out (returned by fetch) per
    topic, or per partition with `partition_labels`. A deleted topic's series go (`forget`,
    on the metadata that deletes it), so topic churn does not grow the registry."""

    def __init__(self, registry: CollectorRegistry, partition_labels: bool = False) -> None:
        self.partition_labels = partition_labels
        labels = ["topic", "partition"] if partition_labels else ["topic"]
        self._counters = (
            Counter(
                "gregor_topic_bytes_in",
                "record-batch bytes appended by produce requests, by topic (Kafka: BytesInPerSec)",
                labels,
                registry=registry,
            ),
            Counter(
                "gregor_topic_records_in",
                "records appended by produce requests, by topic (Kafka: MessagesInPerSec)",
                labels,
                registry=registry,
            ),
            Counter(
                "gregor_topic_bytes_out",
                "record-batch bytes returned by fetch requests (consumers and followers), by"
                " topic (Kafka: BytesOutPerSec)",
                labels,
                registry=registry,
            ),
            Counter(
                "gregor_topic_records_out",
                "records returned by fetch requests (consumers and followers), by topic: the"
                " offsets the returned batches span (on a compacted topic, an upper bound)",
                labels,
                registry=registry,
            ),
        )
        # children cached per topic (or (topic, partition)); created and forgotten under the
        # lock, read without it: [bytes in, records in, bytes out, records out]
        self._lock = threading.Lock()
        self._children: dict[Any, tuple[Any, Any, Any, Any]] = {}

    def _make(self, key: Any) -> tuple[Any, Any, Any, Any]:
        with self._lock:
            got = self._children.get(key)
            if got is None:
                values = (key[0], str(key[1])) if self.partition_labels else (key,)
                c = self._counters
                got = self._children[key] = (
                    c[0].labels(*values),
                    c[1].labels(*values),
                    c[2].labels(*values),
                    c[3].labels(*values),
                )
            return got

    def appended(self, topic: str, partition: int, nbytes: int, nrecords: int) -> None:
        """A produce appended `nbytes` holding `nrecords` to `topic`-`partition`."""
        key = (topic, partition) if self.partition_labels else topic
        got = self._children.get(key) or self._make(key)
        got[0].inc(nbytes)
        got[1].inc(nrecords)

    def fetched(self, topic: str, partition: int, nbytes: int, nrecords: int) -> None:
        """A fetch returned `nbytes` spanning `nrecords` offsets of `topic`-`partition`."""
        key = (topic, partition) if self.partition_labels else topic
        got = self._children.get(key) or self._make(key)
        got[2].inc(nbytes)
        got[3].inc(nrecords)

    def forget(self, topic: str) -> None:
        """Drop `topic`'s series (it was deleted). An increment racing with this may be lost:
        it belonged to the deleted topic."""
        with self._lock:
            keys = [k for k in self._children if (k[0] if self.partition_labels else k) == topic]
            for key in keys:
                del self._children[key]
                values = (key[0], str(key[1])) if self.partition_labels else (key,)
                for counter in self._counters:
                    counter.remove(*values)

    def on_metadata(self, image: Any, delta: Any) -> None:
        """MetadataPublisher subscriber: forget the topics the delta deleted (and did not
        re-create)."""
        if delta is None:
            return
        for name in delta.deleted_topics:
            if name not in image.topics:
                self.forget(name)


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
