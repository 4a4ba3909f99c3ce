"""The broker's metrics (docs/metrics.md): one registry per process, served by
controller.metrics.MetricsServer on `metrics.listener`.

Two kinds, so that the request path pays little per request and nothing per record:
- events, counted where they happen: requests and their latency per API and stage (once per
  request, on the network thread that sends the answer, lock-free: broker/request_metrics.py),
  error codes (from each response body, where RequestContext sends it), bytes and records in
  and out per topic (once per partition of a produce or fetch: broker/topic_metrics.py), flush
  latency and bytes (once per flusher round);
- state, read at scrape time by `BrokerCollector` (nothing on the hot path): under-replicated,
  under-min-ISR and offline partitions, leader and partition counts, followers' lag, request
  queue depth, purgatory sizes, open segment files and their budget.

Labels: `api`, `error` (names, bounded by the protocol), `topic` (per topic; per partition
too only with `metrics.partition.labels=true`), `kind` (purgatory), `stage`. Threads:
`topics.appended`/`topics.fetched`/`flush_round` from any thread (prometheus_client's metrics
are thread-safe); collectors run on the scrape thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from broker.group_metrics import GroupCollector
from broker.request_metrics import ErrorCounter, RequestCollector, StageRecorder
from broker.topic_metrics import TopicMetrics, log_size, replica_lag
from controller.metrics import (
    MetricsServer,
    QuorumCollector,
    QuorumMetrics,
    new_registry,
    offline_partitions,
)

FLUSH_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
)  # fmt: skip

THROTTLE_BUCKETS = (0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 11.0, 30.0)
# bytes made durable by one flusher round: 1 KiB .. 256 MiB, by powers of 4
FLUSH_SIZE_BUCKETS = tuple(float(1024 * 4**i) for i in range(10))


class BrokerCollector(Collector):
    """The broker's state, read at scrape time (`node` is a broker.node.BrokerNode, `channel`
    the request channel)."""

    def __init__(
        self, node: Any, channel: Any, network: Any = None, partition_labels: bool = False
    ) -> None:
        """`network`: the SocketServer (connections, request memory); None: not reported.
        `partition_labels`: per-partition series (metrics.partition.labels), else per topic."""
        self._node = node
        self._channel = channel
        self._network = network
        self._partition_labels = partition_labels

    def collect(self) -> Iterator[GaugeMetricFamily]:
        node = self._node
        info = GaugeMetricFamily(
            "gregor_broker_info",
            "1, labelled with this broker's node id (which node an endpoint is: gregor top)",
            labels=["node_id"],
        )
        info.add_metric([str(node.node_id)], 1)
        yield info
        rm = node.replica_manager
        partitions = list(rm.partitions().values())
        leaders = [p for p in partitions if p.is_leader]
        under_replicated = sum(1 for p in leaders if len(p.isr) < len(p.replicas))
        under_min_isr = sum(1 for p in leaders if len(p.isr) < node._min_insync_for(p.topic))
        yield GaugeMetricFamily(
            "gregor_partitions_under_replicated",
            "partitions this broker leads whose ISR is smaller than their replica set"
            " (Kafka: UnderReplicatedPartitions)",
            value=under_replicated,
        )
        yield GaugeMetricFamily(
            "gregor_partitions_under_min_isr",
            "partitions this broker leads whose ISR is smaller than min.insync.replicas"
            " (Kafka: UnderMinIsrPartitionCount)",
            value=under_min_isr,
        )
        yield GaugeMetricFamily(
            "gregor_replica_max_lag_records",
            "the largest lag, in offsets, of a follower behind this broker's log end over the"
            " partitions it leads (followers that have not fetched this leader epoch not counted)"
            " (Kafka: ReplicaFetcherManager MaxLag, seen from the leader)",
            value=max_follower_lag(leaders),
        )
        yield from replica_lag(leaders, self._partition_labels)
        yield GaugeMetricFamily(
            "gregor_partitions_leader",
            "partitions this broker leads (Kafka: LeaderCount)",
            value=len(leaders),
        )
        yield GaugeMetricFamily(
            "gregor_partitions",
            "partition replicas on this broker (Kafka: PartitionCount)",
            value=len(partitions),
        )
        yield offline_partitions(node.publisher.latest_image)
        yield GaugeMetricFamily(
            "gregor_request_queue_size",
            "requests waiting for an I/O thread (Kafka: RequestQueueSize)",
            value=self._channel.size,
        )
        network = self._network
        if network is not None:
            yield GaugeMetricFamily(
                "gregor_connections",
                "open client connections, over every listener (bounded by max.connections)"
                " (Kafka: socket-server-metrics connection-count)",
                value=network.connection_count,
            )
            yield GaugeMetricFamily(
                "gregor_request_memory_bytes",
                "bytes of requests received and not yet answered, held in the memory pool"
                " (Kafka: MemoryPoolUsed)",
                value=network.memory_pool.used,
            )
            yield GaugeMetricFamily(
                "gregor_request_memory_max_bytes",
                "the memory pool's size (queued.max.request.bytes)",
                value=network.memory_pool.capacity,
            )
        purgatory = GaugeMetricFamily(
            "gregor_purgatory_size",
            "delayed operations watched in a purgatory, by kind (Kafka: PurgatorySize)",
            labels=["kind"],
        )
        for kind, p in (("produce", node.produce_purgatory), ("fetch", node.fetch_purgatory)):
            purgatory.add_metric([kind], p.watched())
        yield purgatory
        yield log_size(partitions, self._partition_labels)
        lm = node.log_manager
        yield GaugeMetricFamily(
            "gregor_log_open_segment_files",
            "segment files held open by the log's descriptor cache",
            value=lm.open_segment_files(),
        )
        yield GaugeMetricFamily(
            "gregor_log_open_segment_files_max",
            "the descriptor cache's budget over every log dir (log.max.open.files)",
            value=sum(lm.handles(d).capacity for d in lm.log_dirs),
        )
        yield GaugeMetricFamily(
            "gregor_log_dirs_offline",
            "log directories taken offline by a storage error (Kafka: OfflineLogDirectoryCount)",
            value=len(lm.offline_dirs()),
        )


def max_follower_lag(leaders: list[Any]) -> int:
    """Leader's view: max over `leaders` and their followers of log end - the follower's
    fetch offset (a read without the partition's lock: a scrape may see a fetch half-applied,
    never a negative lag)."""
    lag = 0
    for p in leaders:
        end = p.log.end_offset
        for st in list(p.followers.values()):
            if st.log_end_offset >= 0:
                lag = max(lag, end - st.log_end_offset)
    return lag


class BrokerMetrics:
    """The broker process's registry, its recorders and its HTTP listener. Built by
    BrokerServer when `metrics.listener` is set; `start(node, channel, ready)` once the node
    exists, `stop()` at shutdown."""

    def __init__(self, address: tuple[str, int], partition_labels: bool = False) -> None:
        """`partition_labels`: per-partition series (metrics.partition.labels), else per topic."""
        self.registry = new_registry()
        self.partition_labels = partition_labels
        self.errors = ErrorCounter(self.registry)
        self.topics = TopicMetrics(self.registry, partition_labels)
        self.flush = Histogram(
            "gregor_log_flush_duration_seconds",
            "time of one flusher round (fsync, or syncfs, of the logs appended since the last"
            " round) (Kafka: LogFlushRateAndTimeMs)",
            buckets=FLUSH_BUCKETS,
            registry=self.registry,
        )
        self.flush_size = Histogram(
            "gregor_log_flush_size_bytes",
            "record bytes one flusher round made durable (appended to the logs it flushed since"
            " their previous flush)",
            buckets=FLUSH_SIZE_BUCKETS,
            registry=self.registry,
        )
        self.isr_shrinks = Counter(
            "gregor_isr_shrinks",
            "ISR shrinks of partitions this broker leads, as applied from the metadata (its own"
            " proposals and the controller's on fencing) (Kafka: IsrShrinksPerSec)",
            registry=self.registry,
        )
        self.isr_expands = Counter(
            "gregor_isr_expands",
            "ISR expansions of partitions this broker leads, as applied from the metadata"
            " (Kafka: IsrExpandsPerSec)",
            registry=self.registry,
        )
        self.quota_throttle = Histogram(
            "gregor_quota_throttle_time_seconds",
            "throttle time given to client responses over a client quota, by the quota that"
            " decided it (producer_byte_rate, consumer_byte_rate, request_percentage) (Kafka:"
            " throttle-time of the Produce/Fetch/Request quota metrics)",
            ["quota"],
            buckets=THROTTLE_BUCKETS,
            registry=self.registry,
        )
        self._address = address
        self.server: MetricsServer | None = None

    def throttled(self, quota: str, ms: int) -> None:
        """Any thread: a response got `ms` of throttle time from quota `quota`."""
        self.quota_throttle.labels(quota).observe(ms / 1000.0)

    def start(
        self,
        node: Any,
        channel: Any,
        ready: Callable[[], str | None],
        network: Any = None,
        io_pool: Callable[[], Any] = lambda: None,
    ) -> tuple[str, int]:
        """`network` the SocketServer (its network threads get a StageRecorder each: call
        before they start), `io_pool()` the I/O pool once it exists."""
        labels = self.partition_labels
        self.registry.register(BrokerCollector(node, channel, network, labels))
        self.registry.register(GroupCollector(node.group_coordinator, node.replica_manager, labels))
        processors = [] if network is None else list(network.processors)
        for p in processors:
            p.recorder = StageRecorder()
        self.registry.register(RequestCollector(lambda: processors, io_pool))
        node.publisher.subscribe(self.topics.on_metadata)
        quorum = node.quorum
        log = getattr(getattr(quorum, "controller", None), "log", None)
        if log is not None and hasattr(log, "node"):  # combined: this process is the quorum
            self.registry.register(
                QuorumCollector(log, lambda: quorum.loader.image, with_offline=False)
            )
            QuorumMetrics(self.registry, log)
        self.server = MetricsServer(self.registry, self._address, ready, name="broker-metrics")
        return self.server.start()

    def flush_round(self, seconds: float, nbytes: int) -> None:
        """One flusher round took `seconds` and made `nbytes` durable (the flusher's thread)."""
        self.flush.observe(seconds)
        self.flush_size.observe(nbytes)

    def isr_changed(self, old: int, new: int) -> None:
        (self.isr_shrinks if new < old else self.isr_expands).inc()

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


def broker_ready(node: Any) -> str | None:
    """None once the broker is registered and unfenced (its lifecycle is RUNNING, which it
    reaches only once caught up with the metadata log, and its registration in the metadata
    is unfenced) and has every log dir online; else the reason."""
    from broker.lifecycle import RUNNING

    state = node.lifecycle.state
    if state != RUNNING:
        return f"broker lifecycle is {state}, not {RUNNING} (registered, caught up, unfenced)"
    reg = node.publisher.image.brokers.get(node.node_id)
    if reg is None or reg.fenced:
        return "fenced in the metadata (not registered, or its heartbeats lapsed)"
    offline = node.log_manager.offline_dirs()
    if offline:
        return "log dirs offline: " + ", ".join(str(d) for d in offline)
    return None


__all__ = ["BrokerMetrics", "broker_ready", "new_registry"]
