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

The operations live in mixins over `ControllerState` (state.py: settings, image, writing records),
one module per responsibility: topic_ops.py (topics, partitions, configs), broker_ops.py (broker
lifecycle, fencing, producer ids), partition_ops.py (ISR changes, preferred-leader election).
This module assembles them and owns loading the image and the periodic tick.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Any

from controller.metadata.batches import BatchAssembler
from controller.metadata.delta import MetadataDelta
from controller.metadata.image import MetadataImage
from controller.metadata.records import NoOp, decode_record
from controller.metadata.snapshot import load_snapshot
from controller.quorum.broker_ops import BrokerOps
from controller.quorum.log import MetadataLog
from controller.quorum.partition_ops import PartitionOps
from controller.quorum.replication import imbalanced_partitions
from controller.quorum.state import ControllerSettings, ControllerState
from controller.quorum.topic_ops import TopicOps

__all__ = ["ControllerSettings", "ControllerState", "QuorumController"]

_log = logging.getLogger(__name__)


class QuorumController(TopicOps, BrokerOps, PartitionOps):
    def __init__(
        self,
        metadata_log: MetadataLog,
        config: Any = None,
        clock: Callable[[], float] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.log = metadata_log
        self.settings = ControllerSettings.from_config(config)
        self.clock = clock or (lambda: time.monotonic() * 1000.0)
        self.rng = rng or random.Random(1)
        self.image = MetadataImage.EMPTY
        self.last_written_offset = -1
        self._last_heartbeat_ms: dict[int, float] = {}
        self._registered_at: dict[int, int] = {}  # broker id -> offset of its registration
        self._shutting_down: set[int] = set()
        self._next_rebalance_ms = self.clock() + self.settings.leader_imbalance_check_interval_ms
        self.load()

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
        self.image = image
        self.last_written_offset = self.image.offset
        now = self.clock()
        self._last_heartbeat_ms = {b: now for b in self.image.brokers}
        self._registered_at = {b: self.image.offset for b in self.image.brokers}
        self._shutting_down.clear()
        _log.info(
            "[controller=%d] loaded metadata through offset %d: %d brokers, %d topics",
            self.settings.node_id,
            self.image.offset,
            len(self.image.brokers),
            len(self.image.topics),
        )

    def write_noop(self) -> int:
        """Commit a NoOp (a new active controller's first write)."""
        return self._write([NoOp()])

    def tick(self) -> None:
        """Periodic work (ControllerThread calls it): session expiry, and preferred-leader
        rebalancing every leader.imbalance.check.interval.ms when enabled, for the brokers whose
        share of partitions led elsewhere is above leader.imbalance.per.broker.percentage."""
        self.check_sessions()
        now = self.clock()
        if self.settings.auto_leader_rebalance_enable and now >= self._next_rebalance_ms:
            self._next_rebalance_ms = now + self.settings.leader_imbalance_check_interval_ms
            imbalanced = imbalanced_partitions(
                self.image, self.settings.leader_imbalance_per_broker_percentage
            )
            if imbalanced:
                self.elect_preferred_leaders(imbalanced)
