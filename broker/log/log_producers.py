"""LogProducers: one Log's producer state (producer_state.py's ProducerStateManager) and its
aborted-transaction index (txn_index.py), as the log uses them: built lazily from the latest
snapshot and the batch headers after it, kept up to date by the appends, snapshotted at each
roll, dropped by a truncation, expired (`producer.id.expiration.ms`), and asked for the last
stable offset. The rules themselves are producer_state.py's; this module owns their place in
the log. Called under the log's lock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from client.errors import CorruptRecordError, InvalidProducerEpochError, InvalidRecordError
from client.records.control import Marker, parse_marker
from client.records.header import CONTROL_BIT, TRANSACTIONAL_BIT, BatchHeader

from .producer_state import (
    CompletedTxn,
    ProducerInfo,
    ProducerStateManager,
    delete_snapshots_after,
    latest_snapshot,
    write_snapshot,
)
from .txn_index import AbortedTxn, AbortedTxnIndex

if TYPE_CHECKING:
    from .log import Log
    from .segment import LogSegment

_log = logging.getLogger(__name__)


class LogProducers:
    """The producer state of one Log (held by it as `log.producers`): built lazily from the
    log's latest snapshot and the batch headers after it, kept up to date by the appends,
    snapshotted at each roll, dropped by a truncation. It also holds the log's
    aborted-transaction index (loaded on first use). Called under the log's lock."""

    def __init__(self, log: Log, clock: Callable[[], int]) -> None:
        self._log = log
        self._clock = clock  # wall-clock ms, against the producers' last timestamps
        self._state: ProducerStateManager | None = None  # built on first use
        self._aborted: AbortedTxnIndex | None = None  # loaded on first use

    @property
    def loaded(self) -> bool:
        return self._state is not None

    def aborted_index_locked(self) -> AbortedTxnIndex:
        """The aborted-transaction index, loaded on first use (StorageError when its file
        cannot be read or rewritten: the log goes offline)."""
        if self._aborted is None:
            log = self._log
            index = log.guard(AbortedTxnIndex, log.directory)
            log.guard(index.truncate_to, log.end_offset)  # (markers a recovery cut off)
            log.guard(index.drop_below, log.log_start_offset)
            self._aborted = index
        return self._aborted

    def state_locked(self) -> ProducerStateManager:
        """The producer state, built from the batch headers when first needed."""
        if self._state is None:
            log = self._log
            snap = latest_snapshot(log.directory, log.end_offset)
            start, state = snap if snap is not None else (0, ProducerStateManager())
            for seg in log.segments:
                if seg.next_offset > start:
                    for h in log.guard(lambda s=seg: list(s.headers())):
                        if h.base_offset >= start:
                            marker = None
                            if h.attributes & CONTROL_BIT:  # (rare: read its record)
                                marker = self._read_marker(seg, h)
                            self._completed(state, state.update(h, h.base_offset, marker))
            self._state = state
            self._expire_locked(state)
            if state:
                _log.info(
                    "%s producer state of %d producers rebuilt from %s",
                    log.prefix,
                    len(state),
                    f"the snapshot at {start} and the log after it" if snap else "the log",
                )
        return self._state

    def _read_marker(self, seg: LogSegment, h: BatchHeader) -> Marker | None:
        found = self._log.guard(seg.find, h.base_offset)
        if found is None:
            return None
        pos, _h = found
        return self._marker(h, self._log.guard(seg.read, pos, pos + h.size), 0)

    def _marker(
        self, h: BatchHeader, buf: bytes | bytearray | memoryview, pos: int
    ) -> Marker | None:
        try:
            return parse_marker(h, buf, pos)
        except CorruptRecordError as exc:  # (written by a leader: never, unless damaged)
            _log.error("%s ignoring a control batch: %s", self._log.prefix, exc)
            return None

    def _completed(self, state: ProducerStateManager, done: CompletedTxn | None) -> None:
        if done is not None and done.aborted:
            first_unstable = min(state.ongoing.values(), default=done.last_offset + 1)
            self._log.guard(
                self.aborted_index_locked().add,
                AbortedTxn(done.producer_id, done.first_offset, done.last_offset, first_unstable),
            )

    def check_locked(
        self,
        buf: bytes | bytearray | memoryview,
        headers: list[tuple[int, BatchHeader]],
        control: bool,
        coordinator: bool = False,
    ) -> tuple[int, int] | None:
        """On the leader. `coordinator`: transactional batches the group coordinator writes
        for TxnOffsetCommit (no sequence numbers, Kafka's AppendOrigin.COORDINATOR): the
        producer's epoch is checked (InvalidProducerEpochError), its sequences are not. Client batches (`control` False): none may be a control batch
        (INVALID_RECORD), a transactional one needs a producer id; idempotence: the (first,
        last) offsets of the earlier append when the batches are a retry, else None. A marker
        (`control`: one control batch, WriteTxnMarkers): Kafka's epoch checks."""
        prefix = f"{self._log.prefix} "
        if control:
            if len(headers) != 1 or not headers[0][1].attributes & CONTROL_BIT:
                raise InvalidRecordError(f"{prefix}a marker is one control batch")
            pos, h = headers[0]
            marker = parse_marker(h, buf, pos)
            self.state_locked().check_marker(h, marker.coordinator_epoch, prefix)
            return None
        if coordinator:
            for _pos, h in headers:
                e = self.state_locked().producers.get(h.producer_id)
                if e is not None and h.producer_epoch < e.epoch:
                    raise InvalidProducerEpochError(
                        f"{prefix}producer {h.producer_id} epoch {h.producer_epoch} is fenced "
                        f"by epoch {e.epoch}"
                    )
            return None
        hs = [h for _pos, h in headers]
        for h in hs:
            if h.attributes & (CONTROL_BIT | TRANSACTIONAL_BIT):
                if h.attributes & CONTROL_BIT:
                    raise InvalidRecordError(
                        f"{prefix}control batches are written by transaction markers only"
                    )
                if h.producer_id < 0:
                    raise InvalidRecordError(f"{prefix}a transactional batch needs a producer id")
        if any(h.producer_id >= 0 for h in hs):
            return self.state_locked().check_run(hs, prefix)  # (one batch: its own short path)
        return None

    def appended_locked(
        self,
        buf: bytes | bytearray | memoryview,
        headers: list[tuple[int, BatchHeader]],
        bases: list[tuple[Any, ...]] | None = None,
    ) -> None:
        """The batches of `buf` were appended, each at the first offset of its `bases` entry
        (a leader's), or at its own base offset (None: a follower's)."""
        state = self._state
        if state is None:
            return  # (a rebuild scans these batches: every snapshot is older)
        for i, (pos, h) in enumerate(headers):
            base = h.base_offset if bases is None else bases[i][0]
            marker = self._marker(h, buf, pos) if h.attributes & CONTROL_BIT else None
            self._completed(state, state.update(h, base, marker))

    # -- transactions: these take the log's lock (any thread but an event loop) --------------

    def last_stable_offset(self, high_watermark: int) -> int:
        """min(`high_watermark`, the first offset of an undecided transaction). The first call
        builds the producer state (a scan of the log after its latest snapshot)."""
        with self._log.lock:
            return self.last_stable_offset_locked(high_watermark)

    def aborted_transactions(self, fetch_offset: int, upper_offset: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [fetch_offset, upper_offset) (marker at or
        after `fetch_offset`, first offset below `upper_offset`): what a read_committed fetch
        of that range returns with its records, as (producer id, first offset)."""
        with self._log.lock:
            return self.aborted_index_locked().collect(fetch_offset, upper_offset)

    def high_watermark_moved(self, high_watermark: int) -> None:
        """The partition's HW moved: completed transactions below it stop counting as unstable.
        Cheap when the producer state is not loaded or holds none."""
        state = self._state
        if state is not None and state.unreplicated:
            with self._log.lock:
                self.high_watermark_moved_locked(high_watermark)

    def last_stable_offset_locked(self, high_watermark: int) -> int:
        """min(high watermark, first unstable offset)."""
        first = self.state_locked().first_unstable_offset(high_watermark)
        return high_watermark if first is None else min(first, high_watermark)

    def high_watermark_moved_locked(self, high_watermark: int) -> None:
        """Forget the completed transactions whose marker is now below the HW."""
        if self._state is not None and self._state.unreplicated:
            self._state.first_unstable_offset(high_watermark)

    def remove_expired(self, now_ms: int | None = None) -> int:
        """Drop the producers idle for `producer_id_expiration_ms` with no open transaction
        (`now_ms`: the log's clock when None). Nothing when the state is not built (its build
        expires them). Returns how many went. Any thread but an event loop."""
        if self._state is None:
            return 0
        with self._log.lock:
            state = self._state
            return 0 if state is None else self._expire_locked(state, now_ms)

    def _expire_locked(self, state: ProducerStateManager, now_ms: int | None = None) -> int:
        expiration_ms = self._log.config.producer_id_expiration_ms
        now = self._clock() if now_ms is None else now_ms
        gone = state.remove_expired(now, expiration_ms)
        if gone:
            _log.info(
                "%s producer state of %d producer(s) expired (no write for %d ms): %s",
                self._log.prefix,
                len(gone),
                expiration_ms,
                ", ".join(map(str, gone[:10])) + (" ..." if len(gone) > 10 else ""),
            )
        return len(gone)

    def describe(self) -> list[ProducerInfo]:
        """The producers of this log (DescribeProducers); builds the state on first use."""
        with self._log.lock:
            return self.state_locked().describe()

    def first_unstable_offset_locked(self, high_watermark: int) -> int | None:
        """The first offset of a transaction open, or decided by a marker at or past
        `high_watermark`; None when there is none."""
        return self.state_locked().first_unstable_offset(high_watermark)

    def first_uncleanable_locked(self, upper_bound: int) -> int | None:
        """For the cleaner, whose `upper_bound` is at most the high watermark: the first
        offset of a transaction open, or decided by a marker at or past the bound; None."""
        return self.state_locked().first_unstable_offset(upper_bound)

    def rolled_locked(self, offset: int) -> None:
        """A segment was rolled at `offset`: a restart then scans only from there."""
        if self._state is not None:
            if self._aborted is not None:  # the entries below the snapshot are durable first
                self._log.guard(self._aborted.sync)
            write_snapshot(self._log.directory, offset, self._state)

    def truncated_locked(self, end: int) -> None:
        """The log was truncated to `end`: rebuilt from what is left on next use."""
        self._state = None
        delete_snapshots_after(self._log.directory, end)
        self._log.guard(self.aborted_index_locked().truncate_to, end)

    def start_advanced_locked(self, start: int) -> None:
        """The log start moved to `start`: index entries wholly below it go."""
        self._log.guard(self.aborted_index_locked().drop_below, start)
