"""Metrics and health checks of a node: one prometheus_client registry per process, served on
a listener of its own (`metrics.listener`), off the request path (docs/metrics.md).

    registry = CollectorRegistry()          # the node's own, never the global default one
    registry.register(QuorumCollector(...)) # state read at scrape time: the hot path pays nothing
    server = MetricsServer(registry, ("127.0.0.1", 9404), ready=lambda: None or "reason")
    server.start()                          # binds (port 0: a free one), serves on its own thread
    server.stop()                           # closes the socket, joins the thread

Endpoints: `/metrics` (Prometheus text format, written by prometheus_client), `/health/live`
(200 while the process serves), `/health/ready` (200 once `ready()` returns None, else 503 with
its one-line reason).

This module sits in controller/ so that both the controller process and the broker
(broker/metrics.py) use it (docs/architecture.md §2: broker imports controller, never the reverse).

Threads: `start`/`stop` from the owner's control thread; the HTTP server runs one thread that
accepts and one short-lived daemon thread per request (prometheus_client's
ThreadingWSGIServer), so a slow scraper holds only its own thread; collectors run on those
threads and must only read.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, Histogram, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import ThreadingWSGIServer
from prometheus_client.registry import Collector

from client.config import setting
from client.config.loader import Config
from client.config.types import parse_http_listener

log = logging.getLogger(__name__)

ReadyCheck = Callable[[], "str | None"]  # None: ready; else the one-line reason it is not


class _QuietHandler(WSGIRequestHandler):
    """No access log line per scrape on stderr (a library does not write to its host's
    stderr); errors still go to the logger."""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base's name)
        pass


class MetricsServer:
    def __init__(
        self,
        registry: CollectorRegistry,
        address: tuple[str, int],
        ready: ReadyCheck,
        name: str = "metrics",
    ) -> None:
        self.registry = registry
        self._address = address
        self._ready = ready
        self._name = name
        self._metrics_app = make_wsgi_app(registry)
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.address: tuple[str, int] | None = None  # bound (host, port), once started

    def start(self) -> tuple[str, int]:
        """Bind and serve on a thread of its own; returns the bound (host, port). OSError
        (address in use, ...) propagates: the owner refuses to start."""
        host, port = self._address
        server_class = ThreadingWSGIServer
        if ":" in host:  # IPv6 literal
            import socket

            class _V6(ThreadingWSGIServer):
                address_family = socket.AF_INET6

            server_class = _V6
        self._server = make_server(
            host, port, self._app, server_class=server_class, handler_class=_QuietHandler
        )
        self.address = (host, int(self._server.server_address[1]))
        self._thread = threading.Thread(
            target=self._server.serve_forever, name=self._name, kwargs={"poll_interval": 0.2}
        )
        self._thread.daemon = True
        self._thread.start()
        log.info("metrics and health checks on http://%s:%d", *self.address)
        return self.address

    def stop(self) -> None:
        """Stop serving, close the socket, join the thread. Idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(5.0)

    def _app(
        self, environ: dict[str, Any], start_response: Callable[..., object]
    ) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/health/live":
            return _text(start_response, "200 OK", "live")
        if path == "/health/ready":
            try:
                reason = self._ready()
            except Exception as exc:  # a broken check is "not ready", with why
                log.exception("readiness check failed")
                reason = f"readiness check failed: {exc}"
            if reason is None:
                return _text(start_response, "200 OK", "ready")
            return _text(start_response, "503 Service Unavailable", reason)
        if path in ("/metrics", "/"):
            result: Iterable[bytes] = self._metrics_app(environ, start_response)
            return result
        return _text(
            start_response, "404 Not Found", "not found: /metrics, /health/live, /health/ready"
        )


def _text(start_response: Callable[..., object], status: str, line: str) -> list[bytes]:
    body = (line + "\n").encode()
    start_response(
        status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))]
    )
    return [body]


def metrics_address(config: Config) -> tuple[str, int] | None:
    """`metrics.listener` of `config` -> (host, port), or None when off."""
    return parse_http_listener(setting(config, "metrics_listener", None) or "")


# append to commit of a metadata proposal: 0.1 ms .. 10 s
COMMIT_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
)  # fmt: skip


class QuorumMetrics:
    """The quorum's events, recorded where they happen: each proposal's commit latency on the
    leader (RaftMetadataLog.on_commit_latency, called on its loop thread). Built once per
    process, before or after the log starts (proposals made before are not timed)."""

    def __init__(self, registry: CollectorRegistry, log: Any) -> None:
        self.commit_latency = Histogram(
            "gregor_raft_commit_latency_seconds",
            "time from a metadata proposal's append on the leader to its commit by the quorum"
            " (Kafka: raft-metrics commit-latency-avg/-max)",
            buckets=COMMIT_BUCKETS,
            registry=registry,
        )
        log.on_commit_latency = self.commit_latency.observe


class QuorumCollector(Collector):
    """The controller's state, read at scrape time: active controller, the Raft quorum's leader,
    term and high watermark, leader changes, fenced and registered brokers, reassignments in
    flight, offline partitions. `log` is a RaftMetadataLog (its `node` is the Raft core),
    `image()` the latest metadata image."""

    def __init__(self, log: Any, image: Callable[[], Any], with_offline: bool = True) -> None:
        """`with_offline`: also the offline-partitions gauge (False where the broker's own
        collector has it: the combined server)."""
        self._log = log
        self._image = image
        self._with_offline = with_offline

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        from controller.raft.state import Role

        node = self._log.node
        leader = node.leader_id
        yield GaugeMetricFamily(
            "gregor_controller_active",
            "1 on the active controller (the Raft leader of the metadata quorum), else 0"
            " (Kafka: ActiveControllerCount)",
            value=1 if node.role is Role.LEADER else 0,
        )
        yield GaugeMetricFamily(
            "gregor_raft_current_leader",
            "the metadata quorum's leader id as this node knows it; -1 unknown"
            " (Kafka: raft-metrics current-leader)",
            value=-1 if leader is None else leader,
        )
        yield GaugeMetricFamily(
            "gregor_raft_current_epoch",
            "the metadata quorum's current term (Kafka: raft-metrics current-epoch)",
            value=node.term,
        )
        yield GaugeMetricFamily(
            "gregor_raft_high_watermark",
            "the metadata log's committed offset as this node knows it"
            " (Kafka: raft-metrics high-watermark)",
            value=node.log.committed,
        )
        yield CounterMetricFamily(
            "gregor_raft_leader_changes",
            "times the quorum's leader known to this node changed to another (the first leader"
            " it learns of after start counts one) (Kafka: controller LeaderElectionRate)",
            value=self._log.leader_changes,
        )
        image = self._image()
        brokers = list(image.brokers.values())
        fenced = sum(1 for b in brokers if b.fenced)
        yield GaugeMetricFamily(
            "gregor_controller_fenced_brokers",
            "registered brokers that are fenced (Kafka: FencedBrokerCount)",
            value=fenced,
        )
        yield GaugeMetricFamily(
            "gregor_controller_active_brokers",
            "registered brokers that are unfenced (Kafka: ActiveBrokerCount)",
            value=len(brokers) - fenced,
        )
        yield from reassignments(image)
        if self._with_offline:
            yield offline_partitions(image)


def offline_partitions(image: Any) -> GaugeMetricFamily:
    """Partitions of the metadata image without a leader (Kafka: OfflinePartitionsCount)."""
    offline = sum(1 for t in image.topics.values() for p in t.partitions.values() if p.leader < 0)
    return GaugeMetricFamily(
        "gregor_partitions_offline",
        "partitions without a leader in the metadata image (cluster-wide: take max across"
        " nodes, not sum) (Kafka: OfflinePartitionsCount)",
        value=offline,
    )


def reassignments(image: Any) -> Iterator[GaugeMetricFamily]:
    """Partition reassignments in flight in the metadata image (KIP-455: adding or removing
    replicas), and the replicas being added and removed per broker."""
    moving = 0
    per_broker: dict[tuple[str, str], int] = {}
    for t in image.topics.values():
        for p in t.partitions.values():
            if p.adding_replicas or p.removing_replicas:
                moving += 1
                for kind, ids in (("adding", p.adding_replicas), ("removing", p.removing_replicas)):
                    for b in ids:
                        key = (str(b), kind)
                        per_broker[key] = per_broker.get(key, 0) + 1
    yield GaugeMetricFamily(
        "gregor_controller_reassigning_partitions",
        "partitions with a reassignment in flight (replicas being added or removed) in this"
        " node's metadata image (Kafka: ReassigningPartitions)",
        value=moving,
    )
    replicas = GaugeMetricFamily(
        "gregor_controller_reassigning_replicas",
        "replicas a reassignment in flight is adding to (kind=adding) or removing from"
        " (kind=removing) a broker",
        labels=["broker", "kind"],
    )
    for key in sorted(per_broker):
        replicas.add_metric(list(key), per_broker[key])
    yield replicas


def quorum_ready(log: Any, image: Callable[[], Any]) -> str | None:
    """A controller is ready once its quorum has a known leader and it has applied metadata."""
    node = log.node
    if node.leader_id is None:
        return "no known leader of the metadata quorum"
    if image().offset < 0 and node.log.committed > 0:
        return "metadata not loaded yet"
    return None


def new_registry() -> CollectorRegistry:
    """The node's own registry (never prometheus_client's global REGISTRY: a library must not
    change its host process), without the process/platform collectors of the default one."""
    return CollectorRegistry(auto_describe=True)
