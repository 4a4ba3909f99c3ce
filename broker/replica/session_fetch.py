"""Follower fetches through incremental fetch sessions (KIP-227): an object the ReplicaManager
holds (`rm.session_fetches`), owning the sessions cache and the followers' broker epochs, over
the shared PartitionTable and the manager's fetch path (`FetchPath`: reads, min-bytes checks,
a follower position's arrival).

    rm.session_fetches.fetch_with_session(params, session_id, session_epoch, specs, forgotten, callback)
        -> SessionFetchResult | None   (None: parked; `callback(SessionFetchResult)` later)

session_epoch 0 opens a session holding every partition of the (full) request and answers
every one of them; epoch k > 0 updates the session with the request's partitions and
`forgotten`, and answers only the partitions with records, a changed high watermark or log
start offset, an error or a divergence (broker/replica/fetch_session.py says what the leader
looks at). The long poll (DelayedSessionFetch) waits on the session's purgatory key, which
the replica manager wakes for any change of a partition the session holds: the request may
name none of them.

ISR bookkeeping without the per-fetch partition list: a follower's position is recorded for
the partitions the fetch evaluates (named, dirty, recheck); an idle follower at the log end
is counted caught up as of its session's last fetch when the ISR shrink check runs
(`refresh_caught_up_from_sessions`), and a follower outside the ISR stays on the recheck list
so every fetch retries its expansion, as a full fetch did.

Threads: as ReplicaManager (any thread); answers are built on the request's I/O thread or on
whichever thread completes the parked fetch (exactly once, by the purgatory).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from broker.purgatory import Purgatory
from broker.replica.delayed import DelayedSessionFetch
from broker.replica.fetch_session import FetchSession, FetchSessionCache
from broker.replica.partition import _now_ms
from broker.replica.partition_table import PartitionTable
from broker.replica.specs import FetchParams, FetchPartitionSpec

_log = logging.getLogger("broker.replica.manager")

TopicPartition = tuple[str, int]


@dataclass
class SessionFetchResult:
    error_code: int = 0
    session_id: int = 0
    results: list[dict[str, Any]] = field(default_factory=list)


class FetchPath(Protocol):
    """The ReplicaManager's fetch path, which a session fetch runs on."""

    def followers_fetched(
        self, params: FetchParams, specs: list[FetchPartitionSpec]
    ) -> list[bool]: ...

    def fetch_satisfied(
        self, params: FetchParams, partitions: Iterable[FetchPartitionSpec]
    ) -> bool: ...

    def read_partitions(
        self, params: FetchParams, partitions: list[FetchPartitionSpec]
    ) -> list[dict[str, Any]]: ...

    def fetch_records(
        self,
        params: FetchParams,
        partitions: list[FetchPartitionSpec],
        callback: Callable[[list[dict[str, Any]]], None],
    ) -> list[dict[str, Any]] | None: ...


class SessionFetches:
    def __init__(
        self,
        table: PartitionTable,
        fetch_path: FetchPath,
        fetch_purgatory: Purgatory,
        max_sessions: int,
        session_idle_ms: int,
    ) -> None:
        self.table = table
        self._fetch_path = fetch_path
        self.fetch_purgatory = fetch_purgatory
        self.cache = FetchSessionCache(max_sessions, session_idle_ms)
        # the broker epochs of the last metadata image (a session dies with its follower's)
        self._broker_epochs: dict[int, int] = {}

    # -- the fetch -------------------------------------------------------------------------------

    def fetch_with_session(
        self,
        params: FetchParams,
        session_id: int,
        session_epoch: int,
        specs: list[FetchPartitionSpec],
        forgotten: list[TopicPartition],
        callback: Callable[[SessionFetchResult], None],
    ) -> SessionFetchResult | None:
        """A follower fetch with session_epoch >= 0 (see the module docstring)."""
        assert params.is_follower and session_epoch >= 0
        cache = self.cache
        full = session_epoch == 0
        if full:
            if session_id:
                cache.remove(session_id, params.replica_id)
            s = cache.create(params.replica_id, self._broker_epochs.get(params.replica_id, -1))
            if s is None:  # no session slots: a plain full fetch
                return self._sessionless(params, specs, callback)
        else:
            claimed = cache.claim(session_id, params.replica_id, session_epoch)
            if isinstance(claimed, int):
                return SessionFetchResult(error_code=claimed, session_id=session_id)
            s = claimed
        cache.update(s, {(sp.topic, sp.partition): sp for sp in specs}, forgotten)
        named = [(sp.topic, sp.partition) for sp in specs]
        # every partition the fetch looks at is checked once here; the parked fetch's checks
        # then look only at what changed since (session_fetch_satisfied)
        items = cache.to_check(s, named)
        evaluated = [st for _tp, st in items]
        accepted = self._fetch_path.followers_fetched(params, evaluated)
        tps = [tp for tp, _st in items]
        cache.note_accepted_many(s, tps, accepted)
        # (the positions just recorded marked what they moved: fetch_satisfied below looks at
        # all of it, and the parked fetch's first check need not again)
        cache.checked(s, tps)
        if params.max_wait_ms <= 0 or (
            evaluated and self._fetch_path.fetch_satisfied(params, evaluated)
        ):
            return self.session_answer(params, s, named, full)
        op = DelayedSessionFetch(params.max_wait_ms, params, s, named, full, self, callback)
        self.fetch_purgatory.try_complete_else_watch(op, [s.key])
        return None

    def _sessionless(
        self,
        params: FetchParams,
        specs: list[FetchPartitionSpec],
        callback: Callable[[SessionFetchResult], None],
    ) -> SessionFetchResult | None:
        results = self._fetch_path.fetch_records(
            params, specs, lambda r: callback(SessionFetchResult(0, 0, r))
        )
        return None if results is None else SessionFetchResult(0, 0, results)

    def session_fetch_satisfied(
        self, params: FetchParams, s: FetchSession, named: list[TopicPartition]
    ) -> bool:
        """DelayedSessionFetch's condition. With min_bytes 1 (a follower's default) any one
        partition decides it, and every partition was checked when the fetch arrived: only
        those marked changed since the last check are looked at again
        (a fetch parked over a thousand partitions was checked over all of them at every
        append and flush of any). With min_bytes above 1 the bytes add up over every
        partition the fetch looks at, all checked each time."""
        if params.min_bytes <= 1:
            items = self.cache.to_check_again(s)
        else:
            items = self.cache.to_check(s, named)
        return bool(items) and self._fetch_path.fetch_satisfied(params, (st for _tp, st in items))

    def session_answer(
        self, params: FetchParams, s: FetchSession, named: list[TopicPartition], full: bool
    ) -> SessionFetchResult:
        """Read and answer: every partition for a full fetch; else only those that changed."""
        cache = self.cache
        items = cache.to_evaluate(s, named, take_dirty=True)
        results = self._fetch_path.read_partitions(params, [st for _tp, st in items])
        get = self.table.get
        replica_id = params.replica_id
        rows = []
        for (tp, st), entry in zip(items, results, strict=True):
            error = (
                entry["error_code"] != 0
                or entry.get("diverging_end_offset", -1) >= 0
                or entry.get("diverging_epoch", -1) >= 0
            )
            part = get(tp)
            # evaluated again at the next fetch: records sent (or left out by the size
            # limits) that the follower may not take, or a follower still outside the ISR
            recheck = (
                not error
                and part is not None
                and (
                    bool(entry["records"])
                    or part.log.end_offset > st.fetch_offset
                    or replica_id not in part.isr
                )
            )
            rows.append((tp, entry["high_watermark"], entry["log_start_offset"], error, recheck))
        moved = cache.record_answers(s, rows)
        out = [
            entry for entry, m in zip(results, moved, strict=True) if full or m or entry["records"]
        ]
        return SessionFetchResult(0, s.id, out)

    # -- upkeep ----------------------------------------------------------------------------------

    def mark_changed(self, tps: list[TopicPartition]) -> list[Any]:
        """Partitions that got records, moved their HW or changed leadership: noted in the
        sessions holding them. Returns the purgatory keys of those sessions' parked fetches."""
        return self.cache.mark_changed(tps)

    def close(self, session_id: int, replica_id: int) -> None:
        """The follower closes its session (a fetch with session epoch -1)."""
        self.cache.remove(session_id, replica_id)

    def expire(self) -> None:
        """Drop the sessions idle past fetch_session_idle_ms."""
        self.cache.expire()

    def refresh_caught_up_from_sessions(self) -> int:
        """Before an ISR shrink check: a follower whose session holds a partition at the
        leader's log end (a position the leader accepted) was caught up at its last fetch,
        though an idle follower no longer names the partition. Returns partitions noted."""
        now = _now_ms()
        noted = 0
        for replica_id, age_ms, tp, st in self.cache.idle_positions():
            part = self.table.get(tp)
            if part is None or not part.is_leader or st.current_leader_epoch != part.leader_epoch:
                continue
            if part.note_caught_up(replica_id, st.fetch_offset, now - age_ms):
                noted += 1
        return noted

    def prune_fetch_sessions(self, image: Any) -> int:
        """Close the sessions of followers whose broker left the metadata or registered again
        (a new broker epoch: it restarted). From the metadata publisher."""
        brokers = getattr(image, "brokers", None)
        if brokers is None:
            return 0
        self._broker_epochs = {int(b): int(reg.broker_epoch) for b, reg in brokers.items()}
        dropped = 0
        for replica_id, epochs in self.cache.replicas().items():
            now_epoch = self._broker_epochs.get(replica_id)
            if now_epoch is None:
                dropped += self.cache.drop_replica(replica_id)
                continue
            for e in epochs - {-1, now_epoch}:
                dropped += self.cache.drop_replica(replica_id, only_broker_epoch=e)
        if dropped:
            _log.info("closed %d fetch sessions of restarted or departed brokers", dropped)
        return dropped
