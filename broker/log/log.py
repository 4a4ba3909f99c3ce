"""Log: one partition replica's append-only sequence of segments on disk.

Directory `<log_dir>/<topic>-<partition>/` holds `<base_offset:020d>.log|.index|.timeindex`
segments (formats in segment.py and index.py) and `leader-epoch-checkpoint` (epoch_cache.py).
The log start offset is persisted by the LogManager in the log-dir root checkpoint
(`on_log_start_offset_changed` tells it when to write).

The Log owns the segment list (segments, their base offsets, the log start offset, the
truncation generation) and the appends, reads and truncation over it. Four objects it holds
work on it through a narrow interface (the "segment list" section below, and `advance_start`,
`splice_locked`, `delete_segment_locked`), each with its own state: `durability`
(durability.py: what is unflushed, the flushed offset, the flush and the flusher's
covered-flush protocol), `retention` (retention.py: the time and size policy, DeleteRecords),
`compaction` (compaction.py: the cleaner checkpoint and the swap of cleaned segments) and
`producers` (log_producers.py over producer_state.py: the idempotent producers' state).

Threads: every public method may be called from any thread (I/O workers, the replica fetcher,
the flusher); never from an event loop (they do file I/O). `lock` serialises appends, reads,
truncation, retention and the compaction swap; a flush holds it only to collect what to fsync,
and fsyncs dup'ed fds outside it, so appends go on during a group commit.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from client.errors import (
    OffsetOutOfRangeError,
    StorageError,
)
from client.fsutil import make_dirs
from client.records.header import LOG_OVERHEAD, PREFIX_EPOCH

from .batches import (
    AppendInfo,
    ReadResult,
    TimestampOffset,
    UnexpectedAppendOffsetError,
    validate_batches,
)
from .compaction import LogCompaction, check_keys
from .config import LogConfig
from .durability import LogDurability
from .epoch_cache import LeaderEpochCache
from .handles import FileHandles, fd_limit_error, is_fd_limit
from .log_producers import LogProducers
from .recovery import load_segments
from .retention import LogRetention
from .segment import LogSegment

_log = logging.getLogger(__name__)

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
_MAX_RELATIVE = (1 << 32) - 1
T = TypeVar("T")
_new = tuple.__new__  # a NamedTuple without its Python-level __new__ (AppendInfo per append)
_pack_prefix = PREFIX_EPOCH.pack_into


def _now_ms() -> int:
    return int(time.time() * 1000)


class Log:
    """A partition log. Opening runs recovery (see recovery.py) when `clean` is False."""

    def __init__(
        self,
        directory: Path | str,
        topic: str,
        partition: int,
        config: LogConfig,
        clock: Callable[[], int] = _now_ms,
        *,
        recovery_point: int = 0,
        log_start_offset: int | None = None,
        clean: bool = True,
        on_storage_error: Callable[[Log, OSError], None] | None = None,
        on_log_start_offset_changed: Callable[[Log], None] | None = None,
        on_truncated: Callable[[Log], None] | None = None,
        handles: FileHandles | None = None,
        flush_recovered: bool = True,
        log_dir: Path | None = None,
    ) -> None:
        """`flush_recovered=False` (the LogManager, which flushes many recovered logs in
        parallel): after an unclean open the recovered data is left for the caller to
        flush(); until then the flushed offset stays at the recovery point."""
        self.directory = Path(directory)
        # the cache of open segment descriptors (the log dir's; a private one when alone)
        self._handles = handles or FileHandles(64, str(directory))
        # the log.dirs entry (a hot dict key): the manager's own Path object, so lookups are
        # identity hits (a Path built here compared equal through pathlib's Python __eq__,
        # ~2 calls per append)
        self.log_dir = log_dir if log_dir is not None else self.directory.parent
        self.topic = topic
        self.partition = partition
        self.config = config
        self._clock = clock
        self._on_storage_error = on_storage_error
        self._on_lso_changed = on_log_start_offset_changed
        self._on_truncated = on_truncated
        self.lock = threading.Lock()
        self._offline = False
        self._closed = False
        self._opened = False  # truncation during the open reports nothing
        self._generation = 0  # bumped by truncation: a flush or swap that spans it does not count
        self.prefix = f"[{topic}-{partition}]"
        self.producers = LogProducers(self, clock)
        self.durability = LogDurability(self, clock)
        self.retention = LogRetention(self, clock)
        self.compaction = LogCompaction(self, clock, self._handles)
        make_dirs(self.directory)
        now = clock()
        self._segments: list[LogSegment] = load_segments(
            self.directory, config, now, recovery_point, clean, self.prefix, self._handles
        )
        if not self._segments:
            start = log_start_offset or 0
            self._segments.append(LogSegment(self.directory, start, config, now, self._handles))
            self.durability.mark_dir_dirty()
        self._bases = [s.base_offset for s in self._segments]
        self.epoch_cache = LeaderEpochCache(self.directory)
        lso = max(log_start_offset or 0, self._segments[0].base_offset)
        if lso > self._end():
            _log.warning(
                "%s log start offset %d beyond end %d: starting afresh",
                self.prefix,
                lso,
                self._end(),
            )
            self._truncate_fully_locked(lso)
        self._log_start_offset = lso
        # entries past the end are stale (an entry may start exactly at the end: kept)
        self.epoch_cache.truncate_from_end(self._end() + 1)
        self.epoch_cache.truncate_from_start(lso)
        if not clean:  # whatever recovery kept past the recovery point: make it durable
            for seg in self._segments:
                if seg.next_offset > recovery_point or seg is self._segments[-1]:
                    self.durability.mark_dirty(seg)
                    # a new epoch's checkpoint entry is written by the flush after the
                    # append: one lost in the crash is found again in the batch headers
                    for h in self.guard(lambda s=seg: list(s.headers())):
                        if (
                            h.partition_leader_epoch > self.epoch_cache.latest_epoch
                            and h.next_offset > lso  # (below the log start: no epoch kept)
                        ):
                            self.epoch_cache.assign(
                                h.partition_leader_epoch, max(h.base_offset, lso)
                            )
            self.durability.mark_dir_dirty()
        flushed = self._end() if clean else max(lso, min(recovery_point, self._end()))
        self.durability.opened(flushed, now)
        self._opened = True
        if not clean and flush_recovered:
            self.flush()

    # -- state ---------------------------------------------------------------------------------

    def _end(self) -> int:
        return self._segments[-1].next_offset

    @property
    def end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def flushed_offset(self) -> int:
        """The offset below which every batch is on disk (durability.py keeps it)."""
        return self.durability.flushed_offset

    @property
    def offline(self) -> bool:
        return self._offline

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def segment_base_offsets(self) -> list[int]:
        return list(self._bases)

    @property
    def latest_epoch(self) -> int:
        return self.epoch_cache.latest_epoch

    @property
    def closed(self) -> bool:
        return self._closed

    def mark_offline(self) -> None:
        """Refuse appends from now on (its log directory failed). Any thread."""
        self._offline = True

    def flush(self) -> int:
        """fsync what was written since the last flush; returns the new flushed offset
        (durability.py, LogDurability.flush). Raises StorageError."""
        return self.durability.flush()

    # -- the segment list (the narrow interface of durability, retention and compaction) --------

    @property
    def generation(self) -> int:
        """Bumped by every truncation (read under `lock`): work planned before it is void."""
        return self._generation

    @property
    def segments(self) -> Sequence[LogSegment]:
        """The segments, oldest first (read under `lock`; changed only through this class)."""
        return self._segments

    def fail(self, exc: OSError) -> StorageError:
        """The error to raise for `exc` from a file operation on this log: the log (and its
        dir, through `on_storage_error`) goes offline, unless it is a lack of descriptors, or
        the log was closed meanwhile (deleted, or the broker stopping: its files went away
        with it, not with the disk)."""
        if is_fd_limit(exc):  # out of descriptors is not a disk failure: nothing goes offline
            return exc if isinstance(exc, StorageError) else fd_limit_error(exc, self.prefix)
        if self._closed:
            if isinstance(exc, StorageError):
                return exc
            return StorageError(exc.errno, f"{self.prefix} log closed: {exc}")
        self._offline = True
        if self._on_storage_error is not None:
            self._on_storage_error(self, exc)
        if isinstance(exc, StorageError):
            return exc
        return StorageError(exc.errno, f"{self.prefix} {exc}")

    def _check_online(self) -> None:
        if self._closed:
            raise StorageError(f"{self.prefix} log is closed")
        if self._offline:
            raise StorageError(f"{self.prefix} log directory {self.log_dir} is offline")

    # -- appends -------------------------------------------------------------------------------

    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        leader_epoch: int,
        *,
        control: bool = False,
        coordinator: bool = False,
    ) -> AppendInfo:
        """Validate every batch of `records` (CRC included), assign offsets from the log end by
        rewriting base_offset and partition_leader_epoch in place, and write them in one call.
        Raises CorruptRecordError, MessageTooLargeError, StorageError, InvalidRecordError (a
        keyless record for a compacted log, a control batch from a client). `control`: a
        transaction marker (one control batch, WriteTxnMarkers), checked as Kafka does
        (InvalidProducerEpochError, TransactionCoordinatorFencedError). `coordinator`: the
        group coordinator's transactional offset batches (epoch checked, no sequences). A writable memoryview
        (the records of a large Produce request, client/protocol/views.py) is rewritten in
        place, without a copy; anything else is copied first."""
        if type(records) is memoryview and not records.readonly:
            buf: bytearray | memoryview = records.cast("B")
        else:
            buf = bytearray(records)
        headers = validate_batches(buf, self.config.max_message_bytes, self.prefix)
        if self.config.compact:
            check_keys(buf, headers, self.prefix)
        with self.lock:
            self._check_online()
            dup = self.producers.check_locked(buf, headers, control, coordinator)
            if dup is not None:  # a retry of batches already here: their offsets, no write
                return AppendInfo(dup[0], dup[1], -1, 0, 0, 0, self._log_start_offset)
            first = offset = self._end()
            batches = []
            max_ts = -1
            records_n = 0
            for pos, h in headers:
                # base_offset and partition_leader_epoch (batch_length rewritten unchanged)
                _pack_prefix(buf, pos, offset, h.batch_length, leader_epoch)
                batches.append((offset, pos, LOG_OVERHEAD + h.batch_length, h.max_timestamp))
                offset += h.last_offset_delta + 1
                records_n += h.record_count
                if h.max_timestamp > max_ts:
                    max_ts = h.max_timestamp
            if leader_epoch > self.epoch_cache.latest_epoch:
                self.guard(self.epoch_cache.assign, leader_epoch, first)
            self._write(buf, batches, first, offset)
            self.producers.appended_locked(buf, headers, batches)
            lso = self._log_start_offset
            return _new(
                AppendInfo, (first, offset - 1, max_ts, len(batches), records_n, len(buf), lso)
            )

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendInfo:
        """Append batches fetched from the leader, keeping their offsets and epochs. Each batch
        must start at or after where the previous ended, the first at or after the log end
        offset (UnexpectedAppendOffsetError otherwise): a compacted leader log has gaps."""
        view = memoryview(records)
        headers = validate_batches(view, None, self.prefix)
        with self.lock:
            self._check_online()
            first = expected = self._end()
            batches = []
            max_ts = -1
            records_n = 0
            for pos, h in headers:
                if h.base_offset < expected:
                    raise UnexpectedAppendOffsetError(
                        f"{self.prefix} batch at {h.base_offset}, expected {expected}"
                    )
                if h.partition_leader_epoch > self.epoch_cache.latest_epoch:
                    self.guard(self.epoch_cache.assign, h.partition_leader_epoch, h.base_offset)
                batches.append((h.base_offset, pos, LOG_OVERHEAD + h.batch_length, h.max_timestamp))
                expected = h.base_offset + h.last_offset_delta + 1
                records_n += h.record_count
                if h.max_timestamp > max_ts:
                    max_ts = h.max_timestamp
            self._write(view, batches, first, expected)
            self.producers.appended_locked(view, headers)
            lso = self._log_start_offset
            return _new(
                AppendInfo, (first, expected - 1, max_ts, len(batches), records_n, len(view), lso)
            )

    def guard(self, fn: Callable[..., T], *args: object) -> T:
        """Run a file operation; an OSError marks the log offline and becomes StorageError."""
        try:
            return fn(*args)
        except OSError as exc:
            raise self.fail(exc) from exc

    def _write(
        self,
        data: bytes | bytearray | memoryview,
        batches: list[tuple[int, int, int, int]],
        first: int,
        next_offset: int,
    ) -> None:
        seg = self._segments[-1]
        cfg = self.config
        if seg.size > 0 and (
            seg.size + len(data) > cfg.segment_bytes
            or self._clock() - seg.created_ms >= cfg.segment_ms
            or seg.index_full
            or next_offset - 1 - seg.base_offset > _MAX_RELATIVE
        ):
            seg = self.guard(self._roll_locked)
        try:
            seg.append(data, batches, next_offset, writeback=cfg.flush_on_ack)
        except OSError as exc:
            raise self.fail(exc) from exc
        self.durability.mark_dirty(seg, len(data))

    def _roll_locked(self) -> LogSegment:
        old = self._segments[-1]
        self.producers.rolled_locked(old.next_offset)
        seg = LogSegment(self.directory, old.next_offset, self.config, self._clock(), self._handles)
        self._segments.append(seg)
        self._bases.append(seg.base_offset)
        self.durability.mark_dir_dirty()
        old.release_index_fds()
        self.durability.mark_dirty(old)  # its indexes get fsynced by the next flush
        _log.info(
            "%s rolled segment %d (previous %d: %d bytes)",
            self.prefix,
            seg.base_offset,
            old.base_offset,
            old.size,
        )
        return seg

    def roll(self) -> None:
        """Start a new active segment now (no-op if the active one is empty)."""
        with self.lock:
            self._check_online()
            if self._segments[-1].size > 0:
                self.guard(self._roll_locked)

    # -- reads ---------------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> ReadResult:
        """Whole batches from the one holding `offset`: up to `max_bytes`, but the first batch
        whole even when larger; none whose base offset >= `max_offset` (the high watermark for
        consumers). Raises OffsetOutOfRangeError below the log start or above the end."""
        with self.lock:
            end = self._end()
            lso = self._log_start_offset
            if offset < lso or offset > end:
                raise OffsetOutOfRangeError(f"{self.prefix} offset {offset} outside [{lso}, {end}]")
            empty = ReadResult(b"", offset, offset, lso, end)
            if offset == end or (max_offset is not None and offset >= max_offset):
                return empty
            segments = self._segments
            i = max(0, bisect.bisect_right(self._bases, offset) - 1)
            while i < len(segments):
                try:
                    got = segments[i].read_batches(offset, max_bytes, max_offset)
                except OSError as exc:
                    raise StorageError(exc.errno, f"{self.prefix} read failed: {exc}") from exc
                if got is not None:
                    return ReadResult(*got, lso, end)
                i += 1
            return empty

    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """The first record at or after the log start whose timestamp >= `timestamp` (its
        offset and timestamp), or None, as Kafka answers ListOffsets by time. -2 gives the log
        start offset, -1 the log end offset. The time index and batch headers find the batch
        (the first whose max timestamp >= `timestamp`); only a batch whose records are not all
        that late is decoded to find the record."""
        with self.lock:
            if timestamp == EARLIEST_TIMESTAMP:
                lso = self._log_start_offset
                return TimestampOffset(-1, lso, self.epoch_cache.epoch_for_offset(lso))
            if timestamp == LATEST_TIMESTAMP:
                return TimestampOffset(-1, self._end(), self.epoch_cache.latest_epoch)
            lso = self._log_start_offset
            for seg in self._segments:
                if seg.largest_timestamp < timestamp or seg.next_offset <= lso:
                    continue
                found = seg.find_timestamp(timestamp, lso)
                if found is not None:
                    try:
                        ts, offset = seg.first_record_at(*found, timestamp, lso)
                    except OSError as exc:
                        raise StorageError(exc.errno, f"{self.prefix} read failed: {exc}") from exc
                    return TimestampOffset(ts, offset, self.epoch_cache.epoch_for_offset(offset))
            return None

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= `epoch`, its end offset), KIP-101/279; (-1, -1) if unknown."""
        with self.lock:
            return self.epoch_cache.end_offset_for_epoch(epoch, self._end())

    # -- truncation and retention --------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Drop every batch whose last offset >= `offset` (follower truncation). A batch that
        straddles `offset` goes whole, so the end offset may land below `offset`."""
        with self.lock:
            if offset >= self._end():
                return
            _log.info("%s truncating to %d (end %d)", self.prefix, offset, self._end())
            if offset <= self._segments[0].base_offset or offset < self._log_start_offset:
                self._truncate_fully_locked(offset)
                return
            try:
                while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
                    self.delete_segment_locked(self._segments.pop())
                    self._bases.pop()
                seg = self._segments[-1]
                seg.truncate_to(offset)
                self.durability.mark_dirty(seg)
                lso_before = self._log_start_offset
                self._after_truncation_locked()
            except OSError as exc:
                raise self.fail(exc) from exc
            self._report_truncation_locked(lso_before)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log, empty, at `offset`."""
        with self.lock:
            self._truncate_fully_locked(offset)

    def _truncate_fully_locked(self, offset: int) -> None:
        _log.info("%s truncating fully, new start offset %d", self.prefix, offset)
        try:
            for seg in self._segments:
                self.delete_segment_locked(seg)
            seg = LogSegment(self.directory, offset, self.config, self._clock(), self._handles)
            self._segments = [seg]
            self._bases = [offset]
            self.durability.mark_dirty(seg)
            self._log_start_offset = offset
            self.epoch_cache.clear()
            self._after_truncation_locked()
        except OSError as exc:
            raise self.fail(exc) from exc
        if self._opened:
            self._report_truncation_locked(-1)

    def _report_truncation_locked(self, lso_before: int) -> None:
        """After a truncation: the owner persists the lowered flushed offset as the recovery
        point now (and the log start), before anything is appended where the truncation cut.
        A recovery point left above the end made the recovery after a crash skip the data
        written there again: neither validated nor scanned for its leader epochs (a
        truncation to 0, two appends, a crash: epoch 0 came back starting at offset 1).
        Kafka's LogManager.truncateTo checkpoints the recovery offsets the same way."""
        if self._on_truncated is not None:
            self._on_truncated(self)
        elif self._log_start_offset != lso_before and self._on_lso_changed is not None:
            self._on_lso_changed(self)

    def _after_truncation_locked(self) -> None:
        self._generation += 1
        end = self._end()
        self.producers.truncated_locked(end)
        self.compaction.clamp_first_dirty_locked(end)
        if end < self._log_start_offset:  # a batch straddling the start offset went whole
            self._log_start_offset = end
        if self._opened:
            self.durability.truncated_locked(end)
            self.epoch_cache.truncate_from_end(end)

    def advance_start(self, choose: Callable[[Sequence[LogSegment], int], int | None]) -> int:
        """Raise the log start offset to `choose(segments, log_start_offset)` (called under the
        lock, segments oldest first; None or an offset not above the log start changes
        nothing), delete every segment now wholly below it (never the active one), and tell
        the owner. Returns how many segments were deleted. Raises StorageError, and what
        `choose` raises."""
        with self.lock:
            start = choose(self._segments, self._log_start_offset)
            if start is None or start <= self._log_start_offset:
                return 0
            deleted = 0
            while len(self._segments) > 1 and self._segments[1].base_offset <= start:
                self._bases.pop(0)
                self.guard(self.delete_segment_locked, self._segments.pop(0))
                deleted += 1
            self._log_start_offset = start
            self.guard(self.epoch_cache.truncate_from_start, start)
            self.producers.start_advanced_locked(start)
        if self._on_lso_changed is not None:
            self._on_lso_changed(self)
        return deleted

    def splice_locked(self, old: list[LogSegment], new: LogSegment) -> None:
        """Put `new` in the place of the contiguous run `old` (whose files are gone already:
        the compaction swap), lock held. `new` covers exactly the offsets `old` did."""
        i = self._segments.index(old[0])
        assert self._segments[i : i + len(old)] == old and new.base_offset == old[0].base_offset
        assert new.next_offset == old[-1].next_offset, (new.next_offset, old[-1])
        self._segments[i : i + len(old)] = [new]
        self._bases[i : i + len(old)] = [new.base_offset]
        self.durability.mark_dirty(new)  # its indexes get fsynced by the next flush
        self.durability.mark_dir_dirty()

    def delete_segment_locked(self, seg: LogSegment) -> None:
        """Delete the files of `seg`, which has left the list or is about to (lock held)."""
        self.durability.forget(seg)
        seg.delete()

    def release_fds(self) -> None:
        """Close the segment descriptors nobody uses now (an idle log holds none; they reopen
        on the next use)."""
        with self.lock:
            for seg in self._segments:
                seg.release_fd()

    def close(self) -> None:
        """Close every fd (no flush: call flush() first for a clean close)."""
        with self.lock:
            for seg in self._segments:
                seg.close()
            self._closed = True
