"""Partition: this broker's state for one partition replica (leader or follower).

Holds what the metadata says (leader id, leader epoch, partition epoch, replicas, ISR) and what
the leader tracks (high watermark, each follower's log end offset and last caught-up time), plus
the Log. The high watermark (HW) rule, in one place (`maybe_advance_high_watermark`):

    HW = min(leader's durable end, LEO of every other ISR member)
    leader's durable end = log.flushed_offset with log.flush.on.ack=true, else log.end_offset

and it never moves backwards. Single node (ISR = [self]): HW = flushed offset (docs/replication.md).

Threads: any thread (I/O workers, the flusher's on_flushed callback, the metadata publisher).
`_lock` guards the mutable state; the Log has its own lock.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from broker.log import Log

_log = logging.getLogger(__name__)


@dataclass
class FollowerState:
    log_end_offset: int = 0
    last_caught_up_ms: int = 0


@dataclass
class Partition:
    topic: str
    partition: int
    node_id: int
    log: Log
    flush_on_ack: bool = True
    leader_id: int = -1
    leader_epoch: int = -1
    partition_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    high_watermark: int = 0
    followers: dict[int, FollowerState] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.node_id

    def durable_end(self) -> int:
        """The leader's own end offset that counts towards the HW (see module docstring)."""
        return self.log.flushed_offset if self.flush_on_ack else self.log.end_offset

    def make_leader(
        self,
        leader_epoch: int,
        partition_epoch: int,
        replicas: tuple[int, ...],
        isr: tuple[int, ...],
        checkpointed_hw: int,
    ) -> None:
        """Become (or stay) leader under `leader_epoch`. Follower LEOs reset (unknown until
        they fetch). Any thread."""
        with self._lock:
            new_term = leader_epoch != self.leader_epoch or not self.is_leader
            self.leader_id = self.node_id
            self.leader_epoch = leader_epoch
            self.partition_epoch = partition_epoch
            self.replicas = replicas
            self.isr = isr
            if new_term:
                self.followers = {r: FollowerState() for r in replicas if r != self.node_id}
                # a restarted leader starts from its checkpoint, never above its own log
                self.high_watermark = min(
                    max(self.high_watermark, checkpointed_hw), self.durable_end()
                )
            self._advance_locked()
        if new_term:
            _log.info(
                "[%s-%d] became leader (epoch %d, isr %s, hw %d)",
                self.topic,
                self.partition,
                leader_epoch,
                list(isr),
                self.high_watermark,
            )

    def make_follower(
        self, leader_id: int, leader_epoch: int, partition_epoch: int, replicas, isr
    ) -> None:
        """Follow `leader_id` (the replica fetcher arrives with replication). Any thread."""
        with self._lock:
            changed = leader_epoch != self.leader_epoch or leader_id != self.leader_id
            first = self.leader_epoch < 0 and self.leader_id < 0  # a replica just opened
            self.leader_id = leader_id
            self.leader_epoch = leader_epoch
            self.partition_epoch = partition_epoch
            self.replicas = tuple(replicas)
            self.isr = tuple(isr)
            self.followers = {}
        if not changed:
            return
        if leader_id >= 0:
            _log.info(
                "[%s-%d] became follower of %d (epoch %d)",
                self.topic,
                self.partition,
                leader_id,
                leader_epoch,
            )
        else:  # opened without a leader (e.g. after a controlled shutdown) is no change
            _log.log(
                logging.DEBUG if first else logging.INFO,
                "[%s-%d] has no leader (epoch %d)",
                self.topic,
                self.partition,
                leader_epoch,
            )

    def update_follower(
        self, replica_id: int, log_end_offset: int, now_ms: int | None = None
    ) -> bool:
        """Record a follower's fetch position; returns True when the HW moved."""
        with self._lock:
            st = self.followers.get(replica_id)
            if st is None:
                return False
            st.log_end_offset = log_end_offset
            if log_end_offset >= self.log.end_offset:
                st.last_caught_up_ms = now_ms if now_ms is not None else int(time.time() * 1000)
            return self._advance_locked()

    def maybe_advance_high_watermark(self) -> bool:
        """Recompute the HW (after a flush or an append); True when it moved."""
        with self._lock:
            return self._advance_locked()

    def _advance_locked(self) -> bool:
        if not self.is_leader:
            return False
        candidate = self.durable_end()
        for r in self.isr:
            if r != self.node_id:
                st = self.followers.get(r)
                candidate = min(candidate, st.log_end_offset if st else 0)
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False
