"""Applying committed metadata to the local replicas (an object the ReplicaManager holds, over
the shared PartitionTable): become leader or follower, stop a replica, delete logs; partitions
whose registration failed to apply (e.g. out of file descriptors) are retried and reported
(`table.failed`); after a full resync, logs the image does not list are kept until the broker
has caught up (`delete_strays`). One application at a time (`_apply_lock`): the metadata
publisher's thread, or the broker-tasks thread for the retries.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from broker.log import LogManager
from broker.log.descriptors import DescriptorMonitor
from broker.log.handles import is_fd_limit
from broker.replica.partition import Partition
from broker.replica.partition_table import PartitionTable
from client.errors import StorageError
from controller.metadata.records import RESOURCE_BROKER

if TYPE_CHECKING:
    from broker.replica.manager import ReplicaSettings

_log = logging.getLogger("broker.replica.manager")

TopicPartition = tuple[str, int]


FOLLOWER_THROTTLED_RATE = "follower.replication.throttled.rate"


def throttled_rate(image: Any, node_id: int) -> int | None:
    """follower.replication.throttled.rate for this broker (bytes/s): its own dynamic config,
    else the cluster-wide default (resource name ""), else None (no bound)."""
    for name in (str(node_id), ""):
        v = image.config_for(RESOURCE_BROKER, name).get(FOLLOWER_THROTTLED_RATE)
        if v is not None:
            return int(v)
    return None


class MetadataApplier:
    """Owns the application state (the strays, the checkpointed high watermarks a new leader
    starts from, the partitions to wake at an application's end); writes the table."""

    def __init__(
        self,
        table: PartitionTable,
        log_manager: LogManager,
        settings: ReplicaSettings,
        wake_many: Callable[[list[TopicPartition]], None],
    ) -> None:
        """`wake_many(tps)`: retry the produces and fetches parked on `tps` (the manager's)."""
        self.table = table
        self.log_manager = log_manager
        self.settings = settings
        self._wake_many = wake_many
        self._apply_lock = threading.Lock()  # one metadata application at a time
        self._woken: list[TopicPartition] = []  # partitions to wake when the application ends
        # local logs a full resync found unknown to the metadata (delete_strays)
        self._strays: set[TopicPartition] = set()
        self._applied_once = False  # the first application looks for strays (below)
        self._checkpointed_hw = log_manager.read_high_watermarks()
        # set by the node: the replica fetchers (broker/replica/fetcher.py)
        self.fetchers: Any = None
        # whether new replicas can be created, as far as descriptors go (heartbeats report it)
        self.descriptors = DescriptorMonitor()
        # metrics (broker/metrics.py): this broker, leading in the same epoch, applied an ISR
        # of another size (old size, new size); set once before serving
        self.on_isr_change: Callable[[int, int], None] | None = None

    @contextmanager
    def _wakes_at_end(self) -> Iterator[None]:
        """The produces and fetches parked on the partitions one application touches are
        retried once, at its end (`_woken`), not once per partition: a fetch session's parked
        fetch names thousands of partitions, and a controlled shutdown moving 10,000 of them
        re-evaluated it 10,000 times (most of two brokers' CPU for ~4 s). `_apply_lock` held."""
        try:
            yield
        finally:
            woken, self._woken = self._woken, []
            if woken:
                self._wake_many(woken)

    def failed_replicas(self) -> list[tuple[str, int]]:
        """The replicas whose metadata failed to apply (a log that could not be created or
        opened) and those whose log directory went offline (a disk error: full, EIO) and that
        another in-sync replica can replace: the heartbeat reports them to the controller, which
        moves their leadership and ISR membership to other replicas (Kafka's offline log dirs,
        KIP-858)."""
        failed = set(self.table.failed)
        if self.log_manager.offline_dirs():
            # (only where another in-sync replica can take over: an only replica keeps its
            # leadership, so what it fsynced stays readable)
            failed |= {tp for tp, part in self.table.partitions().items()
                       if part.log.offline and any(r != self.table.node_id for r in part.isr)}  # fmt: skip
        return sorted(failed)

    def retry_failed(self, latest_image: Callable[[], Any]) -> None:
        """Apply failed partitions again from `latest_image()` (periodic: a failure such as
        running out of file descriptors may pass without any new metadata arriving)."""
        if self.table.failed:
            with self._apply_lock, self._wakes_at_end():
                image = latest_image()
                retry = [(tp, image.partition(*tp)) for tp in list(self.table.failed)]
                for tp, reg in retry:
                    if reg is not None:
                        self._apply_guarded(tp, reg)

    def apply_metadata(self, image: Any, delta: Any) -> None:
        """Bring local replicas in line with `image` (delta None: full resync). Called by the
        metadata publisher, in commit order: become leader / follower, stop replica, delete."""
        with self._apply_lock, self._wakes_at_end():
            self._apply_metadata(image, delta)

    def _apply_metadata(self, image: Any, delta: Any) -> None:
        if not self._applied_once:
            # The first image after start (a delta from the empty image, or a resync): local
            # logs of partitions it does not list, or lists without this broker (deleted, or
            # reassigned away, while this broker was down), are strays, deleted once caught up.
            self._applied_once = True
            node = self.table.node_id
            self._strays.update(
                tp
                for tp in self.log_manager.logs()
                if (reg := image.partition(*tp)) is None or node not in reg.replicas
            )
        if self.fetchers is not None and (
            delta is None or any(k[0] == RESOURCE_BROKER for k in delta.changed_configs)
        ):
            self.fetchers.throttle.set_rate(throttled_rate(image, self.table.node_id))
        if delta is not None:
            for topic in delta.deleted_topics:
                self._delete_topic(topic)
            touched: Iterable[tuple[TopicPartition, Any]] = delta.changed_partitions.items()
        else:
            # A full resync (a snapshot was loaded). Local replicas the image does not list
            # stop being served, but their logs stay until this broker has caught up with the
            # metadata log (delete_strays): records not yet visible may re-create them, and
            # deleting them now would lose their data.
            live = {(t.name, p) for t in image.topics.values() for p in t.partitions}
            for tp in list(self.table.partitions()):
                if tp not in live:
                    self._stop_replica(tp, delete=False)
                    self._strays.add(tp)
            node = self.table.node_id
            self._strays.update(
                tp
                for tp in self.log_manager.logs()
                if tp not in live or node not in image.topics[tp[0]].partitions[tp[1]].replicas
            )
            if self._strays:
                _log.info(
                    "%d local logs are not in the metadata at offset %d: kept until caught up",
                    len(self._strays),
                    image.offset,
                )
            touched = [
                ((t.name, p), reg) for t in image.topics.values() for p, reg in t.partitions.items()
            ]
        # Partitions that failed before are applied again from this image (a resync), even when
        # this delta does not touch them.
        retry = [(tp, image.topics[tp[0]].partitions.get(tp[1])) for tp in list(self.table.failed)
                 if tp[0] in image.topics]  # fmt: skip
        seen: set[TopicPartition] = set()
        for tp, reg in [*touched, *((tp, r) for tp, r in retry if r is not None)]:
            if tp in seen:
                continue
            seen.add(tp)
            self._apply_guarded(tp, reg)
        for tp in [tp for tp in self.table.failed if tp[0] not in image.topics]:
            del self.table.failed[tp]  # its topic is gone: nothing left to resync

    def _apply_guarded(self, tp: TopicPartition, reg: Any) -> None:
        """Apply one partition's registration. A failure is not swallowed: the partition stops
        being served (requests get NOT_LEADER_OR_FOLLOWER, clients refresh and retry), the
        error is logged, and the next image applies it again (`failed`)."""
        try:
            if self.table.node_id in reg.replicas:
                self._apply_partition(tp, reg)
            elif tp in self.table:
                self._stop_replica(tp, delete=True)
        except Exception as exc:
            if is_fd_limit(exc) or (exc.__cause__ is not None and is_fd_limit(exc.__cause__)):
                self.descriptors.note_limit_hit()  # the next heartbeat tells the controller
            first = tp not in self.table.failed
            self.table.failed[tp] = f"{type(exc).__name__}: {exc}"
            if self.fetchers is not None:
                self.fetchers.remove(tp)
            self.table.pop(tp)
            self._woken.append(tp)
            if first:
                _log.error(
                    "[%s-%d] applying metadata failed, not serving it until a later image"
                    " applies: %s",
                    tp[0],
                    tp[1],
                    exc,
                    exc_info=True,
                )
            return
        if self.table.failed.pop(tp, None) is not None:
            _log.info("[%s-%d] metadata applied again: serving it", tp[0], tp[1])

    def _apply_partition(self, tp: TopicPartition, reg: Any) -> None:
        self._strays.discard(tp)  # known again: its log is this replica's
        part = self.table.get(tp)
        if part is None:
            log = self.log_manager.get_or_create(*tp)
            part = Partition(
                tp[0], tp[1], self.table.node_id, log, flush_on_ack=self.settings.flush_on_ack
            )
            self.table.put(tp, part)
        fetchers = self.fetchers
        if reg.leader == self.table.node_id:
            if fetchers is not None:
                fetchers.remove(tp)
                fetchers.throttle.set_throttled(tp, False)
            # an ISR change while leading in the same epoch (a shrink or expansion it proposed,
            # or one the controller made when fencing a broker): counted for the metrics
            same_epoch = part.is_leader and part.leader_epoch == reg.leader_epoch
            old_isr = len(part.isr)
            part.make_leader(
                reg.leader_epoch,
                reg.partition_epoch,
                tuple(reg.replicas),
                tuple(reg.isr),
                self._checkpointed_hw.get(tp, 0),
            )
            on_isr_change = self.on_isr_change
            if same_epoch and on_isr_change is not None and len(reg.isr) != old_isr:
                on_isr_change(old_isr, len(reg.isr))
        else:
            part.make_follower(
                reg.leader, reg.leader_epoch, reg.partition_epoch, reg.replicas, reg.isr
            )
            if fetchers is not None:
                # a replica this broker is adding by a reassignment, not in sync yet, copies
                # within follower.replication.throttled.rate (throttle.py)
                node = self.table.node_id
                fetchers.throttle.set_throttled(
                    tp, node in reg.adding_replicas and node not in reg.isr
                )
                if reg.leader >= 0:
                    fetchers.add(tp, reg.leader, reg.leader_epoch)
                else:
                    fetchers.remove(tp)
        self._woken.append(tp)

    def _stop_replica(self, tp: TopicPartition, delete: bool) -> None:
        if self.fetchers is not None:
            self.fetchers.remove(tp)
            self.fetchers.throttle.set_throttled(tp, False)
        self.table.pop(tp)
        self._woken.append(tp)
        if delete:
            self._delete_logs([tp])

    def _delete_logs(self, tps: list[TopicPartition]) -> None:
        self._strays.difference_update(tps)
        try:
            self.log_manager.delete_many(tps)
        except StorageError as exc:
            _log.error("deleting the logs of %d partitions failed: %s", len(tps), exc)

    def _delete_topic(self, topic: str) -> None:
        doomed = {tp for tp in self.table.partitions() if tp[0] == topic}
        doomed |= {tp for tp in self.log_manager.logs() if tp[0] == topic}
        for tp in sorted(doomed):
            self._stop_replica(tp, delete=False)
        self._delete_logs(sorted(doomed))  # the checkpoints are rewritten once, not per log
        if doomed:
            _log.info("deleted topic %s (%d local partitions)", topic, len(doomed))

    def delete_strays(self, image: Any) -> int:
        """Delete the logs a full resync (or the first application after start) kept that
        `image` still does not list as this broker's. Call once the broker has caught up with
        the metadata log (after its start, then periodically). Returns how many were deleted."""
        with self._apply_lock:
            node = self.table.node_id
            doomed = sorted(
                tp
                for tp in self._strays
                if (reg := image.partition(*tp)) is None or node not in reg.replicas
            )
            self._strays.clear()
            if doomed:
                _log.info("deleting %d local logs the metadata does not list", len(doomed))
                self._delete_logs(doomed)
            return len(doomed)
