"""ControllerState: what every part of the QuorumController shares — the settings, the image of
everything written (committed or not), and writing records to the MetadataLog.

The operations live in mixins over this state, one module per responsibility: topic_ops.py
(topics, partitions, configs), broker_ops.py (registration, heartbeats, fencing, producer ids),
partition_ops.py (ISR changes, preferred-leader election); controller.py puts them together.

Threading: as QuorumController — exactly one thread (the controller thread) calls it.
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


class ControllerState:
    """Attributes set by QuorumController.__init__, and the helpers every operation uses."""

    log: MetadataLog
    settings: ControllerSettings
    clock: Callable[[], float]
    rng: random.Random
    image: MetadataImage
    last_written_offset: int
    _last_heartbeat_ms: dict[int, float]
    _registered_at: dict[int, int]  # broker id -> offset of its registration
    _shutting_down: set[int]

    def _write(self, records: list[Any]) -> int:
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

    def _check_active(self) -> None:
        if not self.log.is_leader():
            raise NotControllerError(
                f"controller {self.settings.node_id} is not the active controller"
            )

    def _live(self) -> set[int]:
        return {b for b in self.image.live_brokers() if b not in self._shutting_down}

    def _unclean_for(self, topic: str) -> bool:
        v = self.image.topic_config(topic).get("unclean.leader.election.enable")
        return self.settings.unclean_leader_election_enable if v is None else v == "true"
