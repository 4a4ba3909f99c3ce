"""TxnCoordinator: the transactional ids of the `__transaction_state` partitions this broker leads.

    tc = TxnCoordinator(node_id, replica_manager, settings, image, next_producer_id, markers)
    publisher.subscribe(tc.on_metadata)   # become / stop being coordinator of partitions
    tc.start() ... tc.shutdown()          # the "txn-coordinator" thread: loads, timeouts

A transactional id lives in partition `partition_for(id)` ("its shard"). While this broker
leads that partition the shard holds each id's `TxnMetadata` (broker/txn/state.py); becoming
leader schedules a load (the partition read from its start: the last record of each id wins),
and the coordinator epoch is the partition's leader epoch. `tc.shards` owns which partitions
this broker leads, their loading and the lock (broker/coordination/shards.py, with the shard and
its loader in broker/txn/shards.py). Until loaded: COORDINATOR_LOAD_IN_PROGRESS; on a broker
that does not lead it: NOT_COORDINATOR.

Every change is a record written to the shard's partition with acks=all; the in-memory state
changes once it is replicated, and only then is the client answered. While an id has a write
or markers in flight it is "pending" and other requests for it get CONCURRENT_TRANSACTIONS
(Kafka's pendingState). Ending a transaction: PrepareCommit/PrepareAbort written, the markers
handed to the MarkerChannel (broker/txn/markers.py) and the client answered; once every marker
is durable the id is CompleteCommit/CompleteAbort in memory at once (the next transaction of
the id may start: its parked AddPartitionsToTxn is retried), and Complete* is written. That
write is appended before anything the next transaction writes, so whatever of the next
transaction is durable implies Complete* is; if Complete* is lost, the partition says
Prepare* and whoever loads it sends the markers again (a repeated marker changes nothing).

The thread, every transaction.abort.timed.out.transaction.cleanup.interval.ms (and after each
load): aborts Ongoing transactions past their timeout (epoch bumped: the producer is fenced),
and resumes every Prepare* transaction not in flight (after a failover, a failed write, or
markers given up), so a new coordinator finishes what the old one prepared. Every
transaction.remove.expired.transaction.cleanup.interval.ms it expires the ids idle past
transactional.id.expiration.ms (`expire_transactional_ids`: a tombstone each).

Threads: public methods from I/O threads (handlers), the metadata publisher, the flusher/timer
threads (write callbacks) and the marker channel's thread (marker callbacks). `lock` guards
the shards; no write or marker send is started while holding it.
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.coordination.shards import CoordinatorShards
from broker.txn import state as sm
from broker.txn.log_format import TRANSACTION_STATE_TOPIC, encode_key, partition_for, records_of
from broker.txn.markers import MarkerChannel, MarkerJob
from broker.txn.shards import TxnEntry, TxnShard, read_txns
from broker.txn.state import PREPARED, TP, TxnMetadata
from broker.txn.topic import TxnSettings, TxnTopic
from client.errors import ErrorCode
from client.records import build_batch

if TYPE_CHECKING:
    from broker.replica import ReplicaManager
    from broker.replica.delayed import ProducePartitionStatus
    from controller.channel import ControllerChannel
    from controller.metadata.image import MetadataImage

log = logging.getLogger(__name__)

# AddPartitionsToTxn for an id whose previous transaction is still completing (its markers,
# then Complete*) waits for that, up to this long, instead of answering CONCURRENT_TRANSACTIONS
# at once: a producer's next transaction then starts as soon as it can, not after a client
# back-off (decision entry; at most _MAX_PARKED requests wait per id).
COMPLETION_WAIT_S = 1.0
_MAX_PARKED = 4
_EXPIRE_BATCH = 500  # tombstones per batch (~40 KB for ids of 64 characters)
# errors of a write to __transaction_state, as the client sees them (Kafka's mapping)
_WRITE_ERRORS = {
    int(ErrorCode.NOT_LEADER_OR_FOLLOWER): ErrorCode.NOT_COORDINATOR,
    int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION): ErrorCode.NOT_COORDINATOR,
    int(ErrorCode.KAFKA_STORAGE_ERROR): ErrorCode.NOT_COORDINATOR,
    int(ErrorCode.NOT_ENOUGH_REPLICAS): ErrorCode.COORDINATOR_NOT_AVAILABLE,
    int(ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND): ErrorCode.COORDINATOR_NOT_AVAILABLE,
    int(ErrorCode.REQUEST_TIMED_OUT): ErrorCode.COORDINATOR_NOT_AVAILABLE,
}

Answer = Callable[[int, str | None], None]
InitAnswer = Callable[[int, int, int, str | None], None]  # code, producer id, epoch, message


def _wall_ms() -> int:
    return int(time.time() * 1000)


class TxnError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = int(code)
        self.message = message


@dataclass
class _Parked:
    """An AddPartitionsToTxn waiting for its id's transaction to complete."""

    deadline: float  # time.monotonic()
    retry: Callable[[], None]  # runs the request again
    answer: Answer


class TxnCoordinator:
    def __init__(
        self,
        node_id: int,
        replica_manager: ReplicaManager,
        settings: TxnSettings,
        image: Callable[[], MetadataImage],
        next_producer_id: Callable[[], concurrent.futures.Future[int]],
        markers: MarkerChannel,
        clock: Callable[[], int] = _wall_ms,
    ) -> None:
        self.node_id = node_id
        self.replica_manager = replica_manager
        self.settings = settings
        self._next_pid = next_producer_id
        self.markers = markers
        self._clock = clock
        self.topic = TxnTopic(node_id, settings, image)
        self.shards = CoordinatorShards(
            node_id, TRANSACTION_STATE_TOPIC, replica_manager, image, settings.partitions,
            new_shard=TxnShard, loader=read_txns, on_tick=self._tick, name="txn-coordinator",
            wait_s=lambda: self._next_check - time.monotonic(),
        )  # fmt: skip
        self.lock = self.shards.lock  # guards the shards and the parked requests
        self._parked: dict[tuple[int, str], list[_Parked]] = {}  # (partition, id) -> waiting
        self._next_check = 0.0  # time.monotonic() of the next check_transactions
        self._next_expiry = 0.0  # ... and of the next expire_transactional_ids
        self._prefix = self.shards.prefix

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the marker channel and the shards' thread (both stopped by shutdown)."""
        self.markers.start()
        self._next_check = time.monotonic() + self.settings.abort_check_interval_ms / 1000
        self._next_expiry = time.monotonic() + self.settings.id_expiration_check_interval_ms / 1000
        self.shards.start()

    def shutdown(self) -> None:
        self.shards.shutdown()
        self.markers.shutdown()

    def _tick(self, loaded: bool) -> None:
        """After each round of the shards' thread: parked requests retried or expired; every
        abort_check_interval_ms, and after a load, check_transactions."""
        self.expire_parked(time.monotonic())
        if loaded or time.monotonic() >= self._next_check:
            self._next_check = time.monotonic() + self.settings.abort_check_interval_ms / 1000
            try:
                self.check_transactions()
            except Exception:
                log.exception("%s timeout check failed", self._prefix)
        if time.monotonic() >= self._next_expiry:
            self._next_expiry = (
                time.monotonic() + self.settings.id_expiration_check_interval_ms / 1000
            )
            try:
                self.expire_transactional_ids()
            except Exception:
                log.exception("%s transactional id expiry failed", self._prefix)

    # -- leadership and loading -----------------------------------------------------------------

    def on_metadata(self, image: MetadataImage, delta: object) -> None:
        """Publisher subscriber (after the ReplicaManager applied the image)."""
        self.shards.on_metadata(image, delta)

    def _shard(self, tid: str) -> TxnShard:
        """The loaded shard of `tid` (lock held), else TxnError."""
        p = partition_for(tid, self.shards.num_partitions())
        shard = self.shards.at(p)
        if shard is None:
            raise TxnError(ErrorCode.NOT_COORDINATOR,
                           f"broker {self.node_id} is not the coordinator of {tid}")  # fmt: skip
        if not shard.loaded:
            raise TxnError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                           f"{TRANSACTION_STATE_TOPIC}-{p} is being loaded")  # fmt: skip
        return shard

    def _entry(self, tid: str) -> tuple[TxnShard, TxnEntry | None]:
        """(shard, entry) of `tid` (lock held); CONCURRENT_TRANSACTIONS while it is pending."""
        shard = self._shard(tid)
        entry = shard.txns.get(tid)
        if entry is not None and entry.pending:
            raise TxnError(ErrorCode.CONCURRENT_TRANSACTIONS,
                           f"a previous request of {tid} is being completed")  # fmt: skip
        return shard, entry

    def find(
        self, tid: str, controller: ControllerChannel
    ) -> tuple[int, int, str, int, str | None]:
        """FindCoordinator key_type 1: (error code, node id, host, port, message)."""
        return self.topic.find(tid, controller)

    def describe(self, tid: str) -> TxnMetadata | None:
        """The current metadata of `tid` (tests, tools); TxnError when not coordinator."""
        with self.lock:
            entry = self._shard(tid).txns.get(tid)
            return None if entry is None else entry.md

    def now_ms(self) -> int:
        """The coordinator's clock (wall-clock ms, as the records' timestamps)."""
        return self._clock()

    def list_transactions(self) -> tuple[int, list[TxnMetadata]]:
        """ListTransactions: (NONE or COORDINATOR_LOAD_IN_PROGRESS while a shard is loading,
        the metadata of every id in the shards this broker leads). Any thread."""
        with self.lock:
            loading = any(not shard.loaded for shard in self.shards.all())
            found = [
                entry.md
                for shard in self.shards.all()
                for entry in shard.txns.values()
                if entry.md is not None
            ]
        code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if loading else ErrorCode.NONE
        return int(code), found

    # -- InitProducerId --------------------------------------------------------------------------

    def init_producer_id(self, tid: str, timeout_ms: int, answer: InitAnswer,
                         new_pid: int | None = None) -> None:  # fmt: skip
        """Map `tid` to a producer id with a bumped epoch (fencing the previous producer)."""
        if not tid:
            answer(int(ErrorCode.INVALID_REQUEST), -1, -1, "transactional id is empty")
            return
        if not 0 < timeout_ms <= self.settings.max_timeout_ms:
            answer(int(ErrorCode.INVALID_TRANSACTION_TIMEOUT), -1, -1,
                   f"transaction timeout {timeout_ms} ms is not in (0, transaction.max.timeout.ms"
                   f" {self.settings.max_timeout_ms}]")  # fmt: skip
            return
        try:
            with self.lock:
                shard, entry = self._entry(tid)
                md = None if entry is None else entry.md
                if sm.needs_new_pid(md) and new_pid is None:
                    ask = True
                else:
                    ask = False
                    t = sm.init(md, tid, new_pid, timeout_ms, self._clock())
                    if t.write is not None:
                        entry = self._set_pending(shard, tid, entry)
        except TxnError as exc:
            answer(exc.code, -1, -1, exc.message)
            return
        if ask:
            self._next_pid().add_done_callback(lambda f: self._got_pid(f, tid, timeout_ms, answer))
            return
        if t.write is None:
            answer(t.error, -1, -1, t.message)
            return
        w = t.write

        def written(code: int, msg: str | None) -> None:
            if code:
                answer(code, -1, -1, msg)
            elif t.error:  # an open transaction is being aborted: the client retries
                answer(t.error, -1, -1, t.message)
            else:
                log.info("%s %s: producer id %d epoch %d", self._prefix, tid, w.producer_id,
                         w.producer_epoch)  # fmt: skip
                answer(0, w.producer_id, w.producer_epoch, None)

        self._write(shard, w, written)

    def _got_pid(self, f: concurrent.futures.Future[int], tid: str, timeout_ms: int,
                 answer: InitAnswer) -> None:  # fmt: skip
        exc = f.exception()
        if exc is not None:
            log.warning("%s no producer id for %s: %s", self._prefix, tid, exc)
            answer(int(getattr(exc, "code", ErrorCode.UNKNOWN_SERVER_ERROR)), -1, -1, str(exc))
            return
        self.init_producer_id(tid, timeout_ms, answer, new_pid=int(f.result()))

    # -- AddPartitionsToTxn ----------------------------------------------------------------------

    def add_partitions(self, tid: str, pid: int, epoch: int, tps: frozenset[TP],
                       answer: Answer) -> None:  # fmt: skip
        try:
            with self.lock:
                retry = lambda: self.add_partitions(tid, pid, epoch, tps, answer)  # noqa: E731
                if self._park(tid, retry, answer):
                    return
                shard, entry = self._entry(tid)
                t = sm.add_partitions(entry.md if entry else None, tid, pid, epoch, tps,
                                      self._clock())  # fmt: skip
                if t.write is not None:
                    self._set_pending(shard, tid, entry)
        except TxnError as exc:
            answer(exc.code, exc.message)
            return
        if t.write is None:
            answer(t.error, t.message)
            return
        self._write(shard, t.write, answer)

    # -- EndTxn ----------------------------------------------------------------------------------

    def end_txn(self, tid: str, pid: int, epoch: int, commit: bool, answer: Answer) -> None:
        try:
            with self.lock:
                shard, entry = self._entry(tid)
                t = sm.end(entry.md if entry else None, tid, pid, epoch, commit, self._clock())
                if t.write is not None:
                    self._set_pending(shard, tid, entry)
        except TxnError as exc:
            answer(exc.code, exc.message)
            return
        if t.write is None:
            answer(t.error, t.message)
            return
        self._write(shard, t.write, answer)

    # -- timeouts and resumption -------------------------------------------------------------------

    def check_transactions(self) -> None:
        """Abort Ongoing transactions past their timeout (epoch bumped) and resume Prepare*
        ones not in flight. The coordinator's thread; tests call it."""
        now = self._clock()
        todo: list[tuple[TxnShard, TxnMetadata, bool]] = []  # (shard, metadata, write first)
        with self.lock:
            for shard in self.shards.loaded():
                for tid, entry in shard.txns.items():
                    md = entry.md
                    if entry.pending or md is None:
                        continue
                    if sm.timed_out(md, now):
                        w = sm.abort(md, now, bump_epoch=True).write
                        assert w is not None
                        log.info("%s %s: transaction open for %d ms (timeout %d ms): aborting,"
                                 " producer epoch %d -> %d", self._prefix, tid,
                                 now - md.start_ms, md.timeout_ms, md.producer_epoch,
                                 w.producer_epoch)  # fmt: skip
                        entry.pending = True
                        todo.append((shard, w, True))
                    elif md.state in PREPARED:
                        entry.pending = True
                        todo.append((shard, md, False))
        for shard, md, write_first in todo:
            if write_first:
                self._write(shard, md, lambda code, msg: None)
            else:
                self._send_markers(shard, md)

    # -- expiry of idle transactional ids ----------------------------------------------------------

    def expire_transactional_ids(self) -> int:
        """Kafka's removeExpiredTransactionalIds: each id in Empty or Complete* not updated for
        transactional.id.expiration.ms is made pending (its requests get
        CONCURRENT_TRANSACTIONS) and its tombstone written; once replicated the id is
        forgotten. Returns how many ids went to be expired. The coordinator's thread."""
        now = self._clock()
        todo: list[tuple[TxnShard, list[str]]] = []
        with self.lock:
            for shard in self.shards.loaded():
                tids = [tid for tid, e in shard.txns.items() if not e.pending and e.md is not None
                        and sm.expired(e.md, now, self.settings.id_expiration_ms)]  # fmt: skip
                for tid in tids:
                    shard.txns[tid].pending = True
                todo += [(shard, tids[i : i + _EXPIRE_BATCH])
                         for i in range(0, len(tids), _EXPIRE_BATCH)]  # fmt: skip
        for shard, tids in todo:
            self._write_tombstones(shard, tids)
        return sum(len(tids) for _shard, tids in todo)

    def _write_tombstones(self, shard: TxnShard, tids: list[str]) -> None:
        """(No request is parked for these ids: only a Prepare* id parks requests.)"""

        def done(code: int, message: str | None) -> None:
            with self.lock:
                for tid in tids:
                    entry = shard.txns.get(tid)
                    if entry is not None and code == 0:
                        del shard.txns[tid]
                    elif entry is not None:
                        entry.pending = False  # tried again at the next check
            if code:
                log.warning("%s expiring %d transactional id(s) failed: error %d (%s)",
                            self._prefix, len(tids), code, message)  # fmt: skip
            else:
                log.info("%s expired %d transactional id(s) idle for %d ms: %s", self._prefix,
                         len(tids), self.settings.id_expiration_ms, ", ".join(tids[:10]))  # fmt: skip

        self._append(shard, [(encode_key(tid), None) for tid in tids], done)

    # -- writes and markers ------------------------------------------------------------------------

    def _park(self, tid: str, retry: Callable[[], None], answer: Answer) -> bool:
        """Park a request for `tid` while its transaction completes (lock held): True if it
        now waits (answered by `retry` once the id is free, or CONCURRENT_TRANSACTIONS after
        COMPLETION_WAIT_S)."""
        shard = self._shard(tid)
        entry = shard.txns.get(tid)
        if entry is None or not entry.pending or entry.md is None or entry.md.state not in PREPARED:
            return False
        waiting = self._parked.setdefault((shard.partition, tid), [])
        if len(waiting) >= _MAX_PARKED:
            return False
        waiting.append(_Parked(time.monotonic() + COMPLETION_WAIT_S, retry, answer))
        return True

    def _release(self, shard: TxnShard, tid: str) -> list[_Parked]:
        """The requests parked for `tid` (lock held), to retry once the lock is released."""
        return self._parked.pop((shard.partition, tid), [])

    def expire_parked(self, now: float) -> None:
        """Retry the parked requests whose id is free or no longer ours (they get their
        answer, NOT_COORDINATOR for one); answer CONCURRENT_TRANSACTIONS to those that waited
        COMPLETION_WAIT_S."""
        retry: list[_Parked] = []
        expired: list[_Parked] = []
        with self.lock:
            for key in list(self._parked):
                p, tid = key
                shard = self.shards.at(p)
                entry = shard.txns.get(tid) if shard is not None else None
                if entry is None or not entry.pending:
                    retry += self._parked.pop(key)
                    continue
                waiting = self._parked[key]
                expired += [w for w in waiting if w.deadline <= now]
                waiting[:] = [w for w in waiting if w.deadline > now]
                if not waiting:
                    del self._parked[key]
        for w in retry:
            w.retry()
        for w in expired:
            w.answer(ErrorCode.CONCURRENT_TRANSACTIONS,
                     "the previous transaction is still being completed")  # fmt: skip

    @staticmethod
    def _set_pending(shard: TxnShard, tid: str, entry: TxnEntry | None) -> TxnEntry:
        if entry is None:
            entry = shard.txns[tid] = TxnEntry(None)
        entry.pending = True
        return entry

    def _is_current(self, shard: TxnShard) -> bool:
        return self.shards.is_current(shard)

    def _append(
        self,
        shard: TxnShard,
        records: Sequence[tuple[bytes, bytes | None]],
        done: Callable[[int, str | None], None],
    ) -> None:
        """Append `records` to the shard's partition with acks=all; `done(code, message)` once
        replicated or failed (at once, or later on a flusher/timer thread)."""
        tp = (TRANSACTION_STATE_TOPIC, shard.partition)

        def answered(statuses: Mapping[tuple[str, int], ProducePartitionStatus]) -> None:
            st = statuses[tp]
            done(int(st.error_code), st.error_message)

        batch = build_batch(records, timestamp_ms=self._clock())
        res = self.replica_manager.append_records(
            -1, self.settings.write_timeout_ms, {tp: batch}, answered
        )
        if res is not None:
            answered(res)

    def _write(self, shard: TxnShard, md: TxnMetadata, answer: Answer) -> None:
        """Append `md` (acks=all); once replicated it becomes the id's state, then `answer`.
        A Prepare* state goes on to the markers (the id stays pending until they are durable)."""
        tid = md.transactional_id

        def done(code: int, message: str | None) -> None:
            freed: list[_Parked] = []
            with self.lock:
                entry = shard.txns.get(tid)
                current = self._is_current(shard) and entry is not None
                if current and entry is not None:
                    if code == 0:
                        entry.md = md
                    entry.pending = code == 0 and md.state in PREPARED
                    if entry.md is None:
                        del shard.txns[tid]
                    if not entry.pending:
                        freed = self._release(shard, tid)
            if code:
                mapped = int(_WRITE_ERRORS.get(code, ErrorCode.UNKNOWN_SERVER_ERROR))
                log.warning("%s %s: writing %s failed: error %d (%s)", self._prefix, tid,
                            md.state.kafka_name, code, message)  # fmt: skip
                answer(mapped, message)
                for w in freed:
                    w.retry()
                return
            if current and md.state in PREPARED:
                self._send_markers(shard, md)  # (first: the answer need not wait on them)
            answer(0, None)
            for w in freed:  # (the next transaction's AddPartitionsToTxn)
                w.retry()

        self._append(shard, records_of([md]), done)

    def _complete_written(self, md: TxnMetadata, code: int, message: str | None) -> None:
        if code:
            log.warning("%s %s: writing %s failed: error %d (%s); the id's next load sends its"
                        " markers again", self._prefix, md.transactional_id,
                        md.state.kafka_name, code, message)  # fmt: skip

    def _send_markers(self, shard: TxnShard, md: TxnMetadata) -> None:
        """Markers for a Prepare* `md` (its entry pending), then Complete* written."""
        tid = md.transactional_id

        def still_valid() -> bool:
            with self.lock:
                return self._is_current(shard)

        def sent(ok: bool) -> None:
            if not ok:
                with self.lock:
                    entry = shard.txns.get(tid)
                    if entry is not None:
                        entry.pending = False  # resumed by the next check while still leader
                    freed = self._release(shard, tid)
                for w in freed:
                    w.retry()
                return
            # Every marker is durable: the id is Complete* now, and free for its next
            # transaction, whose first write is appended after this Complete* (module docstring)
            done_md = sm.complete(md, self._clock())
            with self.lock:
                entry = shard.txns.get(tid)
                if not self._is_current(shard) or entry is None or entry.md is not md:
                    return  # (no longer ours: the new coordinator resumes from the log)
                entry.md = done_md
                entry.pending = False
                freed = self._release(shard, tid)
            # (its outcome changes nothing: the state is already the id's; a lost Complete*
            # leaves Prepare*, whose markers the next load sends again)
            written = functools.partial(self._complete_written, done_md)
            self._append(shard, records_of([done_md]), written)
            for w in freed:
                w.retry()

        if not md.partitions:
            sent(True)
            return
        job = MarkerJob(tid, md.producer_id, md.producer_epoch, md.committing,
                        md.partitions, shard.coordinator_epoch)  # fmt: skip
        self.markers.send(job, sent, still_valid)
