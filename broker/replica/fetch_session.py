"""The leader's incremental fetch sessions (KIP-227) for follower fetches.

A follower that fetches thousands of partitions from one leader opens a session with a full
fetch (session_id 0, session_epoch 0): the leader keeps, per partition, what the follower asked
(fetch offset, leader epoch, last fetched epoch, max bytes) and what it last answered (high
watermark, log start offset). Each later fetch (session_id N, epoch k > 0) names only the
partitions added or whose fetch state changed, and `forgotten_topics` the removed ones; the
answer names only partitions with records, a changed high watermark / log start offset, or an
error. An idle follower's fetch then costs O(partitions that changed), not O(partitions).

What changed is pushed, not polled: the replica manager calls `mark_changed(tps)` whenever a
partition gets records, moves its high watermark, or changes leadership; the sessions holding
it note it as *dirty* and their parked fetch is woken through its `session_key`. A fetch
evaluates its request's partitions, the dirty ones and the *recheck* ones (a follower not yet
in the ISR, so its ISR expansion is retried at every fetch, as before sessions).

Bounds: at most `max_sessions` (the least recently used is evicted), and a session idle for
`idle_ms` is dropped. A session also dies when its follower's broker epoch changes (the
follower restarted: `drop_replica`). Sessions are only for followers (replica_id >= 0).

Threads: every method takes the cache's lock (I/O workers, flusher threads, the purgatory's
reaper, the metadata publisher, the broker-tasks thread); a SessionPartition is read and
written only under it. The clock comes in through the constructor.
"""

from __future__ import annotations

import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from broker.replica.specs import FetchPartitionSpec
from client.errors import ErrorCode

TopicPartition = tuple[str, int]
NEVER = -2  # sent_* before the first answer that names the partition


@dataclass
class SessionPartition:
    # what the follower asks for the partition (the request's partition entry, as the fetch
    # path takes it: a session fetch reads and checks these as they are)
    state: FetchPartitionSpec
    sent_high_watermark: int = NEVER
    sent_log_start_offset: int = NEVER
    # the leader recorded this fetch offset as the follower's position (not diverged, no error):
    # it may count the follower as caught up while it stays idle at the log end
    accepted: bool = False


@dataclass
class FetchSession:
    id: int
    replica_id: int
    broker_epoch: int
    created_ms: int
    last_used_ms: int
    next_epoch: int = 1
    partitions: dict[TopicPartition, SessionPartition] = field(default_factory=dict)
    dirty: set[TopicPartition] = field(default_factory=set)
    recheck: set[TopicPartition] = field(default_factory=set)
    # marked changed since a parked fetch last checked its partitions (to_check_again)
    unchecked: set[TopicPartition] = field(default_factory=set)

    @property
    def key(self) -> tuple[str, int]:
        return session_key(self.id)


def session_key(session_id: int) -> tuple[str, int]:
    """The fetch purgatory key a session's parked fetch is watched under."""
    return ("fetch-session", session_id)


def next_epoch(epoch: int) -> int:
    """KIP-227: epochs run 1, 2, ... INT32_MAX, then wrap to 1 (0 and -1 are reserved)."""
    return 1 if epoch >= 0x7FFFFFFF else epoch + 1


def _monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


def _record_sent_locked(
    sp: SessionPartition, high_watermark: int, log_start_offset: int, error: bool
) -> bool:
    """Whether an answer must name the partition (its HW or log start moved since the last
    answer that named it, or an error); notes the values as sent when it must (under the
    session cache's lock)."""
    if error:
        sp.sent_high_watermark = sp.sent_log_start_offset = NEVER
        return True
    if sp.sent_high_watermark == high_watermark and sp.sent_log_start_offset == log_start_offset:
        return False
    sp.sent_high_watermark = high_watermark
    sp.sent_log_start_offset = log_start_offset
    return True


class FetchSessionCache:
    def __init__(
        self,
        max_sessions: int = 1000,
        idle_ms: int = 120_000,
        clock_ms: Callable[[], int] = _monotonic_ms,
        rng: random.Random | None = None,
    ) -> None:
        assert max_sessions >= 0 and idle_ms > 0
        self.max_sessions = max_sessions
        self.idle_ms = idle_ms
        self._clock = clock_ms
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()  # LRU first
        self._holders: dict[TopicPartition, set[int]] = {}  # tp -> ids of sessions holding it
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._sessions)

    # -- lifecycle -----------------------------------------------------------------------------

    def create(self, replica_id: int, broker_epoch: int) -> FetchSession | None:
        """A new empty session for `replica_id` (None when max_sessions is 0). Drops idle
        sessions, then the least recently used one when full."""
        assert replica_id >= 0, "fetch sessions are for followers only"
        with self._lock:
            now = self._clock()
            self._expire_locked(now)
            if self.max_sessions == 0:
                return None
            while len(self._sessions) >= self.max_sessions:
                _id, old = next(iter(self._sessions.items()))
                self._remove_locked(old)
                self.evictions += 1
            sid = self._rng.randint(1, 0x7FFFFFFF)
            while sid in self._sessions:
                sid = self._rng.randint(1, 0x7FFFFFFF)
            s = FetchSession(sid, replica_id, broker_epoch, now, now)
            self._sessions[sid] = s
            return s

    def claim(self, session_id: int, replica_id: int, epoch: int) -> FetchSession | int:
        """An incremental fetch's session, its epoch checked and advanced; else the error code
        (FETCH_SESSION_ID_NOT_FOUND 70, INVALID_FETCH_SESSION_EPOCH 71)."""
        s = self.get(session_id)
        if s is None or s.replica_id != replica_id:
            return int(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        with self._lock:
            if s.next_epoch != epoch:
                return int(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
            s.next_epoch = next_epoch(epoch)
            return s

    def get(self, session_id: int) -> FetchSession | None:
        """The session (marked most recently used), or None when unknown or idle too long."""
        with self._lock:
            s = self._sessions.get(session_id)
            if s is None:
                return None
            now = self._clock()
            if now - s.last_used_ms > self.idle_ms:
                self._remove_locked(s)
                return None
            s.last_used_ms = now
            self._sessions.move_to_end(session_id)
            return s

    def remove(self, session_id: int, replica_id: int | None = None) -> bool:
        """Close a session (only when it belongs to `replica_id`, if given)."""
        with self._lock:
            s = self._sessions.get(session_id)
            if s is None or (replica_id is not None and s.replica_id != replica_id):
                return False
            self._remove_locked(s)
            return True

    def drop_replica(self, replica_id: int, only_broker_epoch: int | None = None) -> int:
        """Close the sessions of `replica_id` (only those opened under `only_broker_epoch`, if
        given): its broker restarted or left. Returns how many."""
        with self._lock:
            gone = [
                s
                for s in self._sessions.values()
                if s.replica_id == replica_id
                and (only_broker_epoch is None or s.broker_epoch == only_broker_epoch)
            ]
            for s in gone:
                self._remove_locked(s)
            return len(gone)

    def replicas(self) -> dict[int, set[int]]:
        """replica id -> the broker epochs its sessions were opened under."""
        with self._lock:
            out: dict[int, set[int]] = {}
            for s in self._sessions.values():
                out.setdefault(s.replica_id, set()).add(s.broker_epoch)
            return out

    def expire(self) -> int:
        with self._lock:
            return self._expire_locked(self._clock())

    def _expire_locked(self, now: int) -> int:
        dropped = 0
        while self._sessions:  # LRU first: stop at the first one still in use
            s = next(iter(self._sessions.values()))
            if now - s.last_used_ms <= self.idle_ms:
                break
            self._remove_locked(s)
            dropped += 1
        return dropped

    def _remove_locked(self, s: FetchSession) -> None:
        self._sessions.pop(s.id, None)
        for tp in s.partitions:
            self._unhold(tp, s.id)
        s.partitions = {}
        s.dirty.clear()
        s.recheck.clear()
        s.unchecked.clear()

    def _unhold(self, tp: TopicPartition, sid: int) -> None:
        ids = self._holders.get(tp)
        if ids is not None:
            ids.discard(sid)
            if not ids:
                del self._holders[tp]

    # -- one fetch -----------------------------------------------------------------------------

    def update(
        self,
        s: FetchSession,
        changed: dict[TopicPartition, FetchPartitionSpec],
        forgotten: Iterable[TopicPartition],
    ) -> None:
        """Apply a request's partitions (added or changed) and forgotten ones."""
        with self._lock:
            for tp in forgotten:
                if s.partitions.pop(tp, None) is not None:
                    self._unhold(tp, s.id)
                s.dirty.discard(tp)
                s.recheck.discard(tp)
                s.unchecked.discard(tp)
            for tp, state in changed.items():
                sp = s.partitions.get(tp)
                if sp is None:
                    s.partitions[tp] = SessionPartition(state)
                    if s.id in self._sessions:
                        self._holders.setdefault(tp, set()).add(s.id)
                elif sp.state != state:
                    sp.state = state
                    sp.accepted = False

    def to_evaluate(
        self, s: FetchSession, named: Iterable[TopicPartition], take_dirty: bool
    ) -> list[tuple[TopicPartition, FetchPartitionSpec]]:
        """The partitions a fetch looks at: those its request named, the dirty and the
        recheck ones, with the fetch state the session holds. `take_dirty` clears the dirty
        set (the answer is being built; marks arriving meanwhile stay for the next fetch)."""
        with self._lock:
            tps = dict.fromkeys(named)
            tps.update(dict.fromkeys(s.dirty))
            tps.update(dict.fromkeys(s.recheck))
            if take_dirty:
                s.dirty.clear()
            return self._states(s, tps)

    def to_check(
        self, s: FetchSession, named: Iterable[TopicPartition]
    ) -> list[tuple[TopicPartition, FetchPartitionSpec]]:
        """`to_evaluate` without taking the dirty set, for a fetch's arrival and the checks
        whether it can be answered: the dirty and recheck ones first (a check stops at the
        first partition with records), and the *unchecked* set starts empty again."""
        with self._lock:
            tps = dict.fromkeys(s.dirty)
            tps.update(dict.fromkeys(s.recheck))
            tps.update(dict.fromkeys(named))
            s.unchecked.clear()
            return self._states(s, tps)

    def to_check_again(self, s: FetchSession) -> list[tuple[TopicPartition, FetchPartitionSpec]]:
        """The partitions marked changed since the last `to_check` or `to_check_again` (the
        *unchecked* set, which this empties): what a parked fetch whose every partition was
        checked at its arrival needs to look at again (a partition's records, leadership, log
        start and end are changes the replica manager marks). The recheck ones are not in it
        unless marked: they are looked at by every fetch's arrival and answer, and whether
        they have records to send changes only with a mark like any other's."""
        with self._lock:
            tps = list(s.unchecked)
            s.unchecked.clear()
            return self._states(s, tps)

    @staticmethod
    def _states(
        s: FetchSession, tps: Iterable[TopicPartition]
    ) -> list[tuple[TopicPartition, FetchPartitionSpec]]:
        get = s.partitions.get
        out = []
        for tp in tps:
            sp = get(tp)
            if sp is not None:
                out.append((tp, sp.state))
        return out

    def checked(self, s: FetchSession, tps: Iterable[TopicPartition]) -> None:
        """`tps` are about to be checked (a fetch's arrival, after its positions were recorded):
        marks made up to now need no second look by `to_check_again` (those made from now on
        stay)."""
        with self._lock:
            if s.unchecked:
                s.unchecked.difference_update(tps)

    def record_answers(
        self, s: FetchSession, rows: list[tuple[TopicPartition, int, int, bool, bool]]
    ) -> list[bool]:
        """For each (tp, high watermark, log start offset, error, recheck) of one answer, under
        one lock: whether the answer names `tp` (`_record_sent_locked`), and whether `tp` is
        evaluated again at every fetch (`recheck`: a follower outside the ISR, or records sent
        that it may fail to append; it then names the partition again only after a
        back-off)."""
        out = []
        with self._lock:
            get = s.partitions.get
            recheck_set = s.recheck
            for tp, high_watermark, log_start_offset, error, recheck in rows:
                sp = get(tp)
                if sp is None:
                    out.append(error)
                    recheck_set.discard(tp)
                    continue
                out.append(_record_sent_locked(sp, high_watermark, log_start_offset, error))
                if recheck:
                    recheck_set.add(tp)
                else:
                    recheck_set.discard(tp)
        return out

    def note_accepted_many(
        self, s: FetchSession, tps: list[TopicPartition], accepted: list[bool]
    ) -> None:
        """Whether the leader recorded each of `tps`' fetch offsets as the follower's position
        (one fetch's partitions, under one lock)."""
        with self._lock:
            get = s.partitions.get
            for tp, ok in zip(tps, accepted, strict=True):
                sp = get(tp)
                if sp is not None:
                    sp.accepted = ok

    # -- changes -------------------------------------------------------------------------------

    def mark_changed(self, tps: Iterable[TopicPartition]) -> list[tuple[str, int]]:
        """Partitions that got records, moved their HW, or changed leadership: every session
        holding one notes it dirty. Returns the purgatory keys of those sessions (to wake
        their parked fetch)."""
        keys: dict[tuple[str, int], None] = {}
        with self._lock:
            if not self._holders:
                return []
            sessions, holders = self._sessions, self._holders
            for tp in tps:
                ids = holders.get(tp)
                if not ids:
                    continue
                for sid in ids:
                    s = sessions.get(sid)
                    if s is not None:
                        s.dirty.add(tp)
                        s.unchecked.add(tp)
                        keys[session_key(sid)] = None
        return list(keys)

    def idle_positions(self) -> list[tuple[int, int, TopicPartition, FetchPartitionSpec]]:
        """(replica id, ms since the session's last fetch, tp, state) of every accepted
        session partition: the follower fetched from there at its last fetch (for ISR lag,
        since an idle follower no longer names its partitions)."""
        with self._lock:
            now = self._clock()
            return [
                (s.replica_id, max(0, now - s.last_used_ms), tp, sp.state)
                for s in self._sessions.values()
                for tp, sp in s.partitions.items()
                if sp.accepted
            ]
