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
# most metadata records one client request (CreateTopics, CreatePartitions) may write: they go
# in one atomic batch, which must fit under the Raft log's 10,000 uncommitted entries: the cap
# less the tenth that bulk writes keep free (RESERVED_UNCOMMITTED_SHARE). Past it the request is refused with POLICY_VIOLATION, as Kafka's
# controller refuses "excessively large" user operations (it was NOT_CONTROLLER from Raft's cap:
# wrong, and retriable, so a client retried it for ever)
MAX_RECORDS_PER_USER_OP = 9_000
# share of the log's uncommitted-entry cap that non-atomic (bulk) writes leave free, so the small
# atomic writes of other requests (heartbeats, AlterPartition) go through meanwhile
RESERVED_UNCOMMITTED_SHARE = 10

# a non-atomic write still in progress: writes what fits now, True once all is written
Step = Callable[[], bool]


@dataclass(frozen=True)
class ControllerSettings:
    """The config values the controller reads, built once (`from_config`) by whoever builds
    the controller: a controller process (VoterSettings), a combined broker (BrokerSettings),
    or a test (the defaults, or some of them given)."""

    node_id: int = 1
    broker_session_timeout_ms: int = 9000
    num_partitions: int = 1
    default_replication_factor: int = 1
    unclean_leader_election_enable: bool = False
    producer_id_block_size: int = 1000
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_ms: int = 300_000
    leader_imbalance_per_broker_percentage: int = 10
    max_partitions_per_request: int = MAX_RECORDS_PER_USER_OP - 1  # (+ the Topic record)
    auto_balance_mode: str = "node-add"
    auto_balance_unavailable_timeout_ms: int = 900_000
    auto_balance_max_concurrent_moves: int = 50
    sasl_scram_bootstrap_file: str | None = None  # SCRAM credentials written at bootstrap

    @classmethod
    def from_config(cls, config: object) -> ControllerSettings:
        """The settings named like this class's fields in `config` (a Config, or a namespace
        of some of them); an absent or None one keeps its default."""
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
        # non-atomic writes waiting for room in the log (key -> step), resumed after commits
        self.unfinished: dict[tuple[str, int], Step] = {}

    def bulk_room(self) -> int:
        """How many independent records a non-atomic write may add now: at most
        MAX_RECORDS_PER_BATCH, and no more than keeps the log's uncommitted entries (Raft's
        cap) a tenth below its cap. 0: wait for earlier writes to commit."""
        state = self.log.uncommitted()
        if state is None:
            return MAX_RECORDS_PER_BATCH
        waiting, cap = state
        room = cap - cap // RESERVED_UNCOMMITTED_SHARE - waiting - 1  # 1: the BatchBegin
        return max(0, min(MAX_RECORDS_PER_BATCH, room))

    def resume(self) -> None:
        """Continue the unfinished non-atomic writes as far as the log has room (after a
        commit, and on every tick). Each step recomputes what is left from the image."""
        for key, step in list(self.unfinished.items()):
            if self.bulk_room() <= 0 or not self.log.is_leader():
                return
            if step():
                self.unfinished.pop(key, None)

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

    def _write_changes(self, changes: list[Any], then: list[Any] | None = None) -> bool:
        """Write independent records (partition changes: each stands alone) in batches as
        large as `core.bulk_room()` allows, then `then` as one more atomic batch. True when
        everything was written; False when the log's uncommitted room ran out first (`then`
        not written): the caller continues once earlier batches commit (`_write_bulk`). A
        broker leading tens of thousands of partitions re-registers, fences or shuts down
        without ever proposing more than the Raft log takes uncommitted at once."""
        i = 0
        while i < len(changes):
            n = self.core.bulk_room()
            if n <= 0:
                return False
            self.core.write(changes[i : i + n])
            i += n
        if then:
            self.core.write(then)
        return True

    def _write_bulk(
        self,
        key: tuple[str, int],
        compute: Callable[[], list[Any]],
        then: Callable[[], list[Any]] | None = None,
        first: list[Any] | None = None,
    ) -> bool:
        """A non-atomic write that may be larger than the log takes uncommitted: write the
        changes (`first` when the caller computed them already, else `compute()`: independent
        records from the current image), then `then()` (one atomic batch, asked for only once
        every change is written) as far as there is room. When room runs out, the rest follows
        after earlier batches commit (`core.resume`), recomputed by `compute()` from the image
        of that time, so it is never stale and a change already written is not written again.
        True when all was written now. A newer write under the same `key` replaces an
        unfinished one."""
        pending = [first]

        def step() -> bool:
            changes = pending[0] if pending[0] is not None else compute()
            pending[0] = None
            if not self._write_changes(changes):
                return False
            if then is not None:
                self._write(then())
            return True

        if step():
            self.core.unfinished.pop(key, None)
            return True
        self.core.unfinished[key] = step
        return False

    def _unfinished(self, key: tuple[str, int]) -> bool:
        return key in self.core.unfinished

    def _check_active(self) -> None:
        self.core.check_active()
