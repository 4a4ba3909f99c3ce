"""PartitionState: the replication rules of one partition replica, as a pure state machine.

The rules for the high watermark (HW), the ISR, leader epochs and truncation live here and only
here; `Partition` (broker/replica/partition.py) holds a `PartitionState` next to its Log, takes
its lock, reads the clock and the log's offsets, and passes them in. The seeded simulation
(tests/sim/replication_sim.py) drives the same object with a virtual clock and in-memory logs.
No files, threads, clocks or randomness: every input, including the time (`now_ms`) and what
the log says (its end offset, its durable end, its epoch lookups), arrives as an argument, and
every decision comes back as a return value.

Events (leader side)                      Decision returned
  become_leader (leader change,           LeaderChange: a new term?, HW moved?
    ISR change committed, unclean
    election: an ISR of [self])
  advance_high_watermark (append as       HW moved? (the caller completes what waits on it)
    leader, a flush)
  on_follower_fetch                       HW moved?
  isr_to_expand / isr_to_shrink           the ISR to propose (AlterPartition), or None
  isr_change_failed                       HW moved? (a refused expansion stops counting)
  isr_change_unsettled                    (no answer, or stale epochs: the change may have been
                                          made; it keeps counting and is sent again)
  produce_outcome                         the purgatory's answer for a waiting produce
Events (follower side)
  become_follower                         changed?
  on_fetch_response                       the new HW
Pure functions
  diverging(...)                          KIP-320 on the leader: where a fetcher diverged
  truncation_target(...)                  the follower's truncation point (diverging answer,
                                          OffsetForLeaderEpoch)
  out_of_range_truncation(...)            OFFSET_OUT_OF_RANGE: restart or truncate where

The HW rule:

    HW = min(leader's durable end, LEO of every other member of the maximal ISR)
    leader's durable end = flushed offset with log.flush.on.ack=true, else the log end offset
    maximal ISR = the committed ISR plus a pending expansion (Kafka's "maximal ISR")

and it never moves backwards within a leader's term. A follower's fetch offset is its durable
end (it fsyncs what it fetched before fetching again).

ISR changes (Kafka's rules): a follower is caught up when it fetched up to the leader's log end
*as of its previous fetch*; one not caught up for replica.lag.time.max.ms leaves
(`isr_to_shrink`), one that reached the HW and the start of the current leader epoch joins
(`isr_to_expand`). Either is proposed to the controller and takes effect only when committed
(`become_leader` with the new partition epoch); one proposal at a time. A proposal leaves the
maximal ISR only when settled: by metadata with a newer partition epoch or term, or by a
refusal that proves it was not made (INELIGIBLE_REPLICA, INVALID_REQUEST: the controller
checked it against the current epochs). A proposal whose fate is unknown (no answer, a stale
epoch: an earlier send of it may have been committed) keeps counting towards the HW and is
sent again, unchanged, after a back-off (Kafka's AlterPartitionManager does the same): dropping
it let the HW pass a follower the controller had just put in the ISR (the simulation found it).

Threads: none of its own; the caller serialises calls (Partition holds its lock around each).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from client.errors import ErrorCode

_NOT_LEADER = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
_STORAGE_ERROR = int(ErrorCode.KAFKA_STORAGE_ERROR)
ISR_RETRY_BACKOFF_MS = 200  # after a refused ISR change, before the next proposal
ISR_PROPOSAL_RETRY_MS = 5000  # an unanswered proposal is proposed again after this


@dataclass
class FollowerState:
    """What the leader knows of one follower, in the current leader term."""

    log_end_offset: int = -1  # unknown until it fetches
    last_caught_up_ms: int = 0
    last_fetch_leader_leo: int = -1  # the leader's log end when it last fetched
    last_fetch_ms: int = 0
    log_start_offset: int = -1  # as its last fetch reported it (unknown until then)
    # when this leader started tracking it (the lag in time of one never caught up: metrics)
    tracked_since_ms: int = 0


class LeaderChange(NamedTuple):
    new_term: bool  # a new leader term began here (not an ISR change within one)
    hw_moved: bool


@dataclass
class PartitionState:
    node_id: int
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
    # after the controller refused a change, or its fate is unknown: no proposal before this
    isr_retry_at_ms: int = 0
    # the pending change's last send has no settling answer: send it again after the back-off
    isr_unsettled: bool = False

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.node_id

    # -- leadership (metadata applied) ------------------------------------------------------------

    def become_leader(
        self,
        now_ms: int,
        leader_epoch: int,
        partition_epoch: int,
        replicas: tuple[int, ...],
        isr: tuple[int, ...],
        checkpointed_hw: int,
        log_end: int,
        durable_end: int,
    ) -> LeaderChange:
        """Become (or stay) leader under `leader_epoch`. In a new term follower LEOs reset
        (unknown until they fetch) and the term starts at `log_end`; the same term with a new
        partition epoch is a committed ISR change. An unclean election is a leader change whose
        ISR is [self]: the rules are the same (the new leader's log is the truth; followers
        truncate to it through divergence)."""
        new_term = leader_epoch != self.leader_epoch or not self.is_leader
        if partition_epoch != self.partition_epoch or new_term:
            self.pending_isr = None  # committed (or overtaken): a new proposal may go
            self.isr_unsettled = False
            self.isr_retry_at_ms = 0
        if new_term:
            # ISR members get the lag time to fetch from the new leader (Kafka does this)
            self.followers = {
                r: FollowerState(
                    last_caught_up_ms=now_ms if r in isr else 0, tracked_since_ms=now_ms
                )
                for r in replicas
                if r != self.node_id
            }
            self.leader_epoch_start_offset = log_end
            # a new leader starts from its HW as follower or its checkpoint, never above its
            # own durable log
            self.high_watermark = min(max(self.high_watermark, checkpointed_hw), durable_end)
        self.leader_id = self.node_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas = tuple(replicas)
        self.isr = tuple(isr)
        for r in replicas:  # a replica added by a reassignment
            if r != self.node_id and r not in self.followers:
                self.followers[r] = FollowerState(tracked_since_ms=now_ms)
        return LeaderChange(new_term, self.advance_high_watermark(durable_end))

    def become_follower(
        self,
        leader_id: int,
        leader_epoch: int,
        partition_epoch: int,
        replicas: tuple[int, ...],
        isr: tuple[int, ...],
    ) -> bool:
        """Follow `leader_id` (-1: no leader). Returns whether the leader or its epoch
        changed."""
        changed = leader_epoch != self.leader_epoch or leader_id != self.leader_id
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas = tuple(replicas)
        self.isr = tuple(isr)
        self.followers = {}
        self.pending_isr = None
        self.isr_unsettled = False
        return changed

    # -- the high watermark (leader) --------------------------------------------------------------

    def maximal_isr(self) -> set[int]:
        maximal = set(self.isr)
        if self.pending_isr is not None:
            maximal.update(self.pending_isr[0])
        return maximal

    def advance_high_watermark(self, durable_end: int) -> bool:
        """Recompute the HW after an append as leader, a flush or a follower's fetch; True when
        it moved (it never moves back)."""
        node_id = self.node_id
        if self.leader_id != node_id:
            return False
        candidate = durable_end
        followers = self.followers
        # (the committed ISR as it is when no change is pending: no set per follower fetch)
        members = self.isr if self.pending_isr is None else self.maximal_isr()
        for r in members:
            if r != node_id:
                st = followers.get(r)
                end = st.log_end_offset if st is not None else -1
                if end < candidate:
                    candidate = end
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    def on_follower_fetch(
        self, replica_id: int, fetch_offset: int, now_ms: int, leader_end: int, durable_end: int
    ) -> bool:
        """A follower fetched at `fetch_offset` (its durable end; the caller checked first that
        it did not diverge); True when the HW moved. Caught up (Kafka's rule): it fetched from
        at least the leader's end now, or as of its previous fetch."""
        st = self.followers.get(replica_id)
        if st is None:
            return False
        if fetch_offset >= leader_end:
            st.last_caught_up_ms = now_ms
        elif 0 <= st.last_fetch_leader_leo <= fetch_offset:
            st.last_caught_up_ms = max(st.last_caught_up_ms, st.last_fetch_ms)
        st.last_fetch_leader_leo = leader_end
        st.last_fetch_ms = now_ms
        st.log_end_offset = fetch_offset
        return self.advance_high_watermark(durable_end)

    def note_caught_up(
        self, replica_id: int, fetch_offset: int, at_ms: int, leader_end: int
    ) -> bool:
        """A follower idle in a fetch session at `fetch_offset` last fetched at `at_ms`: when
        that is the leader's log end (which only grows within a leader epoch) it was caught up
        then. True when that moved its last caught-up time."""
        st = self.followers.get(replica_id)
        if st is None or fetch_offset < leader_end or at_ms <= st.last_caught_up_ms:
            return False
        st.last_caught_up_ms = at_ms
        return True

    def follower_log_start(self, replica_id: int, log_start_offset: int) -> bool:
        """The log start offset a follower's fetch reported (as reported: a follower that
        restarted its log lower says so); True when it moved up."""
        st = self.followers.get(replica_id)
        if st is None or log_start_offset < 0 or log_start_offset == st.log_start_offset:
            return False
        up = log_start_offset > st.log_start_offset
        st.log_start_offset = log_start_offset
        return up

    def low_watermark(self, own_log_start: int) -> int:
        """The smallest log start offset over the ISR (a follower that has not reported one
        since this term began counts as -1)."""
        low = own_log_start
        for r in self.isr:
            if r != self.node_id:
                st = self.followers.get(r)
                low = min(low, st.log_start_offset if st is not None else -1)
        return low

    def produce_outcome(
        self,
        leader_epoch: int,
        required_offset: int,
        acks: int,
        durable_end: int,
        offline: bool,
        min_insync: Callable[[], int],
    ) -> int | None:
        """The purgatory's decision for a produce appended under `leader_epoch` that needs
        `required_offset`: None = keep waiting, else the final error code (0: acknowledged).
        `min_insync()` (min.insync.replicas, a config lookup) is asked only once the HW has
        reached the produce: the purgatory asks this of every waiting produce at every wake."""
        if self.leader_id != self.node_id or self.leader_epoch != leader_epoch:
            return _NOT_LEADER
        if offline:
            return _STORAGE_ERROR
        if acks != -1:
            return 0 if durable_end >= required_offset else None
        if self.high_watermark < required_offset:
            return None
        if len(self.isr) < min_insync():  # the ISR shrank after the append
            return int(ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
        return 0

    # -- the high watermark (follower) ------------------------------------------------------------

    def on_fetch_response(self, leader_hw: int, log_end: int) -> int:
        """Follower: the HW the leader reported (or the same HW after a truncation), never
        above the local log end. Returns the HW."""
        if not self.is_leader:
            self.high_watermark = max(0, min(leader_hw, log_end))
        return self.high_watermark

    # -- ISR changes (leader) ---------------------------------------------------------------------

    def _can_propose(self, now_ms: int, retry_ms: int) -> bool:
        return (
            self.is_leader
            and now_ms >= self.isr_retry_at_ms
            and (
                self.pending_isr is None
                or self.isr_unsettled
                or now_ms - self.pending_isr[1] >= retry_ms
            )
        )

    def _resend(self, now_ms: int) -> tuple[int, ...] | None:
        """The pending change again, when one is unsettled (a new one is computed only once
        the last is settled: it may have been committed)."""
        if self.pending_isr is None:
            return None
        self.pending_isr = (self.pending_isr[0], now_ms)
        self.isr_unsettled = False
        return self.pending_isr[0]

    def isr_to_shrink(
        self, now_ms: int, lag_ms: int, retry_ms: int = ISR_PROPOSAL_RETRY_MS
    ) -> tuple[int, ...] | None:
        """The ISR without followers not caught up for `lag_ms` (None: nothing to propose), or
        an unsettled change to send again. Marks it pending."""
        if not self._can_propose(now_ms, retry_ms):
            return None
        if self.pending_isr is not None:
            return self._resend(now_ms)
        out = []
        for r in self.isr:
            if r == self.node_id:
                continue
            st = self.followers.get(r)
            if st is None or now_ms - st.last_caught_up_ms > lag_ms:
                out.append(r)
        if not out:
            return None
        new_isr = tuple(r for r in self.isr if r not in out)
        self.pending_isr = (new_isr, now_ms)
        return new_isr

    def isr_to_expand(
        self, replica_id: int, now_ms: int, retry_ms: int = ISR_PROPOSAL_RETRY_MS
    ) -> tuple[int, ...] | None:
        """The ISR plus `replica_id` when that follower reached the HW and the start of this
        leader epoch (None: nothing to propose), or an unsettled change to send again. Marks it
        pending."""
        if not self._can_propose(now_ms, retry_ms):
            return None
        if self.pending_isr is not None:
            return self._resend(now_ms)
        st = self.followers.get(replica_id)
        if st is None or replica_id in self.isr:
            return None
        if st.log_end_offset < max(self.high_watermark, self.leader_epoch_start_offset):
            return None
        new_isr = (*self.isr, replica_id)
        self.pending_isr = (new_isr, now_ms)
        return new_isr

    def isr_change_failed(
        self, now_ms: int, durable_end: int, backoff_ms: int = ISR_RETRY_BACKOFF_MS
    ) -> bool:
        """The controller refused the change and it was not made (INELIGIBLE_REPLICA,
        INVALID_REQUEST): a check `backoff_ms` later proposes again. Returns True when the HW
        moved (a refused expansion no longer counts in the maximal ISR)."""
        self.pending_isr = None
        self.isr_unsettled = False
        self.isr_retry_at_ms = now_ms + backoff_ms
        return self.advance_high_watermark(durable_end)

    def isr_change_unsettled(self, now_ms: int, backoff_ms: int = ISR_RETRY_BACKOFF_MS) -> None:
        """No answer, or one that does not prove the change was not made (a stale leader or
        partition epoch: an earlier send may have been committed): it stays pending, counted
        in the maximal ISR, until metadata settles it; a check `backoff_ms` later sends it
        again."""
        self.isr_retry_at_ms = now_ms + backoff_ms
        self.isr_unsettled = self.pending_isr is not None


# -- truncation (pure functions) --------------------------------------------------------------------

EpochLookup = Callable[[int], tuple[int, int]]
"""`end_offset_for_epoch(epoch)` of a log (KIP-279): (largest epoch <= `epoch`, its end offset),
or (-1, -1) when the log knows no epoch that old."""


def diverging(
    fetch_offset: int, last_fetched_epoch: int, end_offset_for_epoch: EpochLookup, log_start: int
) -> tuple[int, int] | None:
    """KIP-320 on the leader: (largest epoch <= the fetcher's last fetched epoch, its end offset
    here) when what the fetcher holds diverged from this log, else None. A leader that knows no
    epoch that old answers (-1, its log start offset)."""
    if last_fetched_epoch < 0:
        return None
    epoch, end = end_offset_for_epoch(last_fetched_epoch)
    if epoch < 0:
        return (-1, log_start)
    if epoch < last_fetched_epoch or end < fetch_offset:
        return (epoch, end)
    return None


def truncation_target(
    leader_epoch: int,
    leader_end: int,
    end_offset_for_epoch: EpochLookup,
    log_start: int,
    log_end: int,
) -> int:
    """Where a follower truncates after a diverging answer (or an OffsetForLeaderEpoch answer)
    of (`leader_epoch`, `leader_end`): the smaller of the leader's end for that epoch and its
    own end for the same epoch; the leader knowing no epoch that old keeps nothing the leader
    lacks. Never to the HW alone (KIP-101's lost-write case). May be below `log_start` (the
    log then restarts there) and is never above `log_end`."""
    if leader_epoch < 0:
        target = min(leader_end, log_end) if leader_end >= 0 else log_start
    else:
        mine_epoch, mine_end = end_offset_for_epoch(leader_epoch)
        target = leader_end if mine_epoch < 0 else min(leader_end, mine_end)
    return min(max(target, 0), log_end)


def out_of_range_truncation(
    log_end: int, leader_start: int, leader_end: int
) -> tuple[str, int] | None:
    """OFFSET_OUT_OF_RANGE from the leader (Kafka's ReplicaFetcherThread): below its start,
    ("restart", leader_start): the log restarts empty there; above its end, ("truncate",
    leader_end); else None."""
    if log_end < leader_start:
        return ("restart", leader_start)
    if 0 <= leader_end < log_end:
        return ("truncate", leader_end)
    return None
