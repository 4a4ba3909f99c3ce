"""Partition: this broker's state for one partition replica (leader or follower).

Holds what the metadata says (leader id, leader epoch, partition epoch, replicas, ISR) and what
the leader tracks (high watermark, each follower's log end offset and last caught-up time), plus
the Log. The high watermark (HW) rule, in one place (`maybe_advance_high_watermark`):

    HW = min(leader's durable end, LEO of every other member of the maximal ISR)
    leader's durable end = log.flushed_offset with log.flush.on.ack=true, else log.end_offset
    maximal ISR = the committed ISR plus a pending expansion (Kafka's "maximal ISR")

and it never moves backwards. Single node (ISR = [self]): HW = flushed offset (docs/replication.md).
A follower's fetch offset is its durable end (it fsyncs what it fetched before fetching again).

ISR changes (Kafka's rules, docs/replication.md): a follower is caught up when it fetched up to
the leader's log end *as of its previous fetch*; one not caught up for replica.lag.time.max.ms
leaves (`isr_to_shrink`), one that reached the HW and the start of the current leader epoch
joins (`isr_to_expand`). Either is proposed to the controller (AlterPartition) and takes effect
only when committed (`make_leader` with the new partition epoch); one proposal at a time.

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
ISR_RETRY_BACKOFF_MS = 200  # after a refused ISR change, before the next proposal


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class FollowerState:
    log_end_offset: int = -1  # unknown until it fetches
    last_caught_up_ms: int = 0
    last_fetch_leader_leo: int = -1  # the leader's log end when it last fetched
    last_fetch_ms: int = 0
    log_start_offset: int = -1  # as its last fetch reported it (unknown until then)


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
    leader_epoch_start_offset: int = 0
    # an ISR change sent to the controller and not committed yet: (new isr, sent at ms)
    pending_isr: tuple[tuple[int, ...], int] | None = None
    # after the controller refused a change: no new proposal before this (ms)
    isr_retry_at_ms: int = 0
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
        """Become (or stay) leader under `leader_epoch`. In a new term follower LEOs reset
        (unknown until they fetch); the same term with a new partition epoch is a committed
        ISR change. Any thread."""
        with self._lock:
            new_term = leader_epoch != self.leader_epoch or not self.is_leader
            if partition_epoch != self.partition_epoch or new_term:
                self.pending_isr = None  # committed (or overtaken): a new proposal may go
                self.isr_retry_at_ms = 0
            if new_term:
                now = _now_ms()
                # ISR members get the lag time to fetch from the new leader (Kafka does this)
                self.followers = {
                    r: FollowerState(last_caught_up_ms=now if r in isr else 0)
                    for r in replicas
                    if r != self.node_id
                }
                self.leader_epoch_start_offset = self.log.end_offset
                # a new leader starts from its HW as follower or its checkpoint, never above
                # its own durable log
                self.high_watermark = min(
                    max(self.high_watermark, checkpointed_hw), self.durable_end()
                )
            self.leader_id = self.node_id
            self.leader_epoch = leader_epoch
            self.partition_epoch = partition_epoch
            self.replicas = replicas
            self.isr = isr
            for r in replicas:  # a replica added by a reassignment
                if r != self.node_id and r not in self.followers:
                    self.followers[r] = FollowerState()
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
            self.pending_isr = None
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
        self, replica_id: int, fetch_offset: int, now_ms: int | None = None
    ) -> bool:
        """Record a follower's fetch (its fetch offset is its durable log end); returns True
        when the HW moved. Caught up (Kafka's rule): it fetched from at least the leader's end
        now, or as of its previous fetch."""
        now = now_ms if now_ms is not None else _now_ms()
        with self._lock:
            st = self.followers.get(replica_id)
            if st is None:
                return False
            leader_end = self.log.end_offset
            if fetch_offset >= leader_end:
                st.last_caught_up_ms = now
            elif 0 <= st.last_fetch_leader_leo <= fetch_offset:
                st.last_caught_up_ms = max(st.last_caught_up_ms, st.last_fetch_ms)
            st.last_fetch_leader_leo = leader_end
            st.last_fetch_ms = now
            st.log_end_offset = fetch_offset
            return self._advance_locked()

    def update_follower_log_start(self, replica_id: int, log_start_offset: int) -> bool:
        """Record the log start offset a follower's fetch reported (as reported: a follower
        that restarted its log lower says so); True when it moved up (a DeleteRecords waiting
        on the low watermark may complete)."""
        with self._lock:
            st = self.followers.get(replica_id)
            if st is None or log_start_offset < 0 or log_start_offset == st.log_start_offset:
                return False
            up = log_start_offset > st.log_start_offset
            st.log_start_offset = log_start_offset
            return up

    def low_watermark(self) -> int:
        """Leader: the smallest log start offset over the ISR (Kafka's low watermark; a
        follower that has not reported one since this leader epoch began counts as -1).
        DeleteRecords answers once it reaches the requested offset."""
        with self._lock:
            low = self.log.log_start_offset
            for r in self.isr:
                if r != self.node_id:
                    st = self.followers.get(r)
                    low = min(low, st.log_start_offset if st is not None else -1)
            return low

    def note_caught_up(self, replica_id: int, fetch_offset: int, at_ms: int) -> bool:
        """A follower idle in a fetch session at `fetch_offset` last fetched at `at_ms`: when
        that is the leader's log end (which only grows within a leader epoch) it was caught
        up then. Returns True when that moved its last caught-up time."""
        with self._lock:
            st = self.followers.get(replica_id)
            if st is None or fetch_offset < self.log.end_offset or at_ms <= st.last_caught_up_ms:
                return False
            st.last_caught_up_ms = at_ms
            return True

    def update_follower_high_watermark(self, leader_hw: int) -> None:
        """Follower: the HW the leader reported, never above the local log end."""
        with self._lock:
            if not self.is_leader:
                self.high_watermark = max(0, min(leader_hw, self.log.end_offset))

    # -- ISR changes (leader) ---------------------------------------------------------------------

    def _can_propose(self, now: int, retry_ms: int) -> bool:
        return (
            self.is_leader
            and now >= self.isr_retry_at_ms
            and (self.pending_isr is None or now - self.pending_isr[1] >= retry_ms)
        )

    def isr_to_shrink(self, lag_ms: int, now_ms: int | None = None, retry_ms: int = 5000):
        """The ISR without followers not caught up for `lag_ms` (None: no change to propose).
        Marks it pending."""
        now = now_ms if now_ms is not None else _now_ms()
        with self._lock:
            if not self._can_propose(now, retry_ms):
                return None
            out = []
            for r in self.isr:
                if r == self.node_id:
                    continue
                st = self.followers.get(r)
                if st is None or now - st.last_caught_up_ms > lag_ms:
                    out.append(r)
            if not out:
                return None
            new_isr = tuple(r for r in self.isr if r not in out)
            self.pending_isr = (new_isr, now)
            return new_isr

    def isr_to_expand(self, replica_id: int, now_ms: int | None = None, retry_ms: int = 5000):
        """The ISR plus `replica_id` when that follower reached the HW and the start of this
        leader epoch (None: nothing to propose). Marks it pending."""
        now = now_ms if now_ms is not None else _now_ms()
        with self._lock:
            st = self.followers.get(replica_id)
            if st is None or replica_id in self.isr or not self._can_propose(now, retry_ms):
                return None
            if st.log_end_offset < max(self.high_watermark, self.leader_epoch_start_offset):
                return None
            new_isr = (*self.isr, replica_id)
            self.pending_isr = (new_isr, now)
            return new_isr

    def isr_change_failed(self, backoff_ms: int = ISR_RETRY_BACKOFF_MS) -> bool:
        """The controller refused or did not answer: a check `backoff_ms` later proposes again
        (not at the next fetch: a follower that is not eligible yet, e.g. still fenced after a
        restart, made the leader ask every few milliseconds). Returns True when the HW moved:
        a refused expansion no longer counts in the maximal ISR, so a follower that was
        proposed and then stopped fetching (a broker in controlled shutdown) stops holding the
        HW back; the caller must then complete what waits on it."""
        with self._lock:
            self.pending_isr = None
            self.isr_retry_at_ms = _now_ms() + backoff_ms
            return self._advance_locked()

    def maybe_advance_high_watermark(self) -> bool:
        """Recompute the HW (after a flush or an append); True when it moved."""
        with self._lock:
            return self._advance_locked()

    def _advance_locked(self) -> bool:
        if not self.is_leader:
            return False
        candidate = self.durable_end()
        maximal = set(self.isr)
        if self.pending_isr is not None:
            maximal.update(self.pending_isr[0])
        for r in maximal:
            if r != self.node_id:
                st = self.followers.get(r)
                candidate = min(candidate, st.log_end_offset if st else -1)
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False
