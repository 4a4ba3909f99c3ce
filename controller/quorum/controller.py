"""QuorumController: the active controller's logic (topics, brokers, ISR, leader election).

It turns requests into metadata records, writes them to a `MetadataLog`, and replays them onto
its own `MetadataImage` (`self.image`: everything it has written, committed or not). A caller that
must answer only once the records are committed waits until
`metadata_log.committed_offset() >= controller.last_written_offset` (ControllerThread does).

Threading: NOT thread-safe. Exactly one thread calls it — in a combined process the controller
thread (`ControllerThread`, runner.py), which owns its own event loop; other threads submit calls
there and get concurrent.futures.Future results. Time comes from the injected `clock` (ms), ids
from the injected `rng`, so tests drive it with a fake clock.

Request/response shapes follow the wire bodies in CONTRACTS.md (CreateTopics, DeleteTopics,
CreatePartitions, BrokerRegistration, BrokerHeartbeat, AlterPartition); see docs/metadata.md.

The operations live in control managers split by ownership, as Kafka's (state.py has the
shared `ControllerCore`: settings, clock, image, writing records):
- `cluster` — ClusterControlManager (cluster_control.py): registration, heartbeats, sessions,
  fencing, controlled shutdown, producer ids; owns the brokers' session state;
- `replication` — ReplicationControlManager (replication_control.py): topics, partitions, ISR
  changes, leader elections;
- `configs` — ConfigurationControlManager (config_control.py): topic configs;
- `scram` — ScramControlManager (scram_control.py): users' SCRAM credentials.
- `quotas` — ClientQuotaControlManager (quota_control.py): client quotas.
- `acls` — AclControlManager (acl_control.py): ACLs.
- `reassignments` — ReassignmentControlManager (reassignment_control.py): partition
  reassignments (KIP-455), their state in the partitions' registrations.
- `auto_balance` — AutoBalanceControlManager (auto_balance_control.py): automatic balancing
  (auto.balance.mode), moves started as reassignments.
This class puts them together and owns loading the image and the periodic tick. Requests go to
the manager that owns them — `controller.replication.create_topics(...)` — through a callable
handed to `ControllerThread.submit` (no dispatch by name).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable

from controller.metadata.batches import BatchAssembler
from controller.metadata.delta import MetadataDelta
from controller.metadata.image import MetadataImage
from controller.metadata.records import ClusterId, NoOp, decode_record
from controller.metadata.snapshot import load_snapshot
from controller.quorum.acl_control import AclControlManager
from controller.quorum.auto_balance_control import AutoBalanceControlManager
from controller.quorum.cluster_control import ClusterControlManager
from controller.quorum.cluster_id import new_cluster_id
from controller.quorum.config_control import ConfigurationControlManager
from controller.quorum.log import MetadataLog
from controller.quorum.quota_control import ClientQuotaControlManager
from controller.quorum.reassignment_control import ReassignmentControlManager
from controller.quorum.replication import imbalanced_partitions
from controller.quorum.replication_control import ReplicationControlManager
from controller.quorum.scram_control import ScramControlManager, parse_bootstrap_file
from controller.quorum.state import ControllerCore, ControllerSettings, ControlManager

__all__ = ["ControllerSettings", "QuorumController"]

_log = logging.getLogger(__name__)


class QuorumController(ControlManager):
    """The managers put together (`image`, `settings`, `clock`, `last_written_offset` come from
    the shared core, as in each manager)."""

    def __init__(
        self,
        metadata_log: MetadataLog,
        settings: ControllerSettings | None = None,
        clock: Callable[[], float] | None = None,
        rng: random.Random | None = None,
        cluster_id: str | None = None,
    ) -> None:
        """`settings`: None for the defaults. `cluster_id`: this controller's own id (its configured `cluster.id` or the one in
        its data dir), written as the quorum's when this controller is the first active one of
        a log without a ClusterId record; None: a new random id then."""
        super().__init__(
            ControllerCore(
                metadata_log,
                settings or ControllerSettings(),
                clock or (lambda: time.monotonic() * 1000.0),
                rng or random.Random(1),
            )
        )
        self.configs = ConfigurationControlManager(self.core)
        self.cluster = ClusterControlManager(self.core, self.configs, self.ensure_cluster_id)
        self.replication = ReplicationControlManager(self.core, self.cluster, self.configs)
        self.reassignments = ReassignmentControlManager(self.core, self.cluster)
        self.auto_balance = AutoBalanceControlManager(self.core, self.cluster, self.reassignments)
        path = self.settings.sasl_scram_bootstrap_file
        self.scram = ScramControlManager(self.core, parse_bootstrap_file(path) if path else None)
        self.quotas = ClientQuotaControlManager(self.core)
        self.acls = AclControlManager(self.core)
        self.own_cluster_id = cluster_id
        self._next_rebalance_ms = self.clock() + self.settings.leader_imbalance_check_interval_ms
        self.load()

    @property
    def log(self) -> MetadataLog:
        return self.core.log

    def load(self, image: MetadataImage | None = None) -> None:
        """(Re)build self.image from the committed log — on start and on becoming active — or
        take `image` when the caller already holds the committed image (MetadataLoader)."""
        if image is None:
            snap = self.log.latest_snapshot()
            image = load_snapshot(snap[1]) if snap else MetadataImage.EMPTY
            delta = MetadataDelta(image)
            batches = BatchAssembler()  # complete atomic batches only (batches.py)
            offset = image.offset + 1
            while True:
                batch = self.log.read(offset)
                if not batch:
                    break
                for off, data in batch:
                    for o, rec in batches.feed(off, decode_record(data)):
                        delta.replay(rec, o)
                offset = batch[-1][0] + 1
            image = delta.apply()
        self.core.image = image
        self.core.last_written_offset = image.offset
        self.core.unfinished.clear()  # their requests are retried (heartbeats, session expiry)
        self.cluster.reset_sessions()
        self.reassignments.reset()
        self.auto_balance.reset()
        _log.info(
            "[controller=%d] loaded metadata through offset %d: %d brokers, %d topics",
            self.settings.node_id,
            self.image.offset,
            len(self.image.brokers),
            len(self.image.topics),
        )

    def resume(self) -> None:
        """Continue non-atomic writes that were waiting for earlier batches to commit."""
        if self.core.unfinished:
            self.core.resume()

    def ensure_cluster_id(self) -> str | None:
        """The quorum's cluster id; on the active controller of a log without one, first write
        the ClusterId record (this controller's own id, else a new one) — once: the image holds
        what was written, committed or not. None on a standby whose log has none yet."""
        cid = self.image.cluster_id
        if cid is not None or not self.log.is_leader():
            return cid
        cid = self.own_cluster_id or new_cluster_id()
        self.core.write([ClusterId(cid)])
        _log.info(
            "[controller=%d] cluster id %s written to the metadata log (%s)",
            self.settings.node_id,
            cid,
            "this controller's own" if self.own_cluster_id else "new",
        )
        return cid

    def write_noop(self) -> int:
        """Commit a NoOp (a new active controller's first write)."""
        return self.core.write([NoOp()])

    def tick(self) -> None:
        """Periodic work (ControllerThread calls it): session expiry, and preferred-leader
        rebalancing every leader.imbalance.check.interval.ms when enabled, for the brokers whose
        share of partitions led elsewhere is above leader.imbalance.per.broker.percentage."""
        self.ensure_cluster_id()
        self.scram.write_bootstrap()
        self.resume()
        self.cluster.check_sessions()
        self.reassignments.tick()
        self.auto_balance.tick()
        now = self.clock()
        if self.settings.auto_leader_rebalance_enable and now >= self._next_rebalance_ms:
            self._next_rebalance_ms = now + self.settings.leader_imbalance_check_interval_ms
            imbalanced = imbalanced_partitions(
                self.image, self.settings.leader_imbalance_per_broker_percentage
            )
            if imbalanced:
                self.replication.elect_preferred_leaders(imbalanced)
