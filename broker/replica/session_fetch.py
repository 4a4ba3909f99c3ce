"""Follower fetches through incremental fetch sessions (KIP-227), a ReplicaManager mixin.

    rm.fetch_with_session(params, session_id, session_epoch, specs, forgotten, callback)
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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from broker.purgatory import Purgatory
from broker.replica.delayed import DelayedSessionFetch, fetch_key
from broker.replica.fetch_session import (
    FetchSession,
    FetchSessionCache,
    PartitionFetchState,
)
from broker.replica.partition import Partition, _now_ms
from broker.replica.specs import FetchParams, FetchPartitionSpec

_log = logging.getLogger("broker.replica.manager")

TopicPartition = tuple[str, int]


@dataclass
class SessionFetchResult:
    error_code: int = 0
    session_id: int = 0
    results: list[dict[str, Any]] = field(default_factory=list)


def _state(spec: FetchPartitionSpec) -> PartitionFetchState:
    return PartitionFetchState(
        spec.fetch_offset,
        spec.partition_max_bytes,
        spec.current_leader_epoch,
        spec.last_fetched_epoch,
        spec.log_start_offset,
    )


def _spec(tp: TopicPartition, st: PartitionFetchState) -> FetchPartitionSpec:
    return FetchPartitionSpec(tp[0], tp[1], *st)


class SessionFetches:
    # the ReplicaManager's state this mixin works on (set by its __init__)
    fetch_sessions: FetchSessionCache
    fetch_purgatory: Purgatory
    _partitions: dict[TopicPartition, Partition]
    _broker_epochs: dict[int, int]

    def _follower_fetched(self, params: FetchParams, spec: FetchPartitionSpec) -> bool:
        raise NotImplementedError

    def fetch_satisfied(self, params: FetchParams, partitions: list[FetchPartitionSpec]) -> bool:
        raise NotImplementedError

    def read_partitions(
        self, params: FetchParams, partitions: list[FetchPartitionSpec]
    ) -> list[dict[str, Any]]:
        raise NotImplementedError

    def fetch_records(
        self,
        params: FetchParams,
        partitions: list[FetchPartitionSpec],
        callback: Callable[[list[dict[str, Any]]], None],
    ) -> list[dict[str, Any]] | None:
        raise NotImplementedError

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
        cache = self.fetch_sessions
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
        cache.update(s, {(sp.topic, sp.partition): _state(sp) for sp in specs}, forgotten)
        named = [(sp.topic, sp.partition) for sp in specs]
        items = cache.to_evaluate(s, named, take_dirty=False)
        evaluated = [_spec(tp, st) for tp, st in items]
        for (tp, _st), spec in zip(items, evaluated, strict=True):
            cache.note_accepted(s, tp, self._follower_fetched(params, spec))
        if params.max_wait_ms <= 0 or (evaluated and self.fetch_satisfied(params, evaluated)):
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
        results = self.fetch_records(params, specs, lambda r: callback(SessionFetchResult(0, 0, r)))
        return None if results is None else SessionFetchResult(0, 0, results)

    def session_fetch_satisfied(
        self, params: FetchParams, s: FetchSession, named: list[TopicPartition]
    ) -> bool:
        """DelayedSessionFetch's condition, over the partitions the fetch looks at."""
        items = self.fetch_sessions.to_evaluate(s, named, take_dirty=False)
        return bool(items) and self.fetch_satisfied(params, [_spec(tp, st) for tp, st in items])

    def session_answer(
        self, params: FetchParams, s: FetchSession, named: list[TopicPartition], full: bool
    ) -> SessionFetchResult:
        """Read and answer: every partition for a full fetch; else only those that changed."""
        cache = self.fetch_sessions
        items = cache.to_evaluate(s, named, take_dirty=True)
        results = self.read_partitions(params, [_spec(tp, st) for tp, st in items])
        out = []
        for (tp, st), entry in zip(items, results, strict=True):
            error = (
                int(entry["error_code"]) != 0
                or int(entry.get("diverging_end_offset", -1)) >= 0
                or int(entry.get("diverging_epoch", -1)) >= 0
            )
            moved = cache.record_sent(
                s, tp, int(entry["high_watermark"]), int(entry["log_start_offset"]), error
            )
            part = self._partitions.get(tp)
            # evaluated again at the next fetch: records sent (or left out by the size
            # limits) that the follower may not take, or a follower still outside the ISR
            recheck = (
                not error
                and part is not None
                and (
                    bool(entry["records"])
                    or part.log.end_offset > st.fetch_offset
                    or params.replica_id not in part.isr
                )
            )
            cache.note_recheck(s, tp, recheck)
            if full or moved or entry["records"]:
                out.append(entry)
        return SessionFetchResult(0, s.id, out)

    # -- upkeep ----------------------------------------------------------------------------------

    def _wake_fetches(self, tps: list[TopicPartition]) -> None:
        """Partitions that got records, moved their HW or changed leadership: retry the
        fetches parked on them, by partition (consumers, sessionless followers) and by
        session (a session's fetch may name none of its partitions)."""
        keys: list[Any] = [fetch_key(*tp) for tp in tps]
        keys.extend(self.fetch_sessions.mark_changed(tps))
        self.fetch_purgatory.check_and_complete_many(keys)

    def refresh_caught_up_from_sessions(self) -> int:
        """Before an ISR shrink check: a follower whose session holds a partition at the
        leader's log end (a position the leader accepted) was caught up at its last fetch,
        though an idle follower no longer names the partition. Returns partitions noted."""
        now = _now_ms()
        noted = 0
        for replica_id, age_ms, tp, st in self.fetch_sessions.idle_positions():
            part = self._partitions.get(tp)
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
        for replica_id, epochs in self.fetch_sessions.replicas().items():
            now_epoch = self._broker_epochs.get(replica_id)
            if now_epoch is None:
                dropped += self.fetch_sessions.drop_replica(replica_id)
                continue
            for e in epochs - {-1, now_epoch}:
                dropped += self.fetch_sessions.drop_replica(replica_id, only_broker_epoch=e)
        if dropped:
            _log.info("closed %d fetch sessions of restarted or departed brokers", dropped)
        return dropped
