"""TxnCoordinator over a replica manager that keeps what it is given (an in-memory
`__transaction_state`) and a recording marker channel (the one seam faked): the state machine
as the coordinator drives it, write-then-answer, fencing by a second init, the timeout abort,
a failed write, and a new coordinator that loads the partition and completes what the old one
prepared."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable
from types import SimpleNamespace

from broker.replica.delayed import ProducePartitionStatus
from broker.txn import MarkerJob, TxnCoordinator, TxnSettings
from broker.txn.coordinator import COMPLETION_WAIT_S
from broker.txn.log_format import TRANSACTION_STATE_TOPIC, decode_key, decode_value, partition_for
from broker.txn.state import TxnMetadata, TxnState
from client.errors import ErrorCode
from client.records import decode_records

PARTS = 3
E = ErrorCode


class MemLog:
    """A partition's log: the appended batches with their offsets assigned."""

    def __init__(self) -> None:
        self.batches: list[bytes] = []
        self.log_start_offset = 0
        self.end_offset = 0

    def append(self, batch: bytes) -> int:
        from client.records import build_batch

        base = self.end_offset
        recs = list(decode_records(batch))
        self.batches.append(build_batch([(r.key, r.value) for r in recs], base_offset=base))
        self.end_offset += len(recs)
        return base

    def read(self, offset: int, max_bytes: int) -> SimpleNamespace:
        data = b"".join(self.batches) if offset == 0 else b""
        return SimpleNamespace(data=data, next_offset=self.end_offset)

    def states(self) -> list[tuple[str, TxnState, int]]:
        out = []
        for b in self.batches:
            for r in decode_records(b):
                tid = decode_key(r.key)
                md = decode_value(tid, r.value)
                out.append((tid, md.state, md.producer_epoch))
        return out


class MemReplicaManager:
    def __init__(self, epoch: int = 0) -> None:
        self.logs = {p: MemLog() for p in range(PARTS)}
        self.epoch = epoch
        self.fail_with: int = 0

    def get_partition(self, topic: str, p: int) -> SimpleNamespace:
        return SimpleNamespace(log=self.logs[p], is_leader=True, leader_epoch=self.epoch)

    def append_records(self, acks, timeout_ms, entries, callback):
        assert acks == -1
        (((topic, p), batch),) = entries.items()
        assert topic == TRANSACTION_STATE_TOPIC
        if self.fail_with:
            return {(topic, p): ProducePartitionStatus(self.fail_with, error_message="boom")}
        base = self.logs[p].append(batch)
        return {(topic, p): ProducePartitionStatus(0, base_offset=base)}


class RecordingMarkers:
    def __init__(self) -> None:
        self.jobs: list[tuple[MarkerJob, Callable[[bool], None], Callable[[], bool]]] = []
        self.started = self.stopped = False

    def send(self, job, done, still_valid) -> None:
        self.jobs.append((job, done, still_valid))

    def finish(self, ok: bool = True) -> MarkerJob:
        job, done, _ = self.jobs.pop(0)
        done(ok)
        return job

    def start(self) -> None:
        self.started = True

    def shutdown(self) -> None:
        self.stopped = True


def _image(epoch: int = 0, leader: int = 1) -> SimpleNamespace:
    parts = {p: SimpleNamespace(leader=leader, leader_epoch=epoch) for p in range(PARTS)}
    return SimpleNamespace(topics={TRANSACTION_STATE_TOPIC: SimpleNamespace(partitions=parts)},
                           brokers={})  # fmt: skip


class Harness:
    def __init__(self, rm: MemReplicaManager | None = None, epoch: int = 0) -> None:
        self.rm = rm or MemReplicaManager(epoch)
        self.rm.epoch = epoch
        self.markers = RecordingMarkers()
        self.now = 1_000_000
        self.pids = iter(range(100, 200))
        self.image = _image(epoch)
        self.tc = TxnCoordinator(
            1, self.rm, TxnSettings(partitions=PARTS, max_timeout_ms=60_000),
            lambda: self.image, self._next_pid, self.markers, clock=lambda: self.now,
        )  # fmt: skip
        self.tc.on_metadata(self.image, None)
        for p in range(PARTS):
            self.tc.shards.load(p, epoch)

    def _next_pid(self) -> concurrent.futures.Future:
        f: concurrent.futures.Future = concurrent.futures.Future()
        f.set_result(next(self.pids))
        return f

    def init(self, tid: str, timeout_ms: int = 10_000) -> tuple[int, int, int]:
        got: list = []
        self.tc.init_producer_id(tid, timeout_ms, lambda c, pid, ep, m: got.append((c, pid, ep)))
        assert len(got) == 1
        return got[0]

    def add(self, tid: str, pid: int, epoch: int, *tps: tuple[str, int]) -> int:
        got: list = []
        self.tc.add_partitions(tid, pid, epoch, frozenset(tps), lambda c, m: got.append(c))
        assert len(got) == 1
        return got[0]

    def end(self, tid: str, pid: int, epoch: int, commit: bool) -> int:
        got: list = []
        self.tc.end_txn(tid, pid, epoch, commit, lambda c, m: got.append(c))
        assert len(got) == 1
        return got[0]

    def log(self, tid: str) -> list[tuple[TxnState, int]]:
        p = partition_for(tid, PARTS)
        return [(s, e) for t, s, e in self.rm.logs[p].states() if t == tid]


S = TxnState


def test_commit_writes_prepare_answers_then_markers_then_complete() -> None:
    h = Harness()
    assert h.init("t1") == (0, 100, 0)
    assert h.add("t1", 100, 0, ("orders", 0), ("orders", 1)) == 0
    assert h.add("t1", 100, 0, ("orders", 1)) == 0  # already in: nothing written
    assert h.add("t1", 100, 0, ("audit", 0)) == 0
    assert h.end("t1", 100, 0, commit=True) == 0  # answered once PrepareCommit is written
    assert h.log("t1") == [(S.EMPTY, 0), (S.ONGOING, 0), (S.ONGOING, 0), (S.PREPARE_COMMIT, 0)]
    # while the markers are out, the id is busy
    assert h.end("t1", 100, 0, commit=True) == E.CONCURRENT_TRANSACTIONS
    job = h.markers.finish()
    assert job == MarkerJob("t1", 100, 0, True,
                            frozenset({("orders", 0), ("orders", 1), ("audit", 0)}), 0)  # fmt: skip
    assert h.log("t1")[-1] == (S.COMPLETE_COMMIT, 0)
    md = h.tc.describe("t1")
    assert md is not None and md.state == S.COMPLETE_COMMIT and not md.partitions
    assert h.end("t1", 100, 0, commit=True) == 0  # a retried commit
    assert h.end("t1", 100, 0, commit=False) == E.INVALID_TXN_STATE
    # the next transaction starts with the next add
    assert h.add("t1", 100, 0, ("orders", 2)) == 0
    assert h.end("t1", 100, 0, commit=False) == 0
    # the producer's next AddPartitionsToTxn while the abort's markers are out waits for the
    # abort to complete, then starts the next transaction (no CONCURRENT_TRANSACTIONS round)
    parked: list = []
    h.tc.add_partitions("t1", 100, 0, frozenset({("orders", 3)}), lambda c, m: parked.append(c))
    assert parked == []
    assert h.markers.finish().commit is False
    assert h.log("t1")[-2:] == [(S.COMPLETE_ABORT, 0), (S.ONGOING, 0)]
    assert parked == [0]
    md = h.tc.describe("t1")
    assert md is not None and md.state == S.ONGOING and md.partitions == {("orders", 3)}


def test_a_parked_add_gets_concurrent_transactions_after_the_wait() -> None:
    h = Harness()
    assert h.init("t1") == (0, 100, 0)
    assert h.add("t1", 100, 0, ("orders", 0)) == 0
    assert h.end("t1", 100, 0, commit=True) == 0  # the markers stay out
    got: list = []
    for p in range(6):  # at most 4 wait; the others are answered at once
        h.tc.add_partitions("t1", 100, 0, frozenset({("orders", p)}), lambda c, m: got.append(c))
    assert got == [E.CONCURRENT_TRANSACTIONS] * 2
    h.tc.expire_parked(time.monotonic())  # not due yet
    assert len(got) == 2
    h.tc.expire_parked(time.monotonic() + COMPLETION_WAIT_S + 1)
    assert got == [E.CONCURRENT_TRANSACTIONS] * 6
    assert h.log("t1")[-1] == (S.PREPARE_COMMIT, 0)  # nothing else was written


def test_end_without_partitions_or_with_wrong_producer() -> None:
    h = Harness()
    assert h.end("nobody", 1, 0, True) == E.INVALID_PRODUCER_ID_MAPPING
    pid = h.init("t2")[1]
    assert h.end("t2", pid, 0, True) == E.INVALID_TXN_STATE  # Empty: nothing to end
    assert h.add("t2", pid + 1, 0, ("a", 0)) == E.INVALID_PRODUCER_ID_MAPPING
    assert h.add("t2", pid, 1, ("a", 0)) == E.PRODUCER_FENCED
    assert h.add("t2", pid, 0, ("a", 0)) == 0
    assert h.end("t2", pid, 0, False) == 0
    assert h.markers.jobs and h.markers.finish().partitions == frozenset({("a", 0)})


def test_second_init_fences_the_first_and_aborts_its_transaction() -> None:
    h = Harness()
    _, pid, _ = h.init("t3")
    assert h.add("t3", pid, 0, ("orders", 0)) == 0
    code, _, _ = h.init("t3")
    assert code == E.CONCURRENT_TRANSACTIONS  # the open transaction is being aborted
    assert h.log("t3")[-1] == (S.PREPARE_ABORT, 1)  # with the epoch bumped
    assert h.init("t3")[0] == E.CONCURRENT_TRANSACTIONS  # still aborting
    job = h.markers.finish()
    assert (job.producer_id, job.producer_epoch, job.commit) == (pid, 1, False)
    assert h.init("t3") == (0, pid, 2)  # the retry gets the next epoch
    # the first producer is fenced
    assert h.add("t3", pid, 0, ("orders", 0)) == E.PRODUCER_FENCED
    assert h.end("t3", pid, 0, True) == E.PRODUCER_FENCED
    assert [s for s, _ in h.log("t3")] == [S.EMPTY, S.ONGOING, S.PREPARE_ABORT,
                                           S.COMPLETE_ABORT, S.EMPTY]  # fmt: skip


def test_timed_out_transaction_is_aborted_with_a_bumped_epoch() -> None:
    h = Harness()
    _, pid, _ = h.init("t4", timeout_ms=5000)
    _, pid5, _ = h.init("t5", timeout_ms=50_000)
    assert h.add("t4", pid, 0, ("orders", 3)) == 0
    assert h.add("t5", pid5, 0, ("orders", 4)) == 0
    h.now += 5000
    h.tc.check_transactions()
    assert not h.markers.jobs  # not past the timeout yet
    h.now += 1
    h.tc.check_transactions()
    job = h.markers.finish()
    assert (job.transactional_id, job.producer_epoch, job.commit) == ("t4", 1, False)
    assert not h.markers.jobs  # t5 is within its timeout
    assert h.log("t4")[-2:] == [(S.PREPARE_ABORT, 1), (S.COMPLETE_ABORT, 1)]
    assert h.end("t4", pid, 0, True) == E.PRODUCER_FENCED
    assert h.init("t4", 5000) == (0, pid, 2)


def test_failed_write_answers_the_coordinator_error_and_changes_nothing() -> None:
    h = Harness()
    _, pid, _ = h.init("t6")
    h.rm.fail_with = int(E.NOT_LEADER_OR_FOLLOWER)
    assert h.add("t6", pid, 0, ("a", 0)) == E.NOT_COORDINATOR
    h.rm.fail_with = int(E.REQUEST_TIMED_OUT)
    assert h.add("t6", pid, 0, ("a", 0)) == E.COORDINATOR_NOT_AVAILABLE
    assert h.init("t7")[0] == E.COORDINATOR_NOT_AVAILABLE
    h.rm.fail_with = 0
    md = h.tc.describe("t6")
    assert md is not None and md.state == S.EMPTY
    assert h.tc.describe("t7") is None
    assert h.add("t6", pid, 0, ("a", 0)) == 0  # not left pending


def test_timeouts_are_checked_against_the_broker_maximum() -> None:
    h = Harness()
    assert h.init("t8", timeout_ms=60_001)[0] == E.INVALID_TRANSACTION_TIMEOUT
    assert h.init("t8", timeout_ms=0)[0] == E.INVALID_TRANSACTION_TIMEOUT
    assert h.init("t8", timeout_ms=60_000)[0] == 0


def test_not_coordinator_and_load_in_progress() -> None:
    h = Harness()
    tid = "t9"
    p = partition_for(tid, PARTS)
    h.image.topics[TRANSACTION_STATE_TOPIC].partitions[p].leader = 2
    h.tc.on_metadata(h.image, None)
    assert h.init(tid)[0] == E.NOT_COORDINATOR
    h.image.topics[TRANSACTION_STATE_TOPIC].partitions[p].leader = 1
    h.tc.on_metadata(h.image, None)
    assert h.init(tid)[0] == E.COORDINATOR_LOAD_IN_PROGRESS
    h.tc.shards.load(p, 0)
    assert h.init(tid)[0] == 0


def test_new_coordinator_loads_the_log_and_completes_prepared_transactions() -> None:
    old = Harness()
    _, pa, _ = old.init("ta")
    _, pb, _ = old.init("tb")
    _, pc, _ = old.init("tc")
    assert old.add("ta", pa, 0, ("orders", 0)) == 0
    assert old.add("tb", pb, 0, ("orders", 1)) == 0
    assert old.add("tc", pc, 0, ("orders", 2)) == 0
    assert old.end("ta", pa, 0, True) == 0  # PrepareCommit written, markers never sent
    assert old.end("tb", pb, 0, False) == 0
    assert len(old.markers.jobs) == 2
    # leadership moves: the old coordinator drops the ids, its marker jobs turn invalid
    old.image = _image(epoch=1, leader=2)
    old.tc.on_metadata(old.image, None)
    assert all(not valid() for _, _, valid in old.markers.jobs)
    assert old.init("ta")[0] == E.NOT_COORDINATOR

    new = Harness(old.rm, epoch=1)  # the same partitions, read back from the log
    for tid, state in (("ta", S.PREPARE_COMMIT), ("tb", S.PREPARE_ABORT), ("tc", S.ONGOING)):
        md = new.tc.describe(tid)
        assert md is not None and md.state == state
    new.tc.check_transactions()
    jobs = sorted((new.markers.finish(), new.markers.finish()), key=lambda j: j.transactional_id)
    assert [(j.transactional_id, j.commit, j.coordinator_epoch, j.partitions) for j in jobs] == [
        ("ta", True, 1, frozenset({("orders", 0)})),
        ("tb", False, 1, frozenset({("orders", 1)})),
    ]
    assert new.log("ta")[-1] == (S.COMPLETE_COMMIT, 0)
    assert new.log("tb")[-1] == (S.COMPLETE_ABORT, 0)
    assert not new.markers.jobs  # tc stays open until its timeout
    assert new.end("tc", pc, 0, True) == 0
    assert new.markers.finish().transactional_id == "tc"
    assert new.init("ta") == (0, pa, 1)


def test_markers_given_up_are_resumed_by_the_next_check() -> None:
    h = Harness()
    _, pid, _ = h.init("tr")
    assert h.add("tr", pid, 0, ("a", 0)) == 0
    assert h.end("tr", pid, 0, True) == 0
    h.markers.finish(ok=False)  # e.g. a leader refused them: left in PrepareCommit
    md = h.tc.describe("tr")
    assert md is not None and md.state == S.PREPARE_COMMIT
    h.tc.check_transactions()
    assert h.markers.finish().transactional_id == "tr"
    assert h.log("tr")[-1] == (S.COMPLETE_COMMIT, 0)


def test_epoch_exhaustion_takes_a_new_producer_id() -> None:
    h = Harness()
    _, pid, _ = h.init("tx")
    p = partition_for("tx", PARTS)
    shard = h.tc.shards.at(p)
    assert shard is not None
    entry = shard.txns["tx"]
    assert entry.md is not None
    entry.md = TxnMetadata("tx", pid, 32766, 10_000, S.COMPLETE_COMMIT)
    code, pid2, epoch = h.init("tx")
    assert (code, epoch) == (0, 0) and pid2 != pid


def test_empty_transactional_id_is_refused() -> None:
    assert Harness().init("")[0] == E.INVALID_REQUEST


class HeldReplicaManager(MemReplicaManager):
    """Appends at once (the log's order is the call order) but, while `hold` is set, answers
    only when `deliver` is called: a write that is appended and not yet durable."""

    def __init__(self) -> None:
        super().__init__()
        self.hold = False
        self.held: list[tuple[Callable, dict]] = []

    def append_records(self, acks, timeout_ms, entries, callback):
        statuses = super().append_records(acks, timeout_ms, entries, callback)
        if not self.hold:
            return statuses
        self.held.append((callback, statuses))
        return None

    def deliver(self, code: int = 0) -> None:
        callback, statuses = self.held.pop(0)
        if code:
            statuses = {tp: ProducePartitionStatus(code, error_message="boom") for tp in statuses}
        callback(statuses)


def test_the_next_transaction_starts_once_the_markers_are_durable() -> None:
    """The id is Complete* in memory when its markers are durable: a parked AddPartitionsToTxn
    is retried then, before Complete* itself is durable, and its Ongoing record is appended
    after Complete* (so it is durable only if Complete* is)."""
    rm = HeldReplicaManager()
    h = Harness(rm)
    _, pid, _ = h.init("tn")
    assert h.add("tn", pid, 0, ("a", 0)) == 0
    assert h.end("tn", pid, 0, commit=True) == 0
    parked: list = []
    h.tc.add_partitions("tn", pid, 0, frozenset({("a", 1)}), lambda c, m: parked.append(c))
    assert parked == []  # the markers are out
    rm.hold = True
    h.markers.finish()
    # Complete* and the next transaction's Ongoing are both appended, in that order, and
    # neither is durable yet
    assert h.log("tn")[-3:] == [(S.PREPARE_COMMIT, 0), (S.COMPLETE_COMMIT, 0), (S.ONGOING, 0)]
    assert len(rm.held) == 2 and parked == []
    assert h.add("tn", pid, 0, ("a", 2)) == E.CONCURRENT_TRANSACTIONS  # Ongoing is in flight
    rm.deliver()  # Complete* durable: nothing changes, the id's state is already past it
    assert parked == []
    rm.deliver()  # Ongoing durable: the parked request is answered
    assert parked == [0]
    md = h.tc.describe("tn")
    assert md is not None and md.state == S.ONGOING and md.partitions == {("a", 1)}


def test_a_failed_complete_write_leaves_the_state_and_is_resent_on_load() -> None:
    """Complete* failing after the markers are durable changes nothing in memory; a coordinator
    loading the partition finds Prepare* and sends the markers again."""
    rm = HeldReplicaManager()
    h = Harness(rm)
    _, pid, _ = h.init("tf")
    assert h.add("tf", pid, 0, ("a", 0)) == 0
    assert h.end("tf", pid, 0, commit=False) == 0
    rm.hold = True
    h.markers.finish()
    rm.deliver(int(E.NOT_LEADER_OR_FOLLOWER))
    md = h.tc.describe("tf")
    assert md is not None and md.state == S.COMPLETE_ABORT
    # the Complete* record "lost": a new coordinator loads Prepare* and resends the markers
    p = partition_for("tf", PARTS)
    rm.logs[p].batches.pop()
    rm.hold = False
    h2 = Harness(rm, epoch=1)
    h2.tc.check_transactions()
    job = h2.markers.finish()
    assert job.transactional_id == "tf" and job.commit is False
    assert h2.log("tf")[-1] == (S.COMPLETE_ABORT, 0)


def _last_value(h: Harness, tid: str) -> bytes | None:
    """The value of the last record of `tid` in its partition (None: a tombstone)."""
    from broker.txn.log_format import encode_key

    key = encode_key(tid)
    found = [r.value for b in h.rm.logs[partition_for(tid, PARTS)].batches
             for r in decode_records(b) if r.key == key]  # fmt: skip
    assert found, tid
    return found[-1]


def test_idle_ids_expire_with_a_tombstone_and_start_afresh() -> None:
    """transactional.id.expiration.ms: Empty and Complete* ids not updated for that long get
    a tombstone and are forgotten (a reload too); Ongoing ones and recent ones stay; the next
    InitProducerId of an expired id takes a new producer id at epoch 0."""
    h = Harness()
    expiry = h.tc.settings.id_expiration_ms
    assert expiry == 604_800_000  # Kafka's default
    _, p_empty, _ = h.init("idle-empty")
    _, p_done, _ = h.init("idle-done")
    assert h.add("idle-done", p_done, 0, ("orders", 0)) == 0
    assert h.end("idle-done", p_done, 0, True) == 0
    h.markers.finish()
    assert h.tc.describe("idle-done").state == S.COMPLETE_COMMIT
    _, p_open, _ = h.init("open", timeout_ms=60_000)
    assert h.add("open", p_open, 0, ("orders", 1)) == 0
    h.now += expiry - 1
    assert h.tc.expire_transactional_ids() == 0  # not idle long enough yet
    h.init("recent")
    h.now += 1
    assert h.tc.expire_transactional_ids() == 2
    assert h.tc.describe("idle-empty") is None and h.tc.describe("idle-done") is None
    assert h.tc.describe("open").state == S.ONGOING  # an open transaction never expires
    assert h.tc.describe("recent") is not None
    assert _last_value(h, "idle-empty") is None and _last_value(h, "idle-done") is None
    assert h.tc.expire_transactional_ids() == 0

    reloaded = Harness(h.rm)  # the tombstones hold through a load
    assert reloaded.tc.describe("idle-done") is None
    assert reloaded.tc.describe("open").state == S.ONGOING
    code, pid, epoch = h.init("idle-done")  # a new id from the broker's block, epoch 0
    assert code == 0 and epoch == 0 and pid not in (p_empty, p_done, p_open)
    assert h.tc.describe("idle-done").producer_id == pid


def test_a_failed_tombstone_write_keeps_the_id() -> None:
    h = Harness()
    _, pid, _ = h.init("keep")
    h.now += h.tc.settings.id_expiration_ms
    h.rm.fail_with = int(E.NOT_LEADER_OR_FOLLOWER)
    assert h.tc.expire_transactional_ids() == 1
    h.rm.fail_with = 0
    md = h.tc.describe("keep")
    assert md is not None and md.producer_id == pid
    assert h.init("keep") == (0, pid, 1)  # not left pending
