"""ClusterControlManager: BrokerRegistration, BrokerHeartbeat (fencing, unfencing, controlled
shutdown), session expiry and producer-id blocks. It owns the brokers' session state (last
heartbeat, registration offset, who is shutting down) and says which brokers are live for the
other managers. Controller thread only.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
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

_log = logging.getLogger(__name__)


class ClusterControlManager(ControlManager):
    def __init__(self, core: ControllerCore, configs: ConfigurationControlManager) -> None:
        super().__init__(core)
        self.configs = configs
        self._last_heartbeat_ms: dict[int, float] = {}
        self._registered_at: dict[int, int] = {}  # broker id -> offset of its registration
        self._shutting_down: set[int] = set()
        # replicas each broker reported it could not create or open (last heartbeat's list)
        self._failed: dict[int, frozenset[tuple[str, int]]] = {}

    def reset_sessions(self) -> None:
        """After a load: every registered broker counts as just heard from (and registered at
        the image's offset); nobody is shutting down."""
        now = self.clock()
        self._last_heartbeat_ms = {b: now for b in self.image.brokers}
        self._registered_at = {b: self.image.offset for b in self.image.brokers}
        self._shutting_down.clear()
        self._failed.clear()

    def live(self) -> set[int]:
        """Unfenced brokers not in a controlled shutdown: the ones that may lead."""
        return {b for b in self.image.live_brokers() if b not in self._shutting_down}

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
    ) -> dict:
        """BrokerRegistration → {error_code, broker_epoch}. The broker starts fenced. `host:port`
        is its inter-broker endpoint; `endpoints` each listener's (name, host, port)."""
        self._check_active()
        now = self.clock()
        old = self.image.brokers.get(broker_id)
        if (
            old is not None
            and not old.fenced
            and old.incarnation_id != incarnation_id
            and now - self._last_heartbeat_ms.get(broker_id, 0)
            < self.settings.broker_session_timeout_ms
        ):
            return {"error_code": int(ErrorCode.DUPLICATE_BROKER_REGISTRATION), "broker_epoch": -1}
        epoch = self.last_written_offset + 1
        changes: list[Any] = []
        self._shutting_down.discard(broker_id)
        if old is not None:
            # A restarted broker leaves every ISR and leadership until it has caught up again.
            changes = remove_broker_changes(
                self.image, broker_id, self.live() - {broker_id}, self.configs.unclean_for
            )
        eps = tuple((str(n), str(h), int(p)) for n, h, p in endpoints)
        last = self._write_changes(
            changes, [RegisterBroker(broker_id, epoch, host, port, rack, incarnation_id, True, eps)]
        )
        self._last_heartbeat_ms[broker_id] = now
        self._registered_at[broker_id] = last
        self._failed.pop(broker_id, None)
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
        return {"error_code": 0, "broker_epoch": epoch}

    def _fence(self, broker_id: int, reason: str) -> None:
        self._failed.pop(broker_id, None)  # it reports them again once unfenced
        b = self.image.brokers[broker_id]
        records: list[Any] = remove_broker_changes(
            self.image, broker_id, self.live() - {broker_id}, self.configs.unclean_for
        )
        self._write_changes(records, [] if b.fenced else [FenceBroker(broker_id, b.broker_epoch)])
        _log.info(
            "[controller=%d] fenced broker %d (%s); %d partition changes",
            self.settings.node_id,
            broker_id,
            reason,
            len(records),
        )

    def broker_heartbeat(
        self,
        broker_id: int,
        broker_epoch: int,
        current_metadata_offset: int,
        want_fence: bool = False,
        want_shutdown: bool = False,
        failed_replicas: Iterable[tuple[str, int]] = (),
    ) -> dict:
        """BrokerHeartbeat → {error_code, is_caught_up, is_fenced, should_shut_down}.
        `failed_replicas`: every replica the broker could not create or open (see
        `_failed_replicas`)."""
        self._check_active()
        b = self.image.brokers.get(broker_id)
        resp = {
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
            if broker_id not in self._shutting_down:
                self._shutting_down.add(broker_id)
                changes = remove_broker_changes(
                    self.image, broker_id, self.live(), self.configs.unclean_for
                )
                self._write_changes(changes)
                _log.info(
                    "[controller=%d] controlled shutdown of broker %d: %d partition changes",
                    self.settings.node_id,
                    broker_id,
                    len(changes),
                )
            done = not self.image.partitions_led_by(broker_id)
            if done and not self.image.brokers[broker_id].fenced:
                self._fence(broker_id, "controlled shutdown")
            resp["should_shut_down"] = done
        elif want_fence:
            if not b.fenced:
                self._fence(broker_id, "requested by the broker")
        elif b.fenced and caught_up and broker_id not in self._shutting_down:
            # (a broker shutting down stays fenced until it registers again, even if a
            # heartbeat sent before it asked to shut down arrives late)
            self._write([UnfenceBroker(broker_id, broker_epoch)])
            elected = elect_offline_changes(
                self.image, self.live() | {broker_id}, self.configs.unclean_for
            )
            self._write_changes(elected)
            _log.info(
                "[controller=%d] unfenced broker %d; %d partitions elected",
                self.settings.node_id,
                broker_id,
                len(elected),
            )
        if not want_shutdown and not want_fence:
            self._failed_replicas(broker_id, frozenset((t, int(p)) for t, p in failed_replicas))
        resp["is_fenced"] = self.image.brokers[broker_id].fenced
        return resp

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
        self._write_changes(changes)

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

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> dict:
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
