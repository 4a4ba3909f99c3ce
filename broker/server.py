"""BrokerServer: the broker process's request pipeline around a BrokerNode.

    clients ⇄ acceptor → network threads (uvloop each) ⇄ request channel (bounded) → I/O pool
                                                                     → handlers → BrokerNode services

Start-up (`start()`, returns once listening): bind one listening socket per listener (port 0 →
ephemeral; broker/listeners.py), build the node (`build_node`, the one place the node is wired
in), tell it the bound listeners, start it, start the I/O pool, then the network threads and
the acceptors.

Graceful shutdown (`shutdown()`, idempotent): first the controlled shutdown
(`node.controlled_shutdown()`, while still serving, as Kafka does: followers keep fetching and
acks=all produces waiting on them complete, then leadership moves and the waiting ones end
with NOT_LEADER_OR_FOLLOWER, which producers retry on the new leader); stop accepting; stop
taking new requests; wait
(up to `timeout`) for every in-flight request to be answered, including delayed operations
still in a purgatory; stop the I/O pool; `node.shutdown()` (flush, clean-shutdown marker);
close the connections (written responses are flushed first) and stop the network threads.
`serve_forever()` does start-less waiting: SIGTERM/SIGINT → graceful shutdown; SIGHUP →
`reload_tls()` (certificates, keys and CAs re-read for new connections).

Fatal errors: `fail(reason)` (any thread; the node's `on_fatal` — e.g. the one-voter
controller's Raft storage failed) logs CRITICAL, sets `exit_code` = 1 and `fatal_reason`, and
requests the same graceful shutdown; `gregor server` then exits with that status.

Threads: `start`, `shutdown`, `serve_forever` from one control thread (the main thread for
signal handling); `request_shutdown` from anywhere (signal handlers included).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from broker.io_pool import IoPool
from broker.listeners import Listeners, kafka_listener_names, parse_endpoints
from broker.network.socket_server import Decoder, NetworkSettings, SocketServer
from broker.request_channel import RequestChannel
from client.config import setting
from client.config.loader import Config
from client.config.types import parse_list
from client.errors import ConfigError, InconsistentClusterIdError
from client.fsutil import make_dirs
from client.security.protocols import SASL_PROTOCOLS, TLS_PROTOCOLS
from client.security.tls import ReloadableContext, TlsSettings
from controller.metrics import metrics_address

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerSettings:
    """The request-pipeline keys of the broker config, in one place."""

    network: NetworkSettings
    num_io_threads: int
    queued_max_requests: int
    node_id: int
    log_dirs: tuple[str, ...]
    listeners: Listeners
    # listener name -> its server TLS context (SSL / SASL_SSL listeners; one context shared,
    # reloaded on SIGHUP)
    tls: Mapping[str, ReloadableContext] = field(default_factory=dict)
    sasl: frozenset[str] = frozenset()  # SASL listeners' names
    metrics_address: tuple[str, int] | None = None  # metrics.listener (None: off)
    metrics_partition_labels: bool = False

    @classmethod
    def from_config(cls, config: Config) -> ServerSettings:
        listeners = Listeners.from_config(config)  # ConfigError: bad names, unknown advertised
        kafka = kafka_listener_names(config, listeners)  # ConfigError: bad listener.protocol.map
        decoders: tuple[tuple[str, Decoder], ...] = ()
        if kafka:
            from broker.kafka import decode_request  # kio only where a Kafka listener is

            decoders = tuple((name, decode_request) for name in sorted(kafka))
        first, *rest = listeners.bind
        tls_names = [e.name for e in listeners.bind if listeners.protocol(e.name) in TLS_PROTOCOLS]
        server_tls = (
            ReloadableContext(TlsSettings.from_config(config), server=True) if tls_names else None
        )
        return cls(
            network=NetworkSettings(
                host=first.host,
                port=first.port,
                name=first.name,
                extra_listeners=tuple((e.name, e.host, e.port) for e in rest),
                decoders=decoders,
                num_network_threads=int(config.num_network_threads),
                socket_request_max_bytes=int(config.socket_request_max_bytes),
                connections_max_idle_ms=int(config.connections_max_idle_ms),
                max_connections=int(config.max_connections),
                queued_max_request_bytes=int(config.queued_max_request_bytes),
                socket_request_receive_timeout_ms=int(config.socket_request_receive_timeout_ms),
                sasl_server_max_receive_size=int(config.sasl_server_max_receive_size),
                sasl_server_authentication_timeout_ms=int(
                    config.sasl_server_authentication_timeout_ms
                ),
                connection_failed_authentication_delay_ms=int(
                    config.connection_failed_authentication_delay_ms
                ),
            ),
            num_io_threads=int(config.num_io_threads),
            queued_max_requests=int(config.queued_max_requests),
            node_id=int(config.node_id),
            log_dirs=parse_list(config.log_dirs),
            listeners=listeners,
            tls=dict.fromkeys(tls_names, server_tls) if server_tls is not None else {},
            sasl=frozenset(
                e.name for e in listeners.bind if listeners.protocol(e.name) in SASL_PROTOCOLS
            ),
            metrics_address=metrics_address(config),  # ValueError: not http://HOST:PORT
            metrics_partition_labels=bool(setting(config, "metrics_partition_labels", False)),
        )


def parse_listener(listeners: Any) -> tuple[str, int]:
    """The first listener of `listeners` ("NAME://h:p,..." or "h:p" or a list) → (h, p);
    ValueError (a ConfigError) naming `listeners` when there is none or it is malformed."""
    endpoints = parse_endpoints(listeners, "listeners")
    if not endpoints:
        raise ValueError("listeners: no listener configured")
    return endpoints[0].host, endpoints[0].port


class NetworkOnlyNode:
    """Stands in for broker.node.BrokerNode while that module does not exist yet: services
    with the config and identity only, so the request pipeline and ApiVersions work."""

    def __init__(self, config: Config, address: tuple[str, int]) -> None:
        settings = ServerSettings.from_config(config)
        self.services = _Services(config, settings.node_id, address)
        self._log_dirs = settings.log_dirs

    def start(self) -> None:
        for d in self._log_dirs:
            make_dirs(d)

    def controlled_shutdown(self) -> None:
        pass  # (no controller, no partitions to move)

    def shutdown(self) -> None:
        pass


@dataclass
class _Services:
    config: Any
    node_id: int
    advertised: tuple[str, int]
    cluster_id: str | None = None
    controller: Any = None
    replica_manager: Any = None
    log_manager: Any = None
    metadata: Any = None
    produce_purgatory: Any = None
    fetch_purgatory: Any = None
    metrics: Any = None


def build_node(config: Config, address: tuple[str, int]) -> Any:
    """The one place the node behind the pipeline is built. `address` is the bound listener."""
    try:
        from broker.node import BrokerNode
    except ModuleNotFoundError as exc:
        if exc.name != "broker.node":
            raise
        log.warning("broker.node is not available: serving the network layer only")
        return NetworkOnlyNode(config, address)
    node = BrokerNode(config)
    services = node.services
    # Port 0 binds an ephemeral port: tell the node what it really listens on.
    if getattr(services, "advertised", None) is None or services.advertised[1] == 0:
        services.advertised = address
    return node


class BrokerServer:
    def __init__(
        self, config: Config, node_factory: Any = build_node, dispatch: Any = None
    ) -> None:
        """`node_factory(config, address)` builds the node; `dispatch(request, services)` runs a
        request (default broker.handlers.dispatch; tests wrap it to slow or gate requests)."""
        self.config = config
        self.settings = ServerSettings.from_config(config)
        self._node_factory = node_factory
        self._dispatch = dispatch
        self.node: Any = None
        self.channel = RequestChannel(self.settings.queued_max_requests)
        self.socket_server = SocketServer(
            self.settings.network, self.channel, self.settings.tls, self.settings.sasl
        )
        self.io_pool: IoPool | None = None
        self.address: tuple[str, int] | None = None  # the first listener's bound address
        self.listeners: Listeners = self.settings.listeners  # ports filled in once bound
        self._state_lock = threading.Lock()
        self._started = False
        self._stopped = False
        self._shutdown_requested = threading.Event()
        self._shutdown_done = threading.Event()
        self.exit_code = 0  # 1 after fail()
        self.fatal_reason: str | None = None
        self.metrics: Any = None  # broker.metrics.BrokerMetrics while metrics.listener is set
        self._metrics_address = self.settings.metrics_address
        self.metrics_address: tuple[str, int] | None = None  # bound, once started
        # Kafka listeners: answers the requests broker/kafka holds (classic group joins and
        # syncs) at shutdown, so they do not hold it up
        self._kafka_close: Any = None

    @property
    def host(self) -> str:
        assert self.address is not None, "not started"
        return self.address[0]

    @property
    def port(self) -> int:
        assert self.address is not None, "not started"
        return self.address[1]

    @property
    def services(self) -> Any:
        return self.node.services

    def start(self) -> tuple[str, int]:
        """Bind, start node, I/O pool and network threads; returns the bound (host, port)."""
        with self._state_lock:
            assert not self._started, "start() called twice"
            self._started = True
        t0 = time.monotonic()
        try:
            bound = self.socket_server.bind()
            self.address = bound[self.listeners.bind[0].name]
            self.listeners = self.listeners.with_bound(bound)
            self.node = self._node_factory(self.config, self.address)
            if hasattr(self.node, "bind_listeners"):
                self.node.bind_listeners(self.listeners)
            if hasattr(self.node, "on_fatal"):
                self.node.on_fatal = self.fail
            self._start_metrics()
            self.node.start()
            dispatch = self._dispatch
            if dispatch is None:
                from broker.handlers import dispatch  # handler modules import heavier parts
            if self.settings.network.decoders:  # Kafka listeners: their requests go to broker.kafka
                from broker.kafka import by_protocol

                dispatch = by_protocol(dispatch)
                self._kafka_close = dispatch.close

            self.io_pool = IoPool(
                self.channel,
                partial(dispatch, services=self.node.services),
                self.settings.num_io_threads,
            )
            self.io_pool.start()
            self.socket_server.start_accepting()
        except InconsistentClusterIdError as exc:  # a refusal, not a bug: no traceback
            log.error("broker start-up refused: %s", exc)
            self.shutdown(timeout=5.0)
            raise
        except BaseException:
            log.exception("broker start-up failed; shutting down what started")
            self.shutdown(timeout=5.0)
            raise
        log.info(
            "broker %d listening on %s:%d (%d network, %d io threads) in %.0f ms",
            self.settings.node_id,
            self.address[0],
            self.address[1],
            self.settings.network.num_network_threads,
            self.settings.num_io_threads,
            (time.monotonic() - t0) * 1000,
        )
        for line in self.listeners.describe():
            log.info("broker %d %s", self.settings.node_id, line)
        return self.address

    def _start_metrics(self) -> None:
        """Serve /metrics and the health checks (metrics.listener) before the node starts, so
        /health/live answers and /health/ready says why not while it catches up."""
        if self._metrics_address is None:
            return
        from broker.metrics import BrokerMetrics, broker_ready

        node = self.node
        if not hasattr(node, "lifecycle"):
            raise ValueError("metrics.listener: needs a full broker node (broker.node)")
        metrics = BrokerMetrics(
            self._metrics_address,
            self.settings.metrics_partition_labels,
        )
        rm, lm = node.replica_manager, node.log_manager
        rm.on_appended = metrics.topics.appended
        rm.on_fetched = metrics.topics.fetched
        rm.applier.on_isr_change = metrics.isr_changed
        lm.on_flush_round = metrics.flush_round
        node.services.metrics = metrics.errors
        node.services.quotas.on_throttle = metrics.throttled
        self.metrics = metrics
        self.metrics_address = metrics.start(
            node,
            self.channel,
            lambda: broker_ready(node),
            self.socket_server,
            lambda: self.io_pool,
        )

    def fail(self, reason: str) -> None:
        """A fatal error (any thread): graceful shutdown, then exit status 1. The first reason
        is kept."""
        with self._state_lock:
            if self.fatal_reason is None:
                self.fatal_reason = reason
            self.exit_code = 1
        log.critical("fatal error: %s; shutting down", reason)
        self.request_shutdown()

    def request_shutdown(self) -> None:
        """Ask `serve_forever` to shut down (any thread, signal-handler safe)."""
        self._shutdown_requested.set()

    def serve_forever(self) -> None:
        """Wait for SIGTERM/SIGINT (or request_shutdown), then shut down gracefully.
        Must run on the main thread (signal handlers)."""
        previous = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, self._on_signal)
        previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, self._on_sighup)
        try:
            while not self._shutdown_requested.wait(1.0):
                pass
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        self.shutdown()

    def _on_sighup(self, signum: int, frame: Any) -> None:
        self.reload_tls()

    def reload_tls(self) -> bool:
        """Re-read every TLS certificate, key and CA file (SIGHUP; any thread): new
        connections, inbound and outbound, use them; live ones keep theirs. A file that fails
        to load keeps the previous context and is logged. True when everything reloaded."""
        contexts = {id(c): c for c in self.settings.tls.values()}
        node_reload = getattr(self.node, "reload_tls", None)
        ok = True
        for ctx in contexts.values():
            try:
                ctx.reload()
            except ConfigError as exc:
                log.error("TLS reload failed, keeping the previous certificates: %s", exc)
                ok = False
        if node_reload is not None:
            ok = node_reload() and ok
        if ok:
            log.info("TLS certificates reloaded")
        return ok

    def _on_signal(self, signum: int, frame: Any) -> None:
        log.info("received %s: shutting down", signal.Signals(signum).name)
        self.request_shutdown()

    def shutdown(self, timeout: float = 30.0) -> None:
        """Graceful shutdown (see module docstring). Idempotent; later calls wait for the first."""
        with self._state_lock:
            if self._stopped:
                first = False
            else:
                self._stopped = first = True
        if not first:
            self._shutdown_done.wait(timeout + 10.0)
            return
        t0 = time.monotonic()
        try:
            if self.node is not None:
                self.node.controlled_shutdown()
            self.socket_server.stop_accepting()
            self.socket_server.stop_processing()
            if self._kafka_close is not None:
                self._kafka_close()
            if not self.channel.wait_idle(timeout):
                log.warning(
                    "shutdown: %d requests still in flight after %.1fs",
                    self.channel.in_flight,
                    timeout,
                )
            if self.io_pool is not None:
                self.io_pool.shutdown()
            else:
                self.channel.close()
            if self.node is not None:
                self.node.shutdown()
            self.socket_server.shutdown()
        finally:
            if self.metrics is not None:
                self.metrics.stop()
            self._shutdown_done.set()
            self._shutdown_requested.set()
        log.info("broker shut down in %.0f ms", (time.monotonic() - t0) * 1000)
