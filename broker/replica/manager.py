"""ReplicaManager: the only place that touches both the logs and the purgatories.

    rm = ReplicaManager(node_id, log_manager, produce_purgatory, fetch_purgatory, settings)
    rm.apply_metadata(image, delta)                 # from the metadata publisher
    rm.append_records(acks, timeout_ms, {(t, p): batches}, callback) -> dict | None
    rm.fetch_records(params, [FetchPartitionSpec], callback)      -> list | None
    rm.offsets.list_offsets(replica_id, [(t, p, timestamp, epoch)])        -> list[dict]
    rm.offsets.offsets_for_leader_epoch([(t, p, current_epoch, epoch)])    -> list[dict]
    rm.session_fetches.fetch_with_session(params, id, epoch, specs, forgotten, cb)
    rm.records_deletion.delete_records(timeout_ms, {(t, p): offset}, callback) -> dict | None
    rm.on_flushed(topic, partition, flushed_offset)                 # the flushers' callback

append/fetch return the answer at once, or None after parking a DelayedProduce/DelayedFetch
that calls `callback` exactly once later (any thread). Durability (docs/architecture.md §6): with
log.flush.on.ack=true an acks=1/all write is acknowledged only once the group-commit fsync
covers it, and the high watermark never passes the leader's flushed offset (Partition).

The manager keeps the produce and fetch paths, the ISR checks on them and the wake-ups of
parked requests. Its parts are objects it holds, each owning its state, all sharing one
PartitionTable (partition_table.py: the partitions served, and those that failed to apply):
  - `applier` (apply.py): applying metadata (become leader/follower, stop, delete, failed
    replicas, stray logs);
  - `offsets` (offsets.py): the ListOffsets/OffsetForLeaderEpoch answers;
  - `session_fetches` (session_fetch.py): follower fetches in incremental fetch sessions
    (KIP-227), their cache and pruning;
  - `records_deletion` (records_deletion.py): DeleteRecords.

Threads: every public method is thread-safe (I/O workers, flusher threads, the publisher).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from broker.log import Log, LogManager
from broker.purgatory import Purgatory
from broker.replica.apply import MetadataApplier
from broker.replica.delayed import (
    DelayedFetch,
    DelayedProduce,
    ProducePartitionStatus,
    fetch_key,
    produce_key,
)
from broker.replica.offsets import OffsetQueries
from broker.replica.partition import Partition, _now_ms
from broker.replica.partition_table import PartitionTable
from broker.replica.records_deletion import RecordsDeletion
from broker.replica.session_fetch import SessionFetches
from broker.replica.specs import FetchParams, FetchPartitionSpec, ReplicaError, diverging
from client.config.loader import Config
from client.errors import BrokerResponseError, ErrorCode, OffsetOutOfRangeError, StorageError

_log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class ReplicaSettings:
    flush_on_ack: bool = True
    min_insync_replicas: int = 1
    fetch_max_bytes: int = 50 * 1024 * 1024
    max_produce_timeout_ms: int = 300_000  # bound on how long a produce may stay parked
    max_fetch_sessions: int = 1000  # 0: followers fetch without sessions
    fetch_session_idle_ms: int = 120_000

    @classmethod
    def from_config(cls, config: Config) -> ReplicaSettings:
        return cls(
            flush_on_ack=bool(config.log_flush_on_ack),
            min_insync_replicas=int(config.min_insync_replicas),
            fetch_max_bytes=int(config.fetch_max_bytes),
            max_fetch_sessions=int(config.max_incremental_fetch_session_cache_slots),
            fetch_session_idle_ms=int(config.replica_fetch_session_idle_ms),
        )


class ReplicaManager:
    def __init__(
        self,
        node_id: int,
        log_manager: LogManager,
        produce_purgatory: Purgatory,
        fetch_purgatory: Purgatory,
        settings: ReplicaSettings | None = None,
        min_insync_for: Callable[[str], int] | None = None,
    ) -> None:
        self.log_manager = log_manager
        self.produce_purgatory = produce_purgatory
        self.fetch_purgatory = fetch_purgatory
        self.settings = settings or ReplicaSettings()
        self._min_insync_for = min_insync_for or (lambda topic: self.settings.min_insync_replicas)
        self.table = PartitionTable(node_id)
        self._offline_seen: set[TopicPartition] = set()
        # metrics (broker/topic_metrics.py TopicMetrics), set once before serving: (topic,
        # partition, bytes, records) appended as leader / returned by a fetch (records: the
        # offsets the batches span); None: not counted
        self.on_appended: Callable[[str, int, int, int], None] | None = None
        self.on_fetched: Callable[[str, int, int, int], None] | None = None
        # set by the node: sends a leader's ISR proposal to the controller (AlterPartition)
        self.isr_proposer: Callable[[Partition, tuple[int, ...]], None] | None = None
        self.applier = MetadataApplier(self.table, log_manager, self.settings, self._wake_many)
        self.offsets = OffsetQueries(self.table)
        self.session_fetches = SessionFetches(
            self.table,
            self,
            fetch_purgatory,
            self.settings.max_fetch_sessions,
            self.settings.fetch_session_idle_ms,
        )
        self.records_deletion = RecordsDeletion(
            self.table.get,
            self.table.leader,
            self.produce_purgatory,
            self.settings,
            self._wake_fetches,
        )

    @property
    def node_id(self) -> int:
        return self.table.node_id

    def apply_metadata(self, image: Any, delta: Any) -> None:
        """The applier's, then fetch sessions of restarted or departed followers close
        (the metadata publisher's thread)."""
        self.applier.apply_metadata(image, delta)
        self.session_fetches.prune_fetch_sessions(image)

    # -- partition state -------------------------------------------------------------------------

    def get_partition(self, topic: str, partition: int) -> Partition | None:
        return self.table.get((topic, partition))

    def partitions(self) -> dict[TopicPartition, Partition]:
        return self.table.partitions()

    def high_watermarks(self) -> dict[TopicPartition, int]:
        return self.table.high_watermarks()

    def _wake(self, tp: TopicPartition) -> None:
        self._wake_many([tp])

    def _wake_many(self, tps: list[TopicPartition]) -> None:
        """Retry the produces (and DeleteRecords) and fetches parked on `tps`, each once."""
        self.produce_purgatory.check_and_complete_many([produce_key(*tp) for tp in tps])
        self._wake_fetches(tps)

    def _wake_fetches(self, tps: list[TopicPartition]) -> None:
        """Partitions that got records, moved their HW or changed leadership: retry the
        fetches parked on them, by partition (consumers, sessionless followers) and by
        session (a session's fetch may name none of its partitions)."""
        keys: list[Any] = [fetch_key(*tp) for tp in tps]
        keys.extend(self.session_fetches.mark_changed(tps))
        self.fetch_purgatory.check_and_complete_many(keys)

    def high_watermark_moved(self, tp: TopicPartition) -> None:
        """`tp`'s high watermark moved outside an append, a flush or a metadata application
        (a follower's fetch, a refused ISR expansion): complete the acks=all produces waiting
        on it, answer the consumers' fetches long-polling on it (they read up to the HW: without
        this a consumer saw the record only at its next fetch.max.wait.ms), and note it in the
        followers' sessions (they learn the HW with their next answer). Any thread."""
        self.high_watermarks_moved([tp])

    def high_watermarks_moved(self, tps: list[TopicPartition]) -> None:
        """`high_watermark_moved` for many partitions at once: each waiting produce and fetch
        is retried once."""
        self.produce_purgatory.check_and_complete_many([produce_key(*tp) for tp in tps])
        self.session_fetches.mark_changed(tps)
        self.fetch_purgatory.check_and_complete_many([fetch_key(*tp) for tp in tps])

    def on_flushed(self, topic: str, partition: int, flushed_offset: int) -> None:
        """Flusher callback (flusher thread): the HW may move; retry waiting produces/fetches."""
        self.on_flushed_many([(topic, partition, flushed_offset)])

    def on_flushed_many(self, reports: list[tuple[str, int, int]]) -> None:
        """`on_flushed` for every log of one flush round: each high watermark moves first,
        then each waiting produce is retried once (a produce over 1,000 partitions was retried
        1,000 times, once per partition's report), and the fetches parked on the partitions
        whose high watermark moved (what a fetch may read or report changes with the HW, not
        with the flushed offset: a follower reads up to the log end, a consumer up to the HW;
        the fetch sessions of the other partitions were woken by their appends)."""
        flushed = []
        moved = []
        get = self.table.get
        for topic, partition, _offset in reports:
            part = get((topic, partition))
            if part is not None:
                tp = (topic, partition)
                flushed.append(tp)
                if part.maybe_advance_high_watermark():
                    moved.append(tp)
        if flushed:
            self.produce_purgatory.check_and_complete_many([produce_key(*tp) for tp in flushed])
        if moved:
            self._wake_fetches(moved)

    # -- produce --------------------------------------------------------------------------------

    def append_records(
        self,
        acks: int,
        timeout_ms: int,
        entries: dict[TopicPartition, bytes],
        callback: Callable[[dict[TopicPartition, ProducePartitionStatus]], None],
        *,
        control: bool = False,
        coordinator: bool = False,
    ) -> dict[TopicPartition, ProducePartitionStatus] | None:
        """Append each partition's batches as leader (a bad partition fails alone). Returns the
        statuses when final; else parks a DelayedProduce that calls `callback` later.
        `control`: each entry is a transaction marker (WriteTxnMarkers), not a client's batch.
        `coordinator`: transactional batches of the group coordinator (TxnOffsetCommit), whose
        producer epoch is checked but which carry no sequence numbers."""
        if acks not in (-1, 0, 1):
            return {
                tp: ProducePartitionStatus(
                    int(ErrorCode.INVALID_REQUIRED_ACKS), error_message=f"acks={acks}"
                )
                for tp in entries
            }
        statuses: dict[TopicPartition, ProducePartitionStatus] = {}
        to_flush: list[Log] = []
        for tp, records in entries.items():
            statuses[tp] = self._append_one(tp, records, acks, to_flush, control, coordinator)
        if to_flush:  # after every append: one group-commit round covers the whole request
            self.log_manager.request_flush_many(to_flush)
        waiting = [tp for tp, s in statuses.items() if s.required_offset >= 0]  # (appended)
        if waiting:  # followers and consumers long-polling for new bytes, once per request
            self._wake_fetches(waiting)
        if acks == 0 or not waiting:
            for s in statuses.values():
                s.required_offset = -1
            return statuses
        op = DelayedProduce(
            min(max(timeout_ms, 0), self.settings.max_produce_timeout_ms),
            acks,
            statuses,
            self,
            callback,
        )
        if self.produce_purgatory.try_complete_else_watch(op, [produce_key(*tp) for tp in waiting]):
            # completed during the call: on_complete already ran the callback
            return None
        return None

    def _append_one(
        self,
        tp: TopicPartition,
        records: bytes,
        acks: int,
        to_flush: list[Log],
        control: bool = False,
        coordinator: bool = False,
    ) -> ProducePartitionStatus:
        """Append as leader; a log to fsync goes to `to_flush` (the caller asks for it)."""
        try:
            part = self.table.leader(tp)
            if acks == -1:
                isr_size = len(part.isr)
                min_isr = self._min_insync_for(tp[0])
                if isr_size < min_isr:
                    raise ReplicaError(
                        ErrorCode.NOT_ENOUGH_REPLICAS,
                        f"isr {list(part.isr)} smaller than min.insync.replicas {min_isr}",
                    )
            info = part.log.append_as_leader(
                records, part.leader_epoch, control=control, coordinator=coordinator
            )
        except ReplicaError as e:
            return ProducePartitionStatus(int(e.code), error_message=e.message)
        except BrokerResponseError as exc:
            return ProducePartitionStatus(int(exc.code), error_message=str(exc))
        except StorageError as exc:
            return ProducePartitionStatus(
                int(ErrorCode.KAFKA_STORAGE_ERROR), error_message=str(exc)
            )
        required = info.last_offset + 1
        if self.on_appended is not None:
            self.on_appended(tp[0], tp[1], len(records), info.last_offset - info.first_offset + 1)
        if self.settings.flush_on_ack:
            to_flush.append(part.log)
        else:
            if part.maybe_advance_high_watermark():
                self._wake(tp)
        return ProducePartitionStatus(
            0,
            base_offset=info.first_offset,
            log_start_offset=info.log_start_offset,
            required_offset=required,
            leader_epoch=part.leader_epoch,
        )

    def check_produce_acked(
        self, tp: TopicPartition, status: ProducePartitionStatus, acks: int
    ) -> int | None:
        """DelayedProduce's condition for one partition: None = keep waiting, else the final code."""
        part = self.table.get(tp)
        if part is None:
            return int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        # the rule is the core's (PartitionState.produce_outcome); called straight, without
        # the partition's lock (it only reads): every waiting produce is asked at every wake
        log = part.log
        return part.state.produce_outcome(
            status.leader_epoch,
            status.required_offset,
            acks,
            log.flushed_offset if part.flush_on_ack else log.end_offset,
            log.offline,
            lambda: self._min_insync_for(tp[0]),
        )

    # -- fetch ----------------------------------------------------------------------------------

    def fetch_records(
        self,
        params: FetchParams,
        partitions: list[FetchPartitionSpec],
        callback: Callable[[list[dict[str, Any]]], None],
    ) -> list[dict[str, Any]] | None:
        """Read now when min_bytes is available (or max_wait_ms is 0, or a partition errs),
        else park a DelayedFetch (fetch.min.bytes / fetch.max.wait.ms long poll). A follower's
        fetch position is recorded on arrival, before any wait (as Kafka's readFromLog does): a
        follower long-polling at the leader's end has everything, and the HW moves now."""
        if params.is_follower:
            self.followers_fetched(params, partitions)
        if params.max_wait_ms <= 0 or not partitions or self.fetch_satisfied(params, partitions):
            return self.read_partitions(params, partitions)
        op = DelayedFetch(params.max_wait_ms, params, partitions, self, callback)
        self.fetch_purgatory.try_complete_else_watch(
            op, [fetch_key(s.topic, s.partition) for s in partitions]
        )
        return None

    def fetch_satisfied(
        self, params: FetchParams, partitions: Iterable[FetchPartitionSpec]
    ) -> bool:
        """DelayedFetch's condition: an error to report, or min_bytes readable (whatever the
        order of `partitions`: it stops at the first partition that decides it)."""
        available = 0
        # (per fetch, not per partition: a follower's fetch checks hundreds)
        is_follower = params.is_follower
        read_committed = params.read_committed
        min_bytes = params.min_bytes
        fetchable = self.table.fetchable
        for spec in partitions:
            try:
                part = fetchable(spec)
            except ReplicaError:
                return True
            log = part.log
            if diverging(part, spec) is not None:
                return True
            limit = None if is_follower else part.high_watermark
            if limit is not None and read_committed:
                limit = log.producers.last_stable_offset(limit)
            log_end = log.end_offset
            log_start = log.log_start_offset
            end = log_end if limit is None else limit
            offset = spec.fetch_offset
            if offset < log_start or offset > log_end:
                return True  # OFFSET_OUT_OF_RANGE is an answer
            if is_follower and 0 <= spec.log_start_offset < log_start:
                return True  # its log start is behind (DeleteRecords): the answer moves it
            if offset >= end:
                continue
            if min_bytes <= 1:
                return True
            try:
                res = log.read(spec.fetch_offset, spec.partition_max_bytes, limit)
            except (OffsetOutOfRangeError, StorageError):
                return True
            available += len(res.data)
            if available >= min_bytes:
                return True
        return False

    def read_partitions(
        self, params: FetchParams, partitions: list[FetchPartitionSpec]
    ) -> list[dict[str, Any]]:
        """Read every partition: per-partition and total max bytes (the response's first batch
        whole even when larger); consumers never see past the high watermark, read_committed
        ones past the last stable offset (and get the aborted transactions of the range)."""
        remaining = min(params.max_bytes, self.settings.fetch_max_bytes)
        got_any = False
        out: list[dict[str, Any]] = []
        # (per fetch, not per partition: a follower's fetch reads hundreds)
        is_follower = params.is_follower
        read_committed = params.read_committed
        fetchable = self.table.fetchable
        on_fetched = self.on_fetched
        for spec in partitions:
            entry: dict[str, Any] = {
                "topic": spec.topic,
                "partition": spec.partition,
                "error_code": 0,
                "high_watermark": -1,
                "last_stable_offset": -1,
                "log_start_offset": -1,
                "records": b"",
            }
            out.append(entry)
            try:
                part = fetchable(spec)
                log: Log = part.log
                hw = part.high_watermark
                entry["high_watermark"] = hw
                entry["last_stable_offset"] = hw
                entry["log_start_offset"] = log.log_start_offset
                # a follower truncates there; a consumer detects truncation (KIP-320)
                div = diverging(part, spec)
                if div is not None:  # the answer says where the logs diverge, no records
                    entry["diverging_epoch"], entry["diverging_end_offset"] = div
                    continue
                limit = None if is_follower else hw
                if read_committed:  # (read_uncommitted stays as it was: no lookup)
                    limit = entry["last_stable_offset"] = log.producers.last_stable_offset(hw)
                budget = spec.partition_max_bytes
                if remaining < budget:
                    budget = remaining
                if got_any and budget <= 0:
                    continue
                res = log.read(spec.fetch_offset, budget if budget > 1 else 1, limit)
                data = res.data
                if got_any and len(data) > budget:
                    continue  # only the response's first batch may exceed the limits
                if data:
                    got_any = True
                    remaining -= len(data)
                    entry["records"] = data
                    if read_committed:
                        entry["aborted_transactions"] = [
                            {"producer_id": a.producer_id, "first_offset": a.first_offset}
                            for a in log.producers.aborted_transactions(
                                spec.fetch_offset, res.next_offset
                            )
                        ]
                    if on_fetched is not None:
                        on_fetched(
                            spec.topic,
                            spec.partition,
                            len(data),
                            res.next_offset - res.first_offset,
                        )
                entry["log_start_offset"] = res.log_start_offset
            except ReplicaError as e:
                entry["error_code"] = int(e.code)
            except OffsetOutOfRangeError as exc:
                entry["error_code"] = int(ErrorCode.OFFSET_OUT_OF_RANGE)
                _log.debug("fetch %s-%d: %s", spec.topic, spec.partition, exc)
            except StorageError as exc:
                entry["error_code"] = int(ErrorCode.KAFKA_STORAGE_ERROR)
                _log.error("fetch %s-%d: %s", spec.topic, spec.partition, exc)
        return out

    def followers_fetched(self, params: FetchParams, specs: list[FetchPartitionSpec]) -> list[bool]:
        """Leader side of a follower fetch's arrival, per partition: unless it diverged (its
        answer will say where to truncate), its position is recorded (the HW may move and
        complete waiting acks=all produces) and it may be proposed back into the ISR. Returns
        whether each position was recorded. The high watermarks that moved are handled once
        for the whole fetch, after every position is recorded (`high_watermarks_moved`: a
        produce over many partitions is retried once, not once per partition)."""
        moved: list[TopicPartition] = []
        replica_id = params.replica_id
        proposer = self.isr_proposer
        fetchable = self.table.fetchable
        now = _now_ms()  # (one arrival time for the whole fetch)
        out = []
        for spec in specs:
            try:
                part = fetchable(spec)
            except ReplicaError:
                out.append(False)  # the read answers with the error
                continue
            if diverging(part, spec) is not None:
                out.append(False)
                continue
            hw_moved, start_up, new_isr = part.follower_fetched(
                replica_id, spec.fetch_offset, spec.log_start_offset, now, proposer is not None
            )
            if hw_moved:
                moved.append((spec.topic, spec.partition))
            if start_up:
                self.records_deletion.follower_log_start_moved((spec.topic, spec.partition))
            if new_isr is not None:
                assert proposer is not None
                proposer(part, new_isr)
            out.append(True)
        if moved:
            self.high_watermarks_moved(moved)
        return out

    def shrink_isrs(self, lag_time_ms: int) -> int:
        """Leaders propose dropping followers not caught up for `lag_time_ms` (the node's tasks
        thread, every half lag time). Returns the proposals made."""
        proposer = self.isr_proposer
        if proposer is None:
            return 0
        self.session_fetches.expire()
        self.session_fetches.refresh_caught_up_from_sessions()
        made = 0
        for part in self.partitions().values():
            new_isr = part.isr_to_shrink(lag_time_ms)
            if new_isr is not None:
                _log.info(
                    "[%s-%d] shrinking ISR %s -> %s (lagging more than %d ms)",
                    part.topic,
                    part.partition,
                    list(part.isr),
                    list(new_isr),
                    lag_time_ms,
                )
                proposer(part, new_isr)
                made += 1
                # (the proposal may replace an unanswered expansion whose member held the HW)
                if part.maybe_advance_high_watermark():
                    self.high_watermark_moved(part.tp)
        return made

    # -- periodic -------------------------------------------------------------------------------

    def wake_offline(self) -> int:
        """Complete waiting operations of partitions whose log directory went offline (a
        failed group commit reports nothing): they answer KAFKA_STORAGE_ERROR now rather than
        time out. Call periodically (the node's tasks thread). Returns partitions woken.
        Free while every log dir is online (it runs every 100 ms over every partition)."""
        if not self.log_manager.offline_dirs():
            return 0
        woken = 0
        for tp, part in self.partitions().items():
            if part.log.offline and tp not in self._offline_seen:
                self._offline_seen.add(tp)
                _log.error("[%s-%d] log is offline: failing its waiting requests", *tp)
                self._wake(tp)
                woken += 1
        return woken

    def checkpoint_high_watermarks(self) -> None:
        self.log_manager.checkpoint_high_watermarks(self.high_watermarks())
