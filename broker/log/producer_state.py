"""Per-partition producer state for idempotent producers (Kafka's ProducerStateManager).

For each producer id the log keeps its epoch and its last 5 batches (sequence range and offset
range). A leader checks an idempotent batch against it before appending:

- the same sequence range as one of the 5 kept batches: a retry of a batch that is already in
  the log; the append answers with that batch's offsets and writes nothing;
- otherwise the first sequence must follow the last one kept (sequences wrap past 2^31-1 to 0);
  a gap or a step back is OUT_OF_ORDER_SEQUENCE_NUMBER;
- an epoch below the kept one is INVALID_PRODUCER_EPOCH (a fenced producer); a new, higher
  epoch starts again at sequence 0;
- an unknown producer id must start at sequence 0, else UNKNOWN_PRODUCER_ID (its state is gone,
  e.g. retention deleted its batches: the producer starts over with a new id).

A request may carry several consecutive batches of one producer for a partition (`check_run`):
they are appended whole, so a retry of the same batches is recognised by its last one.

Leaders, followers (as they replicate) and a restarted broker all derive the state from the
log's batch headers, so it follows the log through restarts and leader changes. The Log builds
it lazily the first time an idempotent batch needs it, from its latest snapshot and the batch
headers after it (or from every header when there is none), and drops it when the log is
truncated (rebuilt on next use). While loaded, a snapshot is written at each segment roll
(`<offset>.snapshot`: the state of every batch below that offset, as Kafka's), so a restart
scans only the active segment; the latest two are kept, those past a truncation point are
deleted, and a damaged one is skipped (an older one or a full scan serves). Not thread-safe:
the Log's LogProducers (log_producers.py) calls it under the log's lock.

Transactions (KIP-98): a producer's first transactional batch since its last marker opens its
ongoing transaction (`txn_first_offset`); its COMMIT or ABORT marker (a control batch,
client/records/control.py) closes it. The first unstable offset is the smallest first offset of
an ongoing transaction, or of a completed one whose marker the high watermark has not passed
yet (Kafka's unreplicated transactions): the last stable offset (LSO) is the smaller of it and
the high watermark. An ABORT marker adds an entry to the aborted-transaction index
(txn_index.py). The snapshot keeps each producer's ongoing transaction.

Expiry (`remove_expired`, Kafka's `producer.id.expiration.ms`, KIP-854): a producer with no
open transaction whose last timestamp is at least `producer_id_expiration_ms` old is dropped,
by a periodic check (LogManager.remove_expired_producers) and when the state is built (so a
snapshot or a rebuild does not bring it back). Its next batch is then a new producer's: sequence
0 or UNKNOWN_PRODUCER_ID (the idempotent client starts again under a new producer id).

DescribeProducers (`describe`): each producer's epoch, last sequence, last timestamp (the max
timestamp of its latest batch or marker, kept in the snapshot too), coordinator epoch and the
first offset of its open transaction.
"""

from __future__ import annotations

import collections
import itertools
import logging
import os
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import msgpack

from client.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    OutOfOrderSequenceNumberError,
    TransactionCoordinatorFencedError,
    UnknownProducerIdError,
)
from client.records.control import Marker
from client.records.header import CONTROL_BIT, TRANSACTIONAL_BIT, BatchHeader, seq_add

if TYPE_CHECKING:
    pass

_log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOTS_KEPT = 2
BATCHES_KEPT = 5  # Kafka's: max.in.flight.requests.per.connection up to 5 keeps order
_new = tuple.__new__


class BatchEntry(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


class CompletedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # its marker's offset
    aborted: bool


class ProducerEntry:
    __slots__ = ("epoch", "batches", "txn_first_offset", "coordinator_epoch", "last_timestamp")

    def __init__(
        self,
        epoch: int,
        txn_first_offset: int = -1,
        coordinator_epoch: int = -1,
        last_timestamp: int = -1,
    ) -> None:
        self.epoch = epoch
        self.batches: collections.deque[BatchEntry] = collections.deque(maxlen=BATCHES_KEPT)
        self.txn_first_offset = txn_first_offset  # -1: no ongoing transaction
        self.coordinator_epoch = coordinator_epoch  # of the latest marker (-1: none)
        # max timestamp of its latest batch or marker (-1: unknown: from an older snapshot)
        self.last_timestamp = last_timestamp

    @property
    def last_sequence(self) -> int:
        """The last sequence of its latest batch; -1 when none since its epoch began."""
        return self.batches[-1].last_seq if self.batches else -1


class ProducerInfo(NamedTuple):
    """One row of DescribeProducers (Kafka's ProducerState)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        # completed transactions (first, marker offset) until the high watermark passes the marker
        self.unreplicated: list[tuple[int, int]] = []

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset of an undecided transaction as seen at `high_watermark` (ongoing,
        or decided by a marker the HW has not passed); None when there is none. Forgets the
        completed transactions whose marker is below `high_watermark`."""
        if self.unreplicated:
            self.unreplicated = [t for t in self.unreplicated if t[1] >= high_watermark]
        firsts = [t[0] for t in self.unreplicated]
        if self.ongoing:
            firsts.append(min(self.ongoing.values()))
        return min(firsts) if firsts else None

    def check_marker(self, h: BatchHeader, coordinator_epoch: int, where: str = "") -> None:
        """Leader, before appending a marker: INVALID_PRODUCER_EPOCH for an epoch older than
        the producer's, TRANSACTION_COORDINATOR_FENCED for a coordinator epoch older than the
        producer's last marker's (Kafka's checks)."""
        e = self.producers.get(h.producer_id)
        if e is None:
            return
        if h.producer_epoch < e.epoch:
            raise InvalidProducerEpochError(
                f"{where}marker of producer {h.producer_id} epoch {h.producer_epoch} is fenced "
                f"by epoch {e.epoch}"
            )
        if coordinator_epoch < e.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"{where}marker of producer {h.producer_id} from coordinator epoch "
                f"{coordinator_epoch}, older than {e.coordinator_epoch}"
            )

    def __len__(self) -> int:
        return len(self.producers)

    def check(self, h: BatchHeader, where: str = "") -> BatchEntry | None:
        """Leader, before appending the idempotent batch `h`: its earlier append (a duplicate:
        answer with those offsets, append nothing) or None (append it). Raises
        OutOfOrderSequenceNumberError, InvalidProducerEpochError, UnknownProducerIdError."""
        pid, epoch, first = h.producer_id, h.producer_epoch, h.base_sequence
        last = seq_add(first, h.last_offset_delta)
        e = self.producers.get(pid)
        if e is None:
            if first != 0:
                raise UnknownProducerIdError(
                    f"{where}producer {pid} is not known here (its state is gone) and its batch "
                    f"starts at sequence {first}, not 0"
                )
            return None
        if epoch < e.epoch:
            raise InvalidProducerEpochError(
                f"{where}producer {pid} epoch {epoch} is fenced by epoch {e.epoch}"
            )
        if epoch > e.epoch:
            if first != 0:
                raise OutOfOrderSequenceNumberError(
                    f"{where}producer {pid}: a new epoch {epoch} starts at sequence 0, not {first}"
                )
            return None
        for b in e.batches:
            if b.first_seq == first and b.last_seq == last:
                return b
        expected = seq_add(e.batches[-1].last_seq, 1) if e.batches else 0
        if first != expected:
            raise OutOfOrderSequenceNumberError(
                f"{where}producer {pid} epoch {epoch}: sequence {first}, expected {expected}"
            )
        return None

    def check_run(self, hs: list[BatchHeader], where: str = "") -> tuple[int, int] | None:
        """Leader, before appending the batches one produce request carries for a partition.
        They must be of one producer and epoch with consecutive sequences (INVALID_RECORD
        otherwise). Returns the (first, last) offsets of their earlier append when the request
        is a retry (its last batch is one of the kept ones: the request was appended whole, so
        its offsets end there), else None once the first batch passed `check`. A request only
        partly appended before (its first batch a duplicate, its last not) is refused with
        OUT_OF_ORDER_SEQUENCE_NUMBER."""
        first = hs[0]
        if len(hs) == 1:
            dup = self.check(first, where)
            return None if dup is None else (dup.first_offset, dup.last_offset)
        for prev, h in itertools.pairwise(hs):
            if (
                h.producer_id != first.producer_id
                or h.producer_epoch != first.producer_epoch
                or h.base_sequence != seq_add(prev.base_sequence, prev.last_offset_delta + 1)
            ):
                raise InvalidRecordError(
                    f"{where}the batches of one request must be of one producer and epoch with "
                    f"consecutive sequences"
                )
        last = hs[-1]
        e = self.producers.get(first.producer_id)
        if e is not None and e.epoch == first.producer_epoch:
            last_seq = seq_add(last.base_sequence, last.last_offset_delta)
            for b in e.batches:
                if b.first_seq == last.base_sequence and b.last_seq == last_seq:
                    total = sum(h.last_offset_delta + 1 for h in hs)
                    return b.last_offset - total + 1, b.last_offset
        if self.check(first, where) is not None:
            raise OutOfOrderSequenceNumberError(
                f"{where}producer {first.producer_id}: the batches from sequence "
                f"{first.base_sequence} were only partly appended before"
            )
        return None

    def update(
        self, h: BatchHeader, first_offset: int, marker: Marker | None = None
    ) -> CompletedTxn | None:
        """Record the batch `h`, appended at `first_offset` (leader, follower or a rebuild);
        `marker` is the content of a control batch. Returns the transaction a marker ended."""
        pid = h.producer_id
        if pid < 0:
            return None
        e = self.producers.get(pid)
        if e is None:
            e = self.producers[pid] = ProducerEntry(h.producer_epoch)
        elif h.producer_epoch > e.epoch:  # a new epoch: the open transaction stays open
            e = self.producers[pid] = ProducerEntry(
                h.producer_epoch, e.txn_first_offset, e.coordinator_epoch
            )
        elif h.producer_epoch < e.epoch:
            return None  # (a fenced producer's batch, replicated before the fencing)
        e.last_timestamp = h.max_timestamp
        if h.attributes & CONTROL_BIT:
            if marker is None:
                return None
            e.coordinator_epoch = marker.coordinator_epoch
            first = e.txn_first_offset
            if first < 0:
                return None  # a marker with no transaction open here: nothing to close
            e.txn_first_offset = -1
            del self.ongoing[pid]
            self.unreplicated.append((first, first_offset))
            return CompletedTxn(pid, first, first_offset, not marker.commit)
        if h.attributes & TRANSACTIONAL_BIT and e.txn_first_offset < 0:
            e.txn_first_offset = first_offset
            self.ongoing[pid] = first_offset
        seq, delta = h.base_sequence, h.last_offset_delta
        last = seq_add(seq, delta)
        # BatchEntry(...) without its Python-level __new__ (once per append)
        e.batches.append(_new(BatchEntry, (seq, last, first_offset, first_offset + delta)))
        return None

    def remove_expired(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Drop the producers with no open transaction whose last timestamp is at least
        `expiration_ms` before `now_ms` (Kafka's isProducerExpired; one whose last timestamp
        is unknown, -1, counts as that old). Returns their ids."""
        gone = [
            pid
            for pid, e in self.producers.items()
            if e.txn_first_offset < 0 and now_ms - e.last_timestamp >= expiration_ms
        ]
        for pid in gone:
            del self.producers[pid]
        return gone

    def describe(self) -> list[ProducerInfo]:
        """Every producer this state holds, by producer id (DescribeProducers)."""
        return [
            ProducerInfo(
                pid,
                e.epoch,
                e.last_sequence,
                e.last_timestamp,
                e.coordinator_epoch,
                e.txn_first_offset,
            )
            for pid, e in sorted(self.producers.items())
        ]

    @classmethod
    def from_headers(cls, headers: Iterable[BatchHeader]) -> ProducerStateManager:
        """The state a log's batch headers (oldest first) give."""
        state = cls()
        for h in headers:
            state.update(h, h.base_offset)
        return state

    def to_bytes(self) -> bytes:
        """msgpack of {producer id: [epoch, [[first_seq, last_seq, first_offset, last_offset]],
        txn_first_offset, coordinator_epoch, last_timestamp]}, followed by its CRC-32. (A
        snapshot written before transactions has the first two only, one written before
        DescribeProducers the first four: its producers' last_timestamp is -1 until their next
        batch. A broker older than that reads this snapshot as damaged and scans the log.)"""
        body: bytes = msgpack.packb(
            {
                pid: [
                    e.epoch,
                    [list(b) for b in e.batches],
                    e.txn_first_offset,
                    e.coordinator_epoch,
                    e.last_timestamp,
                ]
                for pid, e in self.producers.items()
            }
        )
        return body + zlib.crc32(body).to_bytes(4, "big")

    @classmethod
    def from_bytes(cls, data: bytes) -> ProducerStateManager:
        """The state `to_bytes` wrote; ValueError when the bytes are damaged."""
        body, crc = data[:-4], data[-4:]
        if len(data) < 5 or zlib.crc32(body).to_bytes(4, "big") != crc:
            raise ValueError("bad CRC")
        state = cls()
        for pid, (epoch, batches, *txn) in msgpack.unpackb(body, strict_map_key=False).items():
            e = state.producers[int(pid)] = ProducerEntry(int(epoch), *map(int, txn))
            e.batches.extend(BatchEntry(*map(int, b)) for b in batches)
            if e.txn_first_offset >= 0:
                state.ongoing[int(pid)] = e.txn_first_offset
        return state


def _snapshots(directory: Path) -> list[tuple[int, Path]]:
    out = []
    for path in directory.glob("*" + SNAPSHOT_SUFFIX):
        stem = path.name[: -len(SNAPSHOT_SUFFIX)]
        if len(stem) == 20 and stem.isdigit():
            out.append((int(stem), path))
    return sorted(out)


def write_snapshot(directory: Path, offset: int, state: ProducerStateManager) -> None:
    """`<offset>.snapshot` (written whole, then renamed), keeping the latest SNAPSHOTS_KEPT.
    Best effort: a failure is logged (a later build scans more of the log)."""
    path = directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_bytes(state.to_bytes())
        os.replace(tmp, path)
        for _off, old in _snapshots(directory)[:-SNAPSHOTS_KEPT]:
            old.unlink(missing_ok=True)
    except OSError as exc:
        _log.warning("%s: producer-state snapshot at %d not written: %s", directory, offset, exc)


def delete_snapshots_after(directory: Path, end: int) -> None:
    """Drop the snapshots of states past `end` (the log was truncated there)."""
    for off, path in _snapshots(directory):
        if off > end:
            path.unlink(missing_ok=True)


def latest_snapshot(directory: Path, end: int) -> tuple[int, ProducerStateManager] | None:
    """(offset, state) of the newest readable snapshot at or below `end`, or None."""
    for off, path in reversed(_snapshots(directory)):
        if off > end:
            continue
        try:
            return off, ProducerStateManager.from_bytes(path.read_bytes())
        except (OSError, ValueError, msgpack.UnpackException, TypeError) as exc:
            _log.warning("%s: skipping damaged producer-state snapshot: %s", path, exc)
    return None
