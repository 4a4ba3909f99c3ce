"""Partition: this broker's replica of one partition (leader or follower): the Log, a lock, the
clock, and the replication rules' state (`PartitionState`, broker/replica/state.py), which
decides. Each method here reads the time and the log's offsets, takes the lock and passes them
to the core; the rules themselves (HW, ISR, leader epochs, truncation) live only in the core,
which the seeded simulation (tests/sim/replication_sim.py) drives too (docs/replication.md).

The leader's durable end (what counts towards its HW) is its flushed offset with
log.flush.on.ack=true, else its log end offset.

Threads: any thread (I/O workers, the flusher's on_flushed callback, the metadata publisher).
`_lock` guards the core's state; the Log has its own lock.
"""

from __future__ import annotations

import logging
import operator
import threading
import time
from typing import Any

from broker.log import Log
from broker.replica.state import (
    ISR_PROPOSAL_RETRY_MS,
    ISR_RETRY_BACKOFF_MS,
    FollowerState,
    PartitionState,
)

__all__ = ["ISR_RETRY_BACKOFF_MS", "FollowerState", "Partition"]

_log = logging.getLogger(__name__)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _state_attr(name: str) -> property:
    """An attribute of the core's state, read and written through the Partition (tests and the
    metadata applier read `part.isr`, `part.leader_epoch`, ...)."""

    def put(self: Partition, value: Any) -> None:
        setattr(self.state, name, value)

    # attrgetter: read on every produce and fetch, a C getter costs less than a Python one
    return property(operator.attrgetter(f"state.{name}"), put, doc=f"PartitionState.{name}")


class Partition:
    leader_id = _state_attr("leader_id")
    leader_epoch = _state_attr("leader_epoch")
    partition_epoch = _state_attr("partition_epoch")
    replicas = _state_attr("replicas")
    isr = _state_attr("isr")
    high_watermark = _state_attr("high_watermark")
    followers = _state_attr("followers")
    leader_epoch_start_offset = _state_attr("leader_epoch_start_offset")
    pending_isr = _state_attr("pending_isr")
    isr_retry_at_ms = _state_attr("isr_retry_at_ms")
    isr_unsettled = _state_attr("isr_unsettled")

    def __init__(
        self, topic: str, partition: int, node_id: int, log: Log, flush_on_ack: bool = True
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.node_id = node_id
        self.log = log
        self.flush_on_ack = flush_on_ack
        self.state = PartitionState(node_id)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.partition}, {self.state!r})"

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    @property
    def is_leader(self) -> bool:
        st = self.state
        return st.leader_id == st.node_id

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
        """Become (or stay) leader under `leader_epoch` (PartitionState.become_leader). Any
        thread."""
        now = _now_ms()
        with self._lock:
            change = self.state.become_leader(
                now,
                leader_epoch,
                partition_epoch,
                replicas,
                isr,
                checkpointed_hw,
                self.log.end_offset,
                self.durable_end(),
            )
        if change.new_term:
            _log.info(
                "[%s-%d] became leader (epoch %d, isr %s, hw %d)",
                self.topic,
                self.partition,
                leader_epoch,
                list(isr),
                self.high_watermark,
            )

    def make_follower(
        self,
        leader_id: int,
        leader_epoch: int,
        partition_epoch: int,
        replicas: Any,
        isr: Any,
    ) -> None:
        """Follow `leader_id` (the replica fetcher arrives with replication). Any thread."""
        with self._lock:
            first = self.state.leader_epoch < 0 and self.state.leader_id < 0  # just opened
            changed = self.state.become_follower(
                leader_id, leader_epoch, partition_epoch, tuple(replicas), tuple(isr)
            )
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

    def follower_fetched(
        self,
        replica_id: int,
        fetch_offset: int,
        log_start_offset: int,
        now_ms: int,
        expand_isr: bool,
    ) -> tuple[bool, bool, tuple[int, ...] | None]:
        """A follower fetch's arrival under one lock: its position (its fetch offset is its
        durable log end; PartitionState.on_follower_fetch), the log start offset it reported
        (`follower_log_start`) and, when `expand_isr`, the state's `isr_to_expand`. Returns (the
        HW moved, its log start moved up, the ISR to propose or None)."""
        log = self.log
        with self._lock:
            st = self.state
            moved = st.on_follower_fetch(
                replica_id, fetch_offset, now_ms, log.end_offset, self.durable_end()
            )
            start_up = st.follower_log_start(replica_id, log_start_offset)
            new_isr = (
                st.isr_to_expand(replica_id, now_ms, ISR_PROPOSAL_RETRY_MS) if expand_isr else None
            )
        return moved, start_up, new_isr

    def low_watermark(self) -> int:
        """Leader: the smallest log start offset over the ISR (Kafka's low watermark).
        DeleteRecords answers once it reaches the requested offset."""
        with self._lock:
            return self.state.low_watermark(self.log.log_start_offset)

    def note_caught_up(self, replica_id: int, fetch_offset: int, at_ms: int) -> bool:
        """A follower idle in a fetch session at `fetch_offset` last fetched at `at_ms`
        (PartitionState.note_caught_up)."""
        with self._lock:
            return self.state.note_caught_up(replica_id, fetch_offset, at_ms, self.log.end_offset)

    def update_follower_high_watermark(self, leader_hw: int) -> None:
        """Follower: the HW the leader reported, never above the local log end."""
        with self._lock:
            self.state.on_fetch_response(leader_hw, self.log.end_offset)
        self.log.producers.high_watermark_moved(self.high_watermark)

    # -- ISR changes (leader) ---------------------------------------------------------------------

    def isr_to_shrink(
        self, lag_ms: int, now_ms: int | None = None, retry_ms: int = ISR_PROPOSAL_RETRY_MS
    ) -> tuple[int, ...] | None:
        """The ISR without followers not caught up for `lag_ms` (None: no change to propose).
        Marks it pending."""
        now = now_ms if now_ms is not None else _now_ms()
        with self._lock:
            return self.state.isr_to_shrink(now, lag_ms, retry_ms)

    def isr_change_failed(self, backoff_ms: int = ISR_RETRY_BACKOFF_MS) -> bool:
        """The controller refused the change and it was not made: a check `backoff_ms` later
        proposes again (not at the next fetch: a follower that is not eligible yet, e.g. still
        fenced after a restart, made the leader ask every few milliseconds). Returns True when the HW moved:
        a refused expansion no longer counts in the maximal ISR, so a follower that was
        proposed and then stopped fetching (a broker in controlled shutdown) stops holding the
        HW back; the caller must then complete what waits on it."""
        now = _now_ms()
        with self._lock:
            return self.state.isr_change_failed(now, self.durable_end(), backoff_ms)

    def isr_change_unsettled(self, backoff_ms: int = ISR_RETRY_BACKOFF_MS) -> None:
        """No answer, or one that does not prove the change was not made: it stays pending
        (counted towards the HW) and is sent again after `backoff_ms`
        (PartitionState.isr_change_unsettled)."""
        now = _now_ms()
        with self._lock:
            self.state.isr_change_unsettled(now, backoff_ms)

    def maybe_advance_high_watermark(self) -> bool:
        """Recompute the HW (after a flush or an append); True when it moved. Completed
        transactions whose markers it passed stop holding the last stable offset back."""
        with self._lock:
            moved = self.state.advance_high_watermark(self.durable_end())
        if moved:
            self.log.producers.high_watermark_moved(self.high_watermark)
        return moved
