"""The transaction state machine of one transactional id: pure, no I/O, no clock (times come in).

    Empty ──add──▶ Ongoing ──end(commit)──▶ PrepareCommit ──markers written──▶ CompleteCommit
      ▲               │ ╲──end(abort), timeout, init──▶ PrepareAbort ──markers──▶ CompleteAbort
      │               └──add (more partitions)──▶ Ongoing
      └── init (epoch + 1) from Empty / CompleteCommit / CompleteAbort; add from Complete*
          starts the next transaction (Ongoing)

Each function takes the current `TxnMetadata` (None: the id is unknown) and returns a
`Transition`: the metadata to write to `__transaction_state` (None: nothing to write) and the
error code to answer. The coordinator (broker/txn/coordinator.py) writes, then answers, then
(for Prepare*) sends the markers and writes Complete*. While a write or the markers of an id
are in flight the coordinator answers CONCURRENT_TRANSACTIONS itself (Kafka's pendingState).

Fencing: `init` bumps the epoch; the previous producer's requests then get PRODUCER_FENCED
(its epoch is older) and the partitions refuse its batches once the markers carry the new
epoch. An Ongoing transaction seen by `init` or by the timeout is aborted with the epoch
already bumped (Kafka writes PrepareEpochFence first; Gregor goes to PrepareAbort in the same
write; docs/decisions.md). PrepareEpochFence and Dead exist for the log format only.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import IntEnum

from client.errors import ErrorCode

TP = tuple[str, int]
MAX_EPOCH = 32767  # Short.MAX_VALUE: an epoch at MAX_EPOCH - 1 takes a new producer id on init


class TxnState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return "".join(w.capitalize() for w in self.name.split("_"))


PREPARED = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
COMPLETED = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


@dataclass(frozen=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TP] = frozenset()
    start_ms: int = -1  # when the current transaction began (Ongoing), else -1
    update_ms: int = -1

    @property
    def committing(self) -> bool:
        return self.state in (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT)


@dataclass(frozen=True)
class Transition:
    error: int = 0
    write: TxnMetadata | None = None
    message: str | None = None

    @property
    def ok(self) -> bool:
        return self.error == 0


def _refuse(code: ErrorCode, message: str) -> Transition:
    return Transition(int(code), None, message)


def check_producer(md: TxnMetadata | None, tid: str, pid: int, epoch: int) -> Transition | None:
    """The error for a request naming (pid, epoch) against `md`, else None."""
    if md is None or md.producer_id != pid:
        return _refuse(
            ErrorCode.INVALID_PRODUCER_ID_MAPPING,
            f"transactional id {tid} is not mapped to producer id {pid}",
        )
    if epoch != md.producer_epoch:
        return _refuse(
            ErrorCode.PRODUCER_FENCED,
            f"producer epoch {epoch} of {tid} is fenced (current epoch {md.producer_epoch})",
        )
    return None


def init(
    md: TxnMetadata | None, tid: str, new_pid: int | None, timeout_ms: int, now_ms: int
) -> Transition:
    """InitProducerId. `new_pid`: a fresh producer id when the caller has one (needed when `md`
    is None or its epoch is exhausted: `needs_new_pid`)."""
    if md is None:
        assert new_pid is not None
        return Transition(write=TxnMetadata(tid, new_pid, 0, timeout_ms, TxnState.EMPTY,
                                            frozenset(), -1, now_ms))  # fmt: skip
    if md.state in PREPARED:
        return _refuse(ErrorCode.CONCURRENT_TRANSACTIONS,
                       f"transaction of {tid} is being ended ({md.state.kafka_name})")  # fmt: skip
    if md.state in (TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE):
        # fence the old producer and abort its transaction; the client retries
        t = abort(md, now_ms, bump_epoch=True)
        return Transition(int(ErrorCode.CONCURRENT_TRANSACTIONS), t.write,
                          f"aborting the open transaction of {tid} (epoch {md.producer_epoch})")  # fmt: skip
    if md.state == TxnState.DEAD:
        return _refuse(ErrorCode.CONCURRENT_TRANSACTIONS, f"transactional id {tid} is expiring")
    if needs_new_pid(md):
        assert new_pid is not None
        return Transition(write=replace(md, producer_id=new_pid, producer_epoch=0,
                                        timeout_ms=timeout_ms, state=TxnState.EMPTY,
                                        partitions=frozenset(), start_ms=-1, update_ms=now_ms))  # fmt: skip
    return Transition(write=replace(md, producer_epoch=md.producer_epoch + 1,
                                    timeout_ms=timeout_ms, state=TxnState.EMPTY,
                                    partitions=frozenset(), start_ms=-1, update_ms=now_ms))  # fmt: skip


def needs_new_pid(md: TxnMetadata | None) -> bool:
    """Whether `init` needs a fresh producer id: an unknown id, or an epoch that cannot be bumped."""
    if md is None:
        return True
    return md.state in COMPLETED and md.producer_epoch >= MAX_EPOCH - 1


def add_partitions(
    md: TxnMetadata | None, tid: str, pid: int, epoch: int, tps: frozenset[TP], now_ms: int
) -> Transition:
    """AddPartitionsToTxn: Ongoing with `tps` added (nothing to write when all are in)."""
    bad = check_producer(md, tid, pid, epoch)
    if bad is not None:
        return bad
    assert md is not None
    if md.state in PREPARED:
        return _refuse(ErrorCode.CONCURRENT_TRANSACTIONS,
                       f"transaction of {tid} is being ended ({md.state.kafka_name})")  # fmt: skip
    if md.state in (TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE):
        return _refuse(ErrorCode.INVALID_TXN_STATE, f"{tid} is {md.state.kafka_name}")
    if md.state == TxnState.ONGOING:
        if tps <= md.partitions:
            return Transition()
        return Transition(write=replace(md, partitions=md.partitions | tps, update_ms=now_ms))
    return Transition(write=replace(md, state=TxnState.ONGOING, partitions=tps,
                                    start_ms=now_ms, update_ms=now_ms))  # fmt: skip


def end(md: TxnMetadata | None, tid: str, pid: int, epoch: int, commit: bool,
        now_ms: int) -> Transition:  # fmt: skip
    """EndTxn: Ongoing -> PrepareCommit / PrepareAbort. A retry of the same outcome answers
    NONE (Complete*) or CONCURRENT_TRANSACTIONS (Prepare*); the other outcome INVALID_TXN_STATE."""
    bad = check_producer(md, tid, pid, epoch)
    if bad is not None:
        return bad
    assert md is not None
    want = "commit" if commit else "abort"
    s = md.state
    if s == TxnState.ONGOING:
        if commit:
            return Transition(write=replace(md, state=TxnState.PREPARE_COMMIT, update_ms=now_ms))
        return abort(md, now_ms, bump_epoch=False)
    if s == (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT):
        return Transition()  # a retry of an EndTxn that completed
    if s == (TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT):
        return _refuse(ErrorCode.CONCURRENT_TRANSACTIONS,
                       f"the {want} of {tid} is being completed")  # fmt: skip
    return _refuse(ErrorCode.INVALID_TXN_STATE,
                   f"cannot {want} the transaction of {tid}: it is {s.kafka_name}")  # fmt: skip


def abort(md: TxnMetadata, now_ms: int, bump_epoch: bool) -> Transition:
    """Ongoing -> PrepareAbort, with the epoch bumped when the producer is being fenced (init by
    a new producer, the coordinator's timeout)."""
    assert md.state in (TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE), md.state
    epoch = md.producer_epoch
    if bump_epoch and epoch < MAX_EPOCH - 1:
        epoch += 1
    return Transition(write=replace(md, producer_epoch=epoch, state=TxnState.PREPARE_ABORT,
                                    update_ms=now_ms))  # fmt: skip


def timed_out(md: TxnMetadata, now_ms: int) -> bool:
    """An Ongoing transaction open longer than its timeout (the coordinator aborts it)."""
    return (
        md.state in (TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE)
        and md.start_ms >= 0
        and now_ms > md.start_ms + md.timeout_ms
    )


def expired(md: TxnMetadata, now_ms: int, expiration_ms: int) -> bool:
    """An id whose transactional.id.expiration.ms has passed: Empty or Complete* (Kafka's
    isExpirationAllowed) and not updated for `expiration_ms` (its tombstone is written)."""
    return md.state in COMPLETED and md.update_ms <= now_ms - expiration_ms


def complete(md: TxnMetadata, now_ms: int) -> TxnMetadata:
    """Prepare* -> Complete* once every partition has its marker; the partitions are cleared."""
    assert md.state in PREPARED, md.state
    state = TxnState.COMPLETE_COMMIT if md.committing else TxnState.COMPLETE_ABORT
    return replace(md, state=state, partitions=frozenset(), start_ms=-1, update_ms=now_ms)
