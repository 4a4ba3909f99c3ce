"""BrokerNode: one broker's parts, built and owned in one place (combined or broker-only).

    node = BrokerNode(config)      # builds; nothing runs yet
    node.bind_listeners(listeners) # BrokerServer: the listeners with their bound ports (port 0)
    node.start()                   # replays metadata, registers, unfences, starts background work
    node.services                  # what RequestContext.services is (see Services)
    node.shutdown()                # flush all, clean-shutdown marker, stop every thread

Parts: LogManager (one group-commit Flusher per log dir, on_flushed → ReplicaManager),
ReplicaManager, the produce and fetch purgatories (one SystemTimer), the link to the quorum
chosen by process.roles (broker/quorum_link.py: a combined node's own one-voter Raft quorum,
log in `<log.dirs[0]>/__cluster_metadata/raft` unless metadata.log.dir is set, or a remote
quorum reached over the network and followed as an observer), the ControllerChannel it
provides, the BrokerLifecycle (register, unfence, controlled shutdown: broker/lifecycle.py),
the MetadataPublisher (loader → replica manager → handlers), and one background thread
(`broker-tasks`) for the broker heartbeat, retention, high-watermark and recovery-point
checkpoints, and flush_due (log.flush.on.ack=false).

Start-up replays the metadata log, so topics survive restarts: the publisher recreates every
partition before the broker registers; the broker then registers (fenced), heartbeats, and is
unfenced by the controller, which elects it leader of its partitions again.

Cluster id (controller/quorum/cluster_id.py): the node's own id is `cluster.id` or the file
`<log.dirs[0]>/cluster.id`; it never mints one. The quorum's id is in the metadata image (the
ClusterId record); a different own id stops start-up with InconsistentClusterIdError (combined:
checked against its own log before registering; broker: the controller refuses the
registration), and after registering the quorum's id is stored in the file.

Fatal controller errors: when the one-voter quorum's Raft storage fails (fsync/write error) the
controller stops (Kafka halts the process in that case). The broker cannot change metadata,
heartbeat or elect leaders without it, so `_controller_failed` (on the controller thread) logs
CRITICAL and calls `node.on_fatal(reason)` — BrokerServer sets it to `BrokerServer.fail`, which
shuts the process down gracefully with exit status 1.

Threads: construct/start/shutdown from one control thread; `services` from any thread;
`on_fatal` is called on the controller thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from broker.group import GroupCoordinator
from broker.lifecycle import RUNNING, BrokerLifecycle, failure_reason
from broker.listeners import Listeners
from broker.log import LogConfig, LogManager
from broker.metadata_publisher import MetadataPublisher
from broker.node_settings import BrokerSettings
from broker.purgatory import Purgatory, SystemTimer
from broker.quorum_link import LocalQuorum, RemoteQuorum
from broker.replica import ReplicaManager
from broker.replica.fetcher import ReplicaFetcherManager
from broker.replica.isr import IsrProposer
from broker.security.links import OutgoingSecurity
from broker.services import Services
from broker.txn import NetworkMarkerChannel, TxnCoordinator
from broker.txn.marker_append import ReplicaMarkers
from broker.txn.markers import MarkerSettings
from client.config.loader import Config
from client.config.types import parse_list
from client.errors import ConfigError, GregorError, InconsistentClusterIdError
from client.fsutil import lock_directories, make_dirs
from controller.channel import ControllerChannel
from controller.metadata.image import MetadataImage
from controller.metadata.records import RESOURCE_TOPIC
from controller.quorum.cluster_id import CLUSTER_ID_FILE, LocalClusterId

_log = logging.getLogger(__name__)

__all__ = ["CLUSTER_ID_FILE", "BrokerNode", "Services"]  # (Services: broker/services.py)

# topic config name -> LogConfig field
_TOPIC_LOG_CONFIGS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "segment.bytes": ("segment_bytes", int),
    "segment.ms": ("segment_ms", int),
    "segment.index.bytes": ("index_size_max_bytes", int),
    "index.interval.bytes": ("index_interval_bytes", int),
    "retention.ms": ("retention_ms", int),
    "retention.bytes": ("retention_bytes", int),
    "max.message.bytes": ("max_message_bytes", int),
    "flush.messages": ("flush_messages", int),
    "flush.ms": ("flush_ms", int),
    "cleanup.policy": ("cleanup_policy", parse_list),
    "delete.retention.ms": ("delete_retention_ms", int),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", float),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", int),
}


class BrokerNode:
    def __init__(self, config: Config) -> None:
        """`config`: the broker's Config; its keys are read once, into `self.settings`
        (BrokerSettings); the config itself goes on to the parts that read other roles' keys
        (the combined node's controller, outgoing security, the handlers' DescribeConfigs)."""
        self.config = config
        self.settings = settings = BrokerSettings.from_config(config)
        self.node_id = settings.node_id
        self.log_dirs = list(settings.log_dirs)
        self.listeners = Listeners.from_config(config)
        inter = self.listeners.inter_broker_endpoint
        self.advertised = (inter.host, inter.port)
        self.rack = settings.rack
        for d in self.log_dirs:
            make_dirs(d)
        self.combined = settings.combined
        # Before anything reads or writes them: one process per log dir and metadata dir.
        locked: list[Path | str] = [*self.log_dirs]
        if settings.metadata_dir is not None:
            locked.append(settings.metadata_dir)
        self._dir_locks = lock_directories(locked)
        try:
            self._build(config, settings)
        except BaseException:
            self._release_locks()
            raise

    def reload_tls(self) -> bool:
        """Re-read the client TLS files of the links this broker opens (SIGHUP, via
        BrokerServer; any thread); False when one failed (the previous one is kept)."""
        return self.outgoing.reload()

    def _build(self, config: Config, settings: BrokerSettings) -> None:
        self.outgoing = OutgoingSecurity(config, self.listeners, self.combined)
        # this node's own cluster id: cluster.id, or <log.dirs[0]>/cluster.id (None: new node)
        self.own_cluster_id = LocalClusterId(self.log_dirs[0], settings.cluster_id)
        self.log_config = settings.log
        self.publisher: MetadataPublisher
        self.log_manager = LogManager(
            self.log_dirs,
            self.log_config,
            topic_config=self._topic_log_config,
            max_open_files=settings.log_max_open_files,
        )
        self.timer = SystemTimer("purgatory")
        self.produce_purgatory = Purgatory("produce", self.timer)
        self.fetch_purgatory = Purgatory("fetch", self.timer)
        self.replica_manager = ReplicaManager(
            self.node_id,
            self.log_manager,
            self.produce_purgatory,
            self.fetch_purgatory,
            settings.replica,
            min_insync_for=self._min_insync_for,
        )
        self.publisher = MetadataPublisher(self.replica_manager)
        self.group_coordinator = GroupCoordinator(
            self.node_id,
            self.replica_manager,
            settings.group,
            image=lambda: self.publisher.image,
        )
        self.txn_coordinator = TxnCoordinator(
            self.node_id,
            self.replica_manager,
            settings.txn,
            image=lambda: self.publisher.image,
            next_producer_id=lambda: self.services.producer_ids.next_id(),
            markers=NetworkMarkerChannel(
                self.node_id,
                self._leader_of,
                self._endpoint_of,
                MarkerSettings(
                    timeout_s=settings.request_timeout_ms / 1000,
                    max_frame_bytes=settings.socket_request_max_bytes,
                    tls=self.outgoing.inter_broker_tls,
                    sasl=self.outgoing.inter_broker_sasl,
                ),
                local=ReplicaMarkers(
                    self.replica_manager,
                    lambda: self.publisher.image,
                    self.group_coordinator.on_txn_marker,
                ),
            ),
        )
        self.fetchers = ReplicaFetcherManager(
            self.node_id,
            self.replica_manager,
            self._endpoint_of,
            replace(
                settings.fetcher,
                tls=self.outgoing.inter_broker_tls,
                sasl=self.outgoing.inter_broker_sasl,
            ),
        )
        self.replica_manager.applier.fetchers = self.fetchers
        self.quorum: LocalQuorum | RemoteQuorum
        if settings.metadata_dir is not None:  # combined
            self.metadata_dir = settings.metadata_dir
            self.quorum = LocalQuorum(
                self.node_id,
                self.metadata_dir,
                settings.controller,
                settings.max_records_between_snapshots,
                self._controller_failed,
                cluster_id=self.own_cluster_id.value,
            )
        else:
            self.quorum = RemoteQuorum(
                self.node_id,
                settings.controller_quorum_voters,
                settings.request_timeout_ms,
                cluster_id=self.own_cluster_id.value,
                tls=self.outgoing.controller_tls,
            )
        self.controller: ControllerChannel = self.quorum.channel
        # Set by the owner (BrokerServer.fail): called once with the reason of a fatal error.
        self.on_fatal: Callable[[str], None] | None = None
        self.fatal_error: BaseException | None = None
        self.quorum.loader.subscribe(self.publisher.publish)
        self.publisher.subscribe(self._on_metadata)
        self.publisher.subscribe(self.group_coordinator.on_metadata)
        self.publisher.subscribe(self.txn_coordinator.on_metadata)
        self.services = Services(self)
        self.lifecycle = BrokerLifecycle(
            self.node_id,
            self.controller,
            self.publisher,
            self.replica_manager.applier.failed_replicas,
            self.replica_manager.applier.descriptors.reason,
        )
        self.broker_epoch = -1
        self.isr_proposer = IsrProposer(
            self.controller,
            self.node_id,
            lambda: self.broker_epoch,
            self.replica_manager.high_watermark_moved,
        )
        self.replica_manager.isr_proposer = self.isr_proposer.propose
        self._stop = threading.Event()
        self._tasks: threading.Thread | None = None
        self._heartbeats: threading.Thread | None = None
        self._started = False
        self._closed = False
        self._controlled_shutdown_done = False

    # -- construction helpers -------------------------------------------------------------------

    @property
    def cluster_id(self) -> str:
        """The quorum's cluster id once this node has seen it, else its own ("" when none)."""
        quorum = getattr(self, "quorum", None)
        cid = quorum.loader.image.cluster_id if quorum is not None else None
        return cid or self.own_cluster_id.value or ""

    def _role(self) -> str:
        return f"{'node' if self.combined else 'broker'} {self.node_id}"

    def _adopt_cluster_id(self) -> None:
        """After registering: the quorum's id (in the image from the registration on) is
        compared with this node's and stored in its data dir (`<log.dirs[0]>/cluster.id`)."""
        cid = self.quorum.loader.image.cluster_id
        if cid is None:  # (the controller writes it before the first registration)
            _log.warning("[broker=%d] the metadata log has no cluster id yet", self.node_id)
            return
        if self.own_cluster_id.store(cid):
            _log.info(
                "[broker=%d] cluster id %s stored in %s",
                self.node_id,
                cid,
                self.own_cluster_id.path,
            )
        if isinstance(self.quorum, RemoteQuorum):
            self.quorum.remote.cluster_id = cid  # claimed by later registrations

    def _topic_log_config(self, topic: str) -> LogConfig:
        publisher = getattr(self, "publisher", None)
        overrides = publisher.latest_image.topic_config(topic) if publisher is not None else {}
        kw: dict[str, Any] = {}
        for name, value in overrides.items():
            spec = _TOPIC_LOG_CONFIGS.get(name)
            if spec is not None and value is not None:
                kw[spec[0]] = spec[1](value)
        if not kw:
            return self.log_config
        try:
            return LogConfig(**{**self.log_config.__dict__, **kw})
        except ConfigError as exc:  # the controller accepted a value the log cannot use
            _log.error("topic %s: config %s unusable (%s); using broker defaults", topic, kw, exc)
            return self.log_config

    def _on_metadata(self, image: MetadataImage, delta: Any) -> None:
        """Publisher subscriber: topic config changes reach the topic's open logs."""
        if delta is None:
            topics = set(image.topics)
        else:
            topics = {name for rtype, name in delta.changed_configs if rtype == RESOURCE_TOPIC}
        if not topics:
            return
        for (topic, _p), log in self.log_manager.logs().items():
            if topic in topics:
                log.config = self._topic_log_config(topic)

    def bind_listeners(self, listeners: Listeners) -> None:
        """The listeners as bound (BrokerServer, before `start`): port 0 replaced by the real one."""
        self.listeners = self.services.listeners = listeners
        inter = listeners.inter_broker_endpoint
        self.advertised = self.services.advertised = (inter.host, inter.port)

    def _endpoint_of(self, broker_id: int) -> tuple[str, int] | None:
        """Where broker `broker_id` listens for replicas (its endpoint on this broker's
        inter.broker.listener.name), from the latest metadata (replica fetchers)."""
        b = self.publisher.image.brokers.get(broker_id)
        return None if b is None else b.endpoint(self.listeners.inter_broker)

    def _leader_of(self, topic: str, partition: int) -> int | None:
        """The leader of a partition in the latest metadata (-1: none now; None: no such
        partition), for the transaction markers."""
        t = self.publisher.image.topics.get(topic)
        reg = None if t is None else t.partitions.get(partition)
        return None if reg is None else reg.leader

    def _min_insync_for(self, topic: str) -> int:
        value = self.publisher.image.topic_config(topic).get("min.insync.replicas")
        if value is not None:
            return int(value)
        return self.settings.replica.min_insync_replicas

    def _controller_failed(self, exc: BaseException) -> None:
        """CombinedController's on_fatal, on the controller thread: its Raft storage failed and
        it has stopped. Hands the reason to `on_fatal` (the server shuts down)."""
        if self.fatal_error is not None:
            return
        self.fatal_error = exc
        reason = f"metadata quorum storage failed: {exc}"
        _log.critical(
            "[broker=%d] %s; a broker cannot run without its controller", self.node_id, reason
        )
        handler = self.on_fatal
        if handler is None:
            _log.critical(
                "[broker=%d] no owner to stop this process (on_fatal unset)", self.node_id
            )
        else:
            handler(reason)

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> None:
        """Replay metadata (recreating partitions), start flushers, register and wait until
        unfenced, then start the background tasks."""
        assert not self._started, "start() called twice"
        self._started = True
        self.advertised = self.services.advertised  # BrokerServer may have set the real port
        self.log_manager.start_flushers(on_flushed_many=self.replica_manager.on_flushed_many)
        self.log_manager.start_cleaner(self.settings.cleaner, self.replica_manager.high_watermarks)
        self.group_coordinator.start()
        self.txn_coordinator.start()
        self.quorum.start(timeout)  # replays / follows the committed log into the publisher
        # (combined: the log's id, written at start when it had none, is known by now)
        self.own_cluster_id.check(self.quorum.loader.image.cluster_id, self._role())
        host, port = self.advertised
        inter = self.listeners.inter_broker
        endpoints = [
            (name, host, port) if name == inter else (name, h, p)
            for name, h, p in self.listeners.registration()
        ]
        try:
            self.broker_epoch = self.lifecycle.start(host, port, self.rack, timeout, endpoints)
        except InconsistentClusterIdError as exc:  # the controller refused this broker's id
            raise InconsistentClusterIdError(
                f"{exc.message}; this broker's id is from {self.own_cluster_id.source}; refusing"
                f" to join another cluster ({self.own_cluster_id.advice()})"
            ) from None
        self._adopt_cluster_id()
        # caught up with the metadata log: logs it does not list are stray (a full resync kept
        # them in case later records re-created them)
        self.replica_manager.applier.delete_strays(self.publisher.image)
        self._tasks = threading.Thread(target=self._run_tasks, name="broker-tasks", daemon=True)
        self._tasks.start()
        self._heartbeats = threading.Thread(
            target=self._run_heartbeats, name="broker-heartbeat", daemon=True
        )
        self._heartbeats.start()
        _log.info(
            "[broker=%d] started: epoch %d, %d partitions, cluster %s",
            self.node_id,
            self.broker_epoch,
            len(self.replica_manager.partitions()),
            self.cluster_id,
        )

    def _run_heartbeats(self) -> None:
        """The broker-heartbeat thread: a heartbeat every broker.heartbeat.interval.ms until
        shutdown. A thread of its own, as Kafka's: on the broker-tasks thread a periodic task
        waiting for the metadata applier (delete_strays takes its lock) held heartbeats back
        while a broker created thousands of partitions, until the controller fenced it."""
        period = self.settings.broker_heartbeat_interval_ms / 1000
        while not self._stop.wait(period):
            try:
                self.lifecycle.heartbeat()
            except (GregorError, TimeoutError) as exc:  # (the reason is the whole story)
                if not self._stop.is_set():  # (stopping: the controller link is closing)
                    _log.warning(
                        "[broker=%d] heartbeat failed: %s", self.node_id, failure_reason(exc)
                    )
            except Exception:
                _log.exception("[broker=%d] heartbeat failed", self.node_id)

    def _run_tasks(self) -> None:
        """The broker-tasks thread: periodic work until shutdown."""
        settings = self.settings
        periods = {
            "retention": settings.log_retention_check_interval_ms,
            "producer_expiry": settings.producer_id_expiration_check_interval_ms,
            "hw_checkpoint": settings.hw_checkpoint_interval_ms,
            "recovery_checkpoint": 60_000,
            "flush_due": 100,
            "offline_check": 100,
            "retry_failed": 5000,
            "stray_check": 5000,
            "isr_shrink": max(1, settings.replica_lag_time_max_ms // 2),
        }
        actions: dict[str, Callable[[], object]] = {
            "retention": self.run_retention,
            "producer_expiry": self.log_manager.remove_expired_producers,
            "hw_checkpoint": self.replica_manager.checkpoint_high_watermarks,
            "recovery_checkpoint": self.log_manager.checkpoint_recovery_points,
            "flush_due": self._flush_due,
            "offline_check": self.replica_manager.wake_offline,
            "stray_check": self._delete_strays,
            "retry_failed": lambda: self.replica_manager.applier.retry_failed(
                lambda: self.publisher.latest_image
            ),
            "isr_shrink": lambda: self.replica_manager.shrink_isrs(
                settings.replica_lag_time_max_ms
            ),
        }
        now = time.monotonic()
        due = {name: now + p / 1000 for name, p in periods.items()}
        while not self._stop.is_set():
            now = time.monotonic()
            for name, at in due.items():
                if now >= at:
                    due[name] = now + periods[name] / 1000
                    try:
                        actions[name]()
                    except Exception:
                        _log.exception("[broker=%d] periodic task %s failed", self.node_id, name)
            self._stop.wait(max(0.0, min(due.values()) - time.monotonic()))

    def _delete_strays(self) -> None:
        """Periodic: after a full resync while running, logs the metadata does not list are
        deleted once the broker is caught up again (it heartbeats as RUNNING)."""
        if self.lifecycle.state == RUNNING:
            self.replica_manager.applier.delete_strays(self.publisher.image)

    def _flush_due(self) -> None:
        if not self.log_config.flush_on_ack:
            self.log_manager.flush_due()

    def run_retention(self) -> int:
        """Apply retention now (segments wholly below the high watermark). Any thread."""
        return self.log_manager.run_retention(self.replica_manager.high_watermarks())

    def controlled_shutdown(self) -> None:
        """Ask the controller to move leadership off this broker and fence it (bounded, best
        effort), while the broker still serves: the server calls it before it stops taking
        requests. Idempotent; `shutdown` calls it when the server did not."""
        if self._controlled_shutdown_done:
            return
        self._controlled_shutdown_done = True
        if self.fatal_error is None:  # (a failed controller cannot move leadership)
            self.lifecycle.controlled_shutdown(self.settings.controlled_shutdown_timeout_ms / 1000)

    def shutdown(self) -> None:
        """Stop background work and the controller, flush every log, write checkpoints and the
        clean-shutdown marker. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        if self._tasks is not None:
            self._tasks.join(10.0)
        self.controlled_shutdown()
        try:
            # before joining the heartbeat thread: a heartbeat in flight to controllers that are
            # gone ends with the link instead of running out its request timeout
            self.quorum.stop()
        except Exception:
            _log.exception("[broker=%d] stopping the controller failed", self.node_id)
        if self._heartbeats is not None:
            self._heartbeats.join(10.0)
        self.fetchers.shutdown()
        self.group_coordinator.shutdown()
        self.txn_coordinator.shutdown()
        self.produce_purgatory.shutdown()
        self.fetch_purgatory.shutdown()
        self.timer.shutdown()
        try:
            self.replica_manager.checkpoint_high_watermarks()
        except OSError as exc:
            _log.error("[broker=%d] high-watermark checkpoint failed: %s", self.node_id, exc)
        self.log_manager.close(clean=True)
        self._release_locks()
        _log.info("[broker=%d] shut down", self.node_id)

    def _release_locks(self) -> None:
        for lock in self._dir_locks:
            lock.release()
