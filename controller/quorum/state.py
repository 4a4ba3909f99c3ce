"""ControllerCore: what every control manager of the QuorumController shares — the settings,
the clock and rng, the image of everything written (committed or not), and writing records to
the MetadataLog. ControlManager is the base of the managers (Kafka's split by ownership):

- ClusterControlManager (cluster_control.py): broker registrations, heartbeats, sessions,
  fencing, controlled shutdown, producer-id blocks; owns the brokers' session state;
- ReplicationControlManager (replication_control.py): topics, partitions, placement, ISR
  changes (AlterPartition), leader elections;
- ConfigurationControlManager (config_control.py): topic configs (IncrementalAlterConfigs,
  validation) and the per-topic settings other managers ask for.

controller.py puts them together. Threading: as QuorumController — exactly one thread (the
controller thread) calls it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from client.errors import NotControllerError
from controller.metadata.delta import MetadataDelta
from controller.metadata.image import MetadataImage
from controller.metadata.records import BatchBegin, encode_record
from controller.quorum.log import MetadataLog

# largest batch of independent records written at once (the Raft core holds at most 10,000
# uncommitted entries; Kafka's controller caps a non-atomic write at 10,000 records too)
MAX_RECORDS_PER_BATCH = 5_000


@dataclass(frozen=True)
class ControllerSettings:
    """The config values the controller reads (from a Config object's snake_case attributes)."""

    node_id: int = 1
    broker_session_timeout_ms: int = 9000
    num_partitions: int = 1
    default_replication_factor: int = 1
    unclean_leader_election_enable: bool = False
    producer_id_block_size: int = 1000
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_ms: int = 300_000
    leader_imbalance_per_broker_percentage: int = 10
    max_partitions_per_request: int = 100_000

    @classmethod
    def from_config(cls, config: Any) -> ControllerSettings:
        if config is None:
            return cls()
        if isinstance(config, ControllerSettings):
            return config
        kw = {}
        for name in cls.__dataclass_fields__:
            v = getattr(config, name, None)
            if v is not None:
                kw[name] = v
        return cls(**kw)


class ControllerCore:
    """The metadata log, settings, clock and rng, and the image of every record written."""

    def __init__(
        self,
        log: MetadataLog,
        settings: ControllerSettings,
        clock: Callable[[], float],
        rng: random.Random,
    ) -> None:
        self.log = log
        self.settings = settings
        self.clock = clock
        self.rng = rng
        self.image = MetadataImage.EMPTY
        self.last_written_offset = -1

    def write(self, records: list[Any]) -> int:
        """Append records as one atomic batch (BatchBegin first, controller/metadata/batches.py)
        and replay them onto self.image; returns the last offset."""
        if not records:
            return self.last_written_offset
        if not self.log.is_leader():
            raise NotControllerError("this controller is not the active controller")
        records = [BatchBegin(len(records)), *records]
        last = self.log.append([encode_record(r) for r in records])
        delta = MetadataDelta(self.image)
        first = last - len(records) + 1
        for i, rec in enumerate(records):
            delta.replay(rec, first + i)
        self.image = delta.apply()
        self.last_written_offset = last
        return last

    def check_active(self) -> None:
        if not self.log.is_leader():
            raise NotControllerError(
                f"controller {self.settings.node_id} is not the active controller"
            )


class ControlManager:
    """Base of the control managers: each owns its own state and reaches the shared core
    (image, settings, clock, writing) through these names."""

    def __init__(self, core: ControllerCore) -> None:
        self.core = core

    @property
    def image(self) -> MetadataImage:
        return self.core.image

    @property
    def settings(self) -> ControllerSettings:
        return self.core.settings

    @property
    def last_written_offset(self) -> int:
        return self.core.last_written_offset

    def clock(self) -> float:
        return self.core.clock()

    def _write(self, records: list[Any]) -> int:
        return self.core.write(records)

    def _write_changes(self, changes: list[Any], then: list[Any] | None = None) -> int:
        """Write independent records (partition changes: each stands alone) in batches of at
        most MAX_RECORDS_PER_BATCH, then `then` as one more atomic batch. A broker leading
        tens of thousands of partitions re-registers, fences or shuts down without a batch
        larger than the Raft log takes uncommitted at once. Not atomic as a whole: a failure
        half-way leaves some changes written, which the retry finds done."""
        last = self.last_written_offset
        for i in range(0, len(changes), MAX_RECORDS_PER_BATCH):
            last = self.core.write(changes[i : i + MAX_RECORDS_PER_BATCH])
        if then:
            last = self.core.write(then)
        return last

    def _check_active(self) -> None:
        self.core.check_active()
