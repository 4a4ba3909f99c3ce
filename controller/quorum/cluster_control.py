"""ClusterControlManager: BrokerRegistration, BrokerHeartbeat (fencing, unfencing, controlled
shutdown), session expiry and producer-id blocks. It owns the brokers' session state (last
heartbeat, registration offset, who is shutting down) and says which brokers are live for the
other managers. Controller thread only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from client.errors import ErrorCode
from controller.metadata.records import FenceBroker, ProducerIds, RegisterBroker, UnfenceBroker
from controller.quorum.config_control import ConfigurationControlManager
from controller.quorum.replication import (
    elect_offline_changes,
    failed_replica_changes,
    remove_broker_changes,
)
from controller.quorum.state import ControllerCore, ControlManager
from controller.results import BrokerHeartbeatResult, BrokerRegistrationResult, ProducerIdsResult

_log = logging.getLogger(__name__)

MAX_REASON_CHARS = 300  # of a broker's cannot_create_replicas reason


class ClusterControlManager(ControlManager):
    def __init__(
        self,
        core: ControllerCore,
        configs: ConfigurationControlManager,
        cluster_id: Callable[[], str | None] = lambda: None,
    ) -> None:
        """`cluster_id()`: the quorum's id, writing it first when the log has none yet
        (QuorumController.ensure_cluster_id)."""
        super().__init__(core)
        self.configs = configs
        self._cluster_id = cluster_id
        self._last_heartbeat_ms: dict[int, float] = {}
        self._registered_at: dict[int, int] = {}  # broker id -> offset of its registration
        self._shutting_down: set[int] = set()
        # replicas each broker reported it could not create or open (last heartbeat's list)
        self._failed: dict[int, frozenset[tuple[str, int]]] = {}
        # brokers that reported they cannot take new replicas now, with their reason
        self._cannot_create: dict[int, str] = {}
        self._reports = 0  # numbers the non-atomic writes of failed-replica reports

    def reset_sessions(self) -> None:
        """After a load: every registered broker counts as just heard from (and registered at
        the image's offset); nobody is shutting down."""
        now = self.clock()
        self._last_heartbeat_ms = dict.fromkeys(self.image.brokers, now)
        self._registered_at = dict.fromkeys(self.image.brokers, self.image.offset)
        self._shutting_down.clear()
        self._failed.clear()
        self._cannot_create.clear()

    def live(self) -> set[int]:
        """Unfenced brokers not in a controlled shutdown nor being fenced: the ones that may
        lead."""
        return {
            b
            for b in self.image.live_brokers()
            if b not in self._shutting_down and not self._unfinished(("fence", b))
        }

    def cannot_create(self) -> dict[int, str]:
        """Live brokers that reported they cannot take new replicas, with their reason."""
        live = self.live()
        return {b: r for b, r in self._cannot_create.items() if b in live}

    def forget_session(self, broker_id: int) -> None:
        """Drop the liveness grace a load gives `broker_id` (every registered broker counts as
        just heard from after a load): for a combined node's own broker, whose earlier
        incarnation is necessarily dead when the process (and its controller) starts, so the
        new incarnation registers at once instead of waiting out broker.session.timeout.ms."""
        self._last_heartbeat_ms.pop(broker_id, None)

    def register_broker(
        self,
        broker_id: int,
        host: str,
        port: int,
        rack: str | None = None,
        incarnation_id: str = "",
        endpoints: Sequence[tuple[str, str, int]] = (),
        cluster_id: str | None = None,
    ) -> BrokerRegistrationResult:
        """BrokerRegistration → {error_code, broker_epoch, cluster_id}. The broker starts
        fenced. `host:port` is its inter-broker endpoint; `endpoints` each listener's (name,
        host, port). `cluster_id`: the broker's own (stored or configured) id, None when it has
        none yet; one that differs from the quorum's is refused with INCONSISTENT_CLUSTER_ID
        (Kafka's BrokerRegistration check). The answer names the quorum's id."""
        self._check_active()
        quorum_id = self._cluster_id()
        if cluster_id is not None and quorum_id is not None and cluster_id != quorum_id:
            message = (
                f"broker {broker_id} has cluster id {cluster_id!r} but the controller quorum's"
                f" cluster id is {quorum_id!r}"
            )
            _log.warning("[controller=%d] registration refused: %s", self.settings.node_id, message)
            return {
                "error_code": int(ErrorCode.INCONSISTENT_CLUSTER_ID),
                "broker_epoch": -1,
                "error_message": message,
                "cluster_id": quorum_id,
            }
        now = self.clock()
        old = self.image.brokers.get(broker_id)
        if (
            old is not None
            and not old.fenced
            and old.incarnation_id != incarnation_id
            and now - self._last_heartbeat_ms.get(broker_id, 0)
            < self.settings.broker_session_timeout_ms
        ):
            return {
                "error_code": int(ErrorCode.DUPLICATE_BROKER_REGISTRATION),
                "broker_epoch": -1,
                "cluster_id": quorum_id,
            }
        epoch = self.last_written_offset + 1
        changes: list[Any] = []
        self._shutting_down.discard(broker_id)
        self.core.unfinished.pop(("fence", broker_id), None)  # a fence of the old incarnation
        self.core.unfinished.pop(("shutdown", broker_id), None)

        def removals() -> list[Any]:
            # A restarted broker leaves every ISR and leadership until it has caught up again.
            return remove_broker_changes(
                self.image, broker_id, self.live() - {broker_id}, self.configs.unclean_for
            )

        if old is not None:
            changes = removals()
        eps = tuple((str(n), str(h), int(p)) for n, h, p in endpoints)
        register = RegisterBroker(broker_id, epoch, host, port, rack, incarnation_id, True, eps)
        if not self._write_changes(changes, [register]):
            # More removals than the log takes uncommitted now: register (fenced) at once and
            # write the rest as earlier batches commit; it is not unfenced before that is done.
            self._write([register])
            self._write_bulk(("register", broker_id), removals)
        self._last_heartbeat_ms[broker_id] = now
        self._registered_at[broker_id] = self.last_written_offset
        self._failed.pop(broker_id, None)
        self._cannot_create.pop(broker_id, None)  # its heartbeats say so again
        _log.info(
            "[controller=%d] registered broker %d epoch %d at %s:%d rack=%s%s",
            self.settings.node_id,
            broker_id,
            epoch,
            host,
            port,
            rack,
            "".join(f" {n}://{h}:{p}" for n, h, p in eps) if len(eps) > 1 else "",
        )
        return {"error_code": 0, "broker_epoch": epoch, "cluster_id": quorum_id}

    def _fence(self, broker_id: int, reason: str) -> None:
        """Take `broker_id` out of every ISR and leadership, then fence it (Kafka's order: the
        partition changes, then FenceBroker). When there are more changes than the log takes
        uncommitted at once, the rest follows as earlier batches commit; meanwhile the broker
        counts as not live (no election picks it) and the fence is not started again."""
        if self._unfinished(("fence", broker_id)):
            return
        self._failed.pop(broker_id, None)  # it reports them again once unfenced
        self._cannot_create.pop(broker_id, None)
        self.core.unfinished.pop(("register", broker_id), None)  # superseded by the fence

        def changes() -> list[Any]:
            return remove_broker_changes(
                self.image, broker_id, self.live() - {broker_id}, self.configs.unclean_for
            )

        first = changes()
        _log.info(
            "[controller=%d] fencing broker %d (%s): %d partition changes",
            self.settings.node_id,
            broker_id,
            reason,
            len(first),
        )
        self._write_bulk(
            ("fence", broker_id), changes, lambda: self._fence_record(broker_id), first
        )

    def _fence_record(self, broker_id: int) -> list[Any]:
        """The FenceBroker that ends a fence or controlled shutdown (none if fenced already)."""
        self._failed.pop(broker_id, None)  # it reports them again once unfenced
        self._cannot_create.pop(broker_id, None)
        b = self.image.brokers[broker_id]
        if b.fenced:
            return []
        _log.info("[controller=%d] fenced broker %d", self.settings.node_id, broker_id)
        return [FenceBroker(broker_id, b.broker_epoch)]

    def broker_heartbeat(
        self,
        broker_id: int,
        broker_epoch: int,
        current_metadata_offset: int,
        want_fence: bool = False,
        want_shutdown: bool = False,
        failed_replicas: Iterable[tuple[str, int]] = (),
        cannot_create_replicas: str | None = None,
    ) -> BrokerHeartbeatResult:
        """BrokerHeartbeat → {error_code, is_caught_up, is_fenced, should_shut_down}.
        `failed_replicas`: every replica the broker could not create or open (see
        `_failed_replicas`); `cannot_create_replicas`: why the broker cannot take new
        replicas now (None when it can; see `_cannot_create_replicas`)."""
        self._check_active()
        b = self.image.brokers.get(broker_id)
        resp: BrokerHeartbeatResult = {
            "error_code": 0,
            "is_caught_up": False,
            "is_fenced": True,
            "should_shut_down": False,
        }
        if b is None:
            resp["error_code"] = int(ErrorCode.BROKER_ID_NOT_REGISTERED)
            return resp
        if b.broker_epoch != broker_epoch:
            resp["error_code"] = int(ErrorCode.STALE_BROKER_EPOCH)
            return resp
        self._last_heartbeat_ms[broker_id] = self.clock()
        caught_up = current_metadata_offset >= self._registered_at.get(broker_id, self.image.offset)
        resp["is_caught_up"] = caught_up
        if want_shutdown:
            resp["should_shut_down"] = self._controlled_shutdown(broker_id)
        elif want_fence:
            if not b.fenced:
                self._fence(broker_id, "requested by the broker")
        elif (
            b.fenced
            and caught_up
            and broker_id not in self._shutting_down
            and not self._unfinished(("register", broker_id))
        ):
            # (a broker shutting down stays fenced until it registers again, even if a
            # heartbeat sent before it asked to shut down arrives late; a re-registered one
            # until its old incarnation's removals are all written)
            self._write([UnfenceBroker(broker_id, broker_epoch)])

            def elected() -> list[Any]:
                return elect_offline_changes(self.image, self.live(), self.configs.unclean_for)

            changes = elected()
            self._write_bulk(("elect-offline", 0), elected, first=changes)
            _log.info(
                "[controller=%d] unfenced broker %d; %d partitions elected",
                self.settings.node_id,
                broker_id,
                len(changes),
            )
        if not want_shutdown and not want_fence:
            self._failed_replicas(broker_id, frozenset((t, int(p)) for t, p in failed_replicas))
            self._cannot_create_replicas(broker_id, cannot_create_replicas)
        resp["is_fenced"] = self.image.brokers[broker_id].fenced
        return resp

    def _controlled_shutdown(self, broker_id: int) -> bool:
        """A heartbeat asking to shut down: move every leadership and ISR membership off
        `broker_id` (as many changes as the log takes uncommitted now, the rest as they
        commit), then fence it. True once all of that is written (should_shut_down)."""
        key = ("shutdown", broker_id)
        if broker_id not in self._shutting_down:
            self._shutting_down.add(broker_id)
            first = remove_broker_changes(
                self.image, broker_id, self.live(), self.configs.unclean_for
            )
            _log.info(
                "[controller=%d] controlled shutdown of broker %d: %d partition changes",
                self.settings.node_id,
                broker_id,
                len(first),
            )
        elif self._unfinished(key):
            return False  # still being written (resumed as earlier batches commit)
        else:  # asked again: finish what a failed attempt left (nothing, once all is done)
            first = None

        def changes() -> list[Any]:
            return remove_broker_changes(
                self.image, broker_id, self.live(), self.configs.unclean_for
            )

        done = self._write_bulk(key, changes, lambda: self._fence_record(broker_id), first)
        return done and self.image.brokers[broker_id].fenced

    def _failed_replicas(self, broker_id: int, failed: frozenset[tuple[str, int]]) -> None:
        """Act on a change in the replicas `broker_id` cannot serve: leadership and ISR
        membership of newly failed ones move to other replicas; healed ones that were left
        leaderless get a leader again. Work in proportion to the partitions named."""
        before = self._failed.get(broker_id, frozenset())
        if failed == before:
            return
        if failed:
            self._failed[broker_id] = failed
        else:
            self._failed.pop(broker_id, None)
        live = self.live()

        def live_for(tp: tuple[str, int]) -> set[int]:
            return {b for b in live if tp not in self._failed.get(b, ())}

        new, healed = failed - before, before - failed
        changes = failed_replica_changes(
            self.image, broker_id, sorted(new), sorted(healed), live_for, self.configs.unclean_for
        )
        if new:
            _log.warning(
                "[controller=%d] broker %d cannot create or open %d replicas (%s%s);"
                " %d partition changes",
                self.settings.node_id,
                broker_id,
                len(new),
                ", ".join(f"{t}-{p}" for t, p in sorted(new)[:5]),
                ", ..." if len(new) > 5 else "",
                len(changes),
            )
        if healed:
            _log.info(
                "[controller=%d] broker %d serves %d replicas again",
                self.settings.node_id,
                broker_id,
                len(healed),
            )
        self._reports += 1
        self._write_bulk(
            ("failed", self._reports),
            lambda: failed_replica_changes(
                self.image,
                broker_id,
                sorted(new),
                sorted(healed),
                live_for,
                self.configs.unclean_for,
            ),
            first=changes,
        )

    def _cannot_create_replicas(self, broker_id: int, reason: str | None) -> None:
        """Note whether `broker_id` can take new replicas: placement (CreateTopics,
        CreatePartitions) skips it while it reports a reason. Session state, not a record:
        the broker says it again with every heartbeat."""
        before = self._cannot_create.get(broker_id)
        if reason:
            # the latest figures win; bounded, as it ends up in error messages
            self._cannot_create[broker_id] = reason[:MAX_REASON_CHARS]
            if before is not None:
                return
            _log.warning(
                "[controller=%d] broker %d cannot take new replicas: %s",
                self.settings.node_id,
                broker_id,
                reason,
            )
        elif before is not None:
            del self._cannot_create[broker_id]
            _log.info(
                "[controller=%d] broker %d can take new replicas again",
                self.settings.node_id,
                broker_id,
            )

    def failed_replicas(self, broker_id: int) -> frozenset[tuple[str, int]]:
        """The replicas `broker_id` last reported it could not create or open."""
        return self._failed.get(broker_id, frozenset())

    def check_sessions(self) -> list[int]:
        """Fence brokers whose session expired; returns their ids. Call periodically."""
        now = self.clock()
        timeout = self.settings.broker_session_timeout_ms
        expired = [
            b.broker_id
            for b in self.image.brokers.values()
            if not b.fenced and now - self._last_heartbeat_ms.get(b.broker_id, now) >= timeout
        ]
        for bid in expired:
            self._fence(bid, f"no heartbeat for {timeout} ms")
        return expired

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> ProducerIdsResult:
        """AllocateProducerIds → {error_code, producer_id_start, producer_id_len}."""
        self._check_active()
        b = self.image.brokers.get(broker_id)
        if b is None or b.broker_epoch != broker_epoch:
            return {
                "error_code": int(ErrorCode.STALE_BROKER_EPOCH),
                "producer_id_start": -1,
                "producer_id_len": 0,
            }
        start = self.image.next_producer_id
        size = self.settings.producer_id_block_size
        self._write([ProducerIds(broker_id, broker_epoch, start + size)])
        return {"error_code": 0, "producer_id_start": start, "producer_id_len": size}
