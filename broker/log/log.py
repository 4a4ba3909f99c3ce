"""Log: one partition replica's append-only sequence of segments on disk.

Directory `<log_dir>/<topic>-<partition>/` holds `<base_offset:020d>.log|.index|.timeindex`
segments (formats in segment.py and index.py) and `leader-epoch-checkpoint` (epoch_cache.py).
The log start offset is persisted by the LogManager in the log-dir root checkpoint
(`on_log_start_offset_changed` tells it when to write).

Threads: every public method may be called from any thread (I/O workers, the replica fetcher,
the flusher); never from an event loop (they do file I/O). `_lock` serialises appends, reads,
truncation and retention; `flush()` holds it only to collect what to fsync, and fsyncs dup'ed
fds outside it, so appends go on during a group commit. `_flush_lock` serialises flushes.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple, TypeVar

from client.errors import (
    CorruptRecordError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    StorageError,
)
from client.fsutil import make_dirs
from client.records.header import peek_size, set_base_offset, set_partition_leader_epoch, validate

from .compaction import LogCompaction, check_keys
from .config import LogConfig
from .durability import LogDurability
from .epoch_cache import LeaderEpochCache
from .handles import FileHandles, fd_limit_error, is_fd_limit
from .producer_state import (
    ProducerStateManager,
    delete_snapshots_after,
    latest_snapshot,
    write_snapshot,
)
from .recovery import load_segments
from .retention import LogRetention
from .segment import LogSegment

_log = logging.getLogger(__name__)

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
_MAX_RELATIVE = (1 << 32) - 1
T = TypeVar("T")


def _now_ms() -> int:
    return int(time.time() * 1000)


class UnexpectedAppendOffsetError(OffsetOutOfRangeError):  # type: ignore[misc, valid-type]
    """append_as_follower got batches that do not continue the log end offset."""


class AppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    max_timestamp: int
    batch_count: int
    record_count: int
    size_bytes: int
    log_start_offset: int


class ReadResult(NamedTuple):
    data: bytes  # whole batches; b"" when nothing is available
    first_offset: int  # base offset of the first batch (may be < the requested offset)
    next_offset: int  # offset after the last returned batch (= requested offset when empty)
    log_start_offset: int
    end_offset: int  # log end offset when the read ran


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int
    leader_epoch: int


class Log(LogRetention, LogDurability, LogCompaction):
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
        # the flushed offset the log dir's Flusher last reported (its own, under its lock)
        self.reported_flushed_offset = -1
        self.config = config
        self._clock = clock
        self._on_storage_error = on_storage_error
        self._on_lso_changed = on_log_start_offset_changed
        self._on_truncated = on_truncated
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._offline = False
        self._closed = False
        self._generation = 0  # bumped by truncation: a flush that spans it does not count
        self._dir_dirty = False
        self._dirty: dict[int, LogSegment] = {}
        self._prefix = f"[{topic}-{partition}]"
        self._producers: ProducerStateManager | None = None  # built on first use
        make_dirs(self.directory)
        now = clock()
        self._segments: list[LogSegment] = load_segments(
            self.directory, config, now, recovery_point, clean, self._prefix, self._handles
        )
        if not self._segments:
            start = log_start_offset or 0
            self._segments.append(LogSegment(self.directory, start, config, now, self._handles))
            self._dir_dirty = True
        self._bases = [s.base_offset for s in self._segments]
        self.epoch_cache = LeaderEpochCache(self.directory)
        lso = max(log_start_offset or 0, self._segments[0].base_offset)
        if lso > self._end():
            _log.warning(
                "%s log start offset %d beyond end %d: starting afresh",
                self._prefix,
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
                    self._dirty[seg.base_offset] = seg
                    # a new epoch's checkpoint entry is written by the flush after the
                    # append: one lost in the crash is found again in the batch headers
                    for h in self._guard(lambda s=seg: list(s.headers())):
                        if (
                            h.partition_leader_epoch > self.epoch_cache.latest_epoch
                            and h.next_offset > lso  # (below the log start: no epoch kept)
                        ):
                            self.epoch_cache.assign(
                                h.partition_leader_epoch, max(h.base_offset, lso)
                            )
            self._dir_dirty = True
        self._flushed = self._end() if clean else max(lso, min(recovery_point, self._end()))
        self._last_flush_ms = now
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
        return self._flushed

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

    def mark_offline(self) -> None:
        """Refuse appends from now on (its log directory failed). Any thread."""
        self._offline = True

    def _fail(self, exc: OSError) -> StorageError:
        if is_fd_limit(exc):  # out of descriptors is not a disk failure: nothing goes offline
            return exc if isinstance(exc, StorageError) else fd_limit_error(exc, self._prefix)
        self._offline = True
        if self._on_storage_error is not None:
            self._on_storage_error(self, exc)
        if isinstance(exc, StorageError):
            return exc
        return StorageError(exc.errno, f"{self._prefix} {exc}")

    def _check_online(self) -> None:
        if self._closed:
            raise StorageError(f"{self._prefix} log is closed")
        if self._offline:
            raise StorageError(f"{self._prefix} log directory {self.log_dir} is offline")

    # -- appends -------------------------------------------------------------------------------

    def _validate(self, buf: bytearray | memoryview, check_size: bool) -> list[tuple]:
        if not len(buf):
            raise CorruptRecordError(f"{self._prefix} empty records")
        headers = []
        pos, n = 0, len(buf)
        max_bytes = self.config.max_message_bytes
        while pos < n:
            if check_size:  # from the header alone: no CRC time spent on a batch refused anyway
                size = peek_size(buf, pos)
                if size is not None and size > max_bytes:
                    raise MessageTooLargeError(
                        f"batch of {size} bytes exceeds max.message.bytes {max_bytes}"
                    )
            h = validate(buf, pos, True)
            headers.append((pos, h))
            pos += h.size
        return headers

    def append_as_leader(
        self, records: bytes | bytearray | memoryview, leader_epoch: int
    ) -> AppendInfo:
        """Validate every batch of `records` (CRC included), assign offsets from the log end by
        rewriting base_offset and partition_leader_epoch in place, and write them in one call.
        Raises CorruptRecordError, MessageTooLargeError, StorageError, InvalidRecordError (a
        keyless record for a compacted log). A writable memoryview
        (the records of a large Produce request, client/protocol/views.py) is rewritten in
        place, without a copy; anything else is copied first."""
        if type(records) is memoryview and not records.readonly:
            buf: bytearray | memoryview = records.cast("B")
        else:
            buf = bytearray(records)
        headers = self._validate(buf, True)
        if self.config.compact:
            check_keys(buf, headers, self._prefix)
        with self._lock:
            self._check_online()
            dup = self._check_producer_locked(headers)
            if dup is not None:  # a retry of batches already here: their offsets, no write
                return AppendInfo(dup[0], dup[1], -1, 0, 0, 0, self._log_start_offset)
            first = offset = self._end()
            batches = []
            max_ts = -1
            records_n = 0
            for pos, h in headers:
                set_base_offset(buf, offset, pos)
                set_partition_leader_epoch(buf, leader_epoch, pos)
                batches.append((offset, pos, h.size, h.max_timestamp))
                offset += h.last_offset_delta + 1
                records_n += h.record_count
                if h.max_timestamp > max_ts:
                    max_ts = h.max_timestamp
            if leader_epoch > self.epoch_cache.latest_epoch:
                self._guard(self.epoch_cache.assign, leader_epoch, first)
            self._write(buf, batches, first, offset)
            if self._producers is not None:
                for (_pos, h), (base, *_rest) in zip(headers, batches, strict=True):
                    self._producers.update(h, base)
            return AppendInfo(
                first, offset - 1, max_ts, len(batches), records_n, len(buf), self._log_start_offset
            )

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendInfo:
        """Append batches fetched from the leader, keeping their offsets and epochs. Each batch
        must start at or after where the previous ended, the first at or after the log end
        offset (UnexpectedAppendOffsetError otherwise): a compacted leader log has gaps."""
        view = memoryview(records)
        headers = self._validate(view, False)
        with self._lock:
            self._check_online()
            first = expected = self._end()
            batches = []
            max_ts = -1
            records_n = 0
            for pos, h in headers:
                if h.base_offset < expected:
                    raise UnexpectedAppendOffsetError(
                        f"{self._prefix} batch at {h.base_offset}, expected {expected}"
                    )
                if h.partition_leader_epoch > self.epoch_cache.latest_epoch:
                    self._guard(self.epoch_cache.assign, h.partition_leader_epoch, h.base_offset)
                batches.append((h.base_offset, pos, h.size, h.max_timestamp))
                expected = h.next_offset
                records_n += h.record_count
                if h.max_timestamp > max_ts:
                    max_ts = h.max_timestamp
            self._write(view, batches, first, expected)
            if self._producers is not None:
                for _pos, h in headers:
                    self._producers.update(h, h.base_offset)
            return AppendInfo(
                first,
                expected - 1,
                max_ts,
                len(batches),
                records_n,
                len(view),
                self._log_start_offset,
            )

    def _check_producer_locked(self, headers: list[tuple]) -> tuple[int, int] | None:
        """Idempotence on the leader (producer_state.py): the (first, last) offsets of the
        earlier append when the request's batches are a retry, else None."""
        if any(h.producer_id >= 0 for _pos, h in headers):
            return self.producer_state_locked().check_run(
                [h for _pos, h in headers], f"{self._prefix} "
            )
        return None

    def producer_state_locked(self) -> ProducerStateManager:
        """The producer state, built from the batch headers when first needed (lock held)."""
        if self._producers is None:
            snap = latest_snapshot(self.directory, self._end())
            start, state = snap if snap is not None else (0, ProducerStateManager())
            for seg in self._segments:
                if seg.next_offset > start:
                    for h in self._guard(lambda s=seg: list(s.headers())):
                        if h.base_offset >= start:
                            state.update(h, h.base_offset)
            self._producers = state
            if state:
                _log.info(
                    "%s producer state of %d producers rebuilt from %s",
                    self._prefix,
                    len(state),
                    f"the snapshot at {start} and the log after it" if snap else "the log",
                )
        return self._producers

    def _guard(self, fn: Callable[..., T], *args: object) -> T:
        """Run a file operation; an OSError marks the log offline and becomes StorageError."""
        try:
            return fn(*args)
        except OSError as exc:
            raise self._fail(exc) from exc

    def _write(
        self, data, batches: list[tuple[int, int, int, int]], first: int, next_offset: int
    ) -> None:
        seg = self._segments[-1]
        cfg = self.config
        if seg.size > 0 and (
            seg.size + len(data) > cfg.segment_bytes
            or self._clock() - seg.created_ms >= cfg.segment_ms
            or seg.index_full
            or next_offset - 1 - seg.base_offset > _MAX_RELATIVE
        ):
            seg = self._guard(self._roll_locked)
        try:
            seg.append(data, batches, next_offset, writeback=cfg.flush_on_ack)
        except OSError as exc:
            raise self._fail(exc) from exc
        self._dirty[seg.base_offset] = seg

    def _roll_locked(self) -> LogSegment:
        old = self._segments[-1]
        if self._producers is not None:  # a restart then scans only from here
            write_snapshot(self.directory, old.next_offset, self._producers)
        seg = LogSegment(self.directory, old.next_offset, self.config, self._clock(), self._handles)
        self._segments.append(seg)
        self._bases.append(seg.base_offset)
        self._dir_dirty = True
        old.release_index_fds()
        self._dirty[old.base_offset] = old  # its indexes get fsynced by the next flush
        _log.info(
            "%s rolled segment %d (previous %d: %d bytes)",
            self._prefix,
            seg.base_offset,
            old.base_offset,
            old.size,
        )
        return seg

    def roll(self) -> None:
        """Start a new active segment now (no-op if the active one is empty)."""
        with self._lock:
            self._check_online()
            if self._segments[-1].size > 0:
                self._guard(self._roll_locked)

    # -- reads ---------------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> ReadResult:
        """Whole batches from the one holding `offset`: up to `max_bytes`, but the first batch
        whole even when larger; none whose base offset >= `max_offset` (the high watermark for
        consumers). Raises OffsetOutOfRangeError below the log start or above the end."""
        with self._lock:
            end = self._end()
            lso = self._log_start_offset
            if offset < lso or offset > end:
                raise OffsetOutOfRangeError(
                    f"{self._prefix} offset {offset} outside [{lso}, {end}]"
                )
            empty = ReadResult(b"", offset, offset, lso, end)
            if offset == end or (max_offset is not None and offset >= max_offset):
                return empty
            segments = self._segments
            i = max(0, bisect.bisect_right(self._bases, offset) - 1)
            while i < len(segments):
                seg = segments[i]
                found = seg.find(offset)
                if found is not None:
                    break
                i += 1
            else:
                return empty
            pos, h = found
            if max_offset is not None and h.base_offset >= max_offset:
                return empty
            end_pos, next_offset = seg.end_position(pos, h, max_bytes, max_offset)
            try:
                data = seg.read(pos, end_pos)
            except OSError as exc:
                raise StorageError(exc.errno, f"{self._prefix} read failed: {exc}") from exc
            return ReadResult(data, h.base_offset, next_offset, lso, end)

    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """The first batch whose max timestamp >= `timestamp` (its base offset, clamped to the
        log start), or None. -2 gives the log start offset, -1 the log end offset. The answer
        has batch granularity: records are never decoded."""
        with self._lock:
            if timestamp == EARLIEST_TIMESTAMP:
                lso = self._log_start_offset
                return TimestampOffset(-1, lso, self.epoch_cache.epoch_for_offset(lso))
            if timestamp == LATEST_TIMESTAMP:
                return TimestampOffset(-1, self._end(), self.epoch_cache.latest_epoch)
            lso = self._log_start_offset
            for seg in self._segments:
                if seg.largest_timestamp < timestamp or seg.next_offset <= lso:
                    continue
                start = max(seg.time_index.lookup_before(timestamp), lso)
                found = seg.find(start)
                if found is None:
                    continue
                pos, h = found
                while True:
                    if h.max_timestamp >= timestamp:
                        offset = max(h.base_offset, lso)
                        return TimestampOffset(
                            h.max_timestamp, offset, self.epoch_cache.epoch_for_offset(offset)
                        )
                    pos += h.size
                    if pos >= seg.size:
                        break
                    h = seg.header_at(pos)
            return None

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= `epoch`, its end offset), KIP-101/279; (-1, -1) if unknown."""
        with self._lock:
            return self.epoch_cache.end_offset_for_epoch(epoch, self._end())

    # -- truncation and retention --------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Drop every batch whose last offset >= `offset` (follower truncation). A batch that
        straddles `offset` goes whole, so the end offset may land below `offset`."""
        with self._lock:
            if offset >= self._end():
                return
            _log.info("%s truncating to %d (end %d)", self._prefix, offset, self._end())
            if offset <= self._segments[0].base_offset or offset < self._log_start_offset:
                self._truncate_fully_locked(offset)
                return
            try:
                while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
                    self._delete_segment_locked(self._segments.pop())
                    self._bases.pop()
                seg = self._segments[-1]
                seg.truncate_to(offset)
                self._dirty[seg.base_offset] = seg
                lso_before = self._log_start_offset
                self._after_truncation_locked()
            except OSError as exc:
                raise self._fail(exc) from exc
            self._report_truncation_locked(lso_before)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log, empty, at `offset`."""
        with self._lock:
            self._truncate_fully_locked(offset)

    def _truncate_fully_locked(self, offset: int) -> None:
        _log.info("%s truncating fully, new start offset %d", self._prefix, offset)
        try:
            for seg in self._segments:
                self._delete_segment_locked(seg)
            seg = LogSegment(self.directory, offset, self.config, self._clock(), self._handles)
            self._segments = [seg]
            self._bases = [offset]
            self._dirty = {offset: seg}
            self._log_start_offset = offset
            if hasattr(self, "epoch_cache"):
                self.epoch_cache.clear()
            self._after_truncation_locked()
        except OSError as exc:
            raise self._fail(exc) from exc
        if hasattr(self, "_flushed"):  # (not while the log is being opened)
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
        self._producers = None  # rebuilt from what is left on next use
        delete_snapshots_after(self.directory, self._end())
        end = self._end()
        self._clamp_first_dirty_locked(end)
        if end < self._log_start_offset:  # a batch straddling the start offset went whole
            self._log_start_offset = end
        if hasattr(self, "_flushed"):
            self._flushed = min(self._flushed, end)
            self.epoch_cache.truncate_from_end(end)

    def _delete_segment_locked(self, seg: LogSegment) -> None:
        self._dirty.pop(seg.base_offset, None)
        seg.delete()
        self._dir_dirty = True

    def release_fds(self) -> None:
        """Close the segment descriptors nobody uses now (an idle log holds none; they reopen
        on the next use)."""
        with self._lock:
            for seg in self._segments:
                seg.release_fd()

    def close(self) -> None:
        """Close every fd (no flush: call flush() first for a clean close)."""
        with self._lock:
            for seg in self._segments:
                seg.close()
            self._closed = True
