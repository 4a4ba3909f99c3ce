"""One log segment: `<base_offset:020d>.log` plus its offset and time indexes.

The .log file is a plain concatenation of record batches exactly as on the wire (docs/architecture.md §4;
layout in client/records/header.py): no per-file header, no padding. Its name is the offset of its
first batch. `size` counts only whole batches that were written completely; a failed or short
append is rolled back with ftruncate, so every byte below `size` belongs to a whole batch.

Reads use os.pread. The .log file's descriptor comes from the log dir's FileHandles cache
(handles.py): opened on first use, closed again when the cache needs room, pinned for the length
of each call. The index files hold no descriptor (index.py). All methods are called with the
owning Log's lock held (I/O worker threads, the flusher, recovery at start-up) except
`pin`/`unpin`, which a flush uses to fsync outside that lock.
"""

from __future__ import annotations

import errno
import logging
import os
import struct
from collections.abc import Iterator
from pathlib import Path

from client.errors import CorruptRecordError, StorageError
from client.records.header import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    TIMESTAMP_TYPE_BIT,
    BatchHeader,
    parse_header,
    peek_size,
    validate,
)
from client.records.reader import decode_batch

from .config import LogConfig
from .handles import FileHandles, SegmentFile
from .index import OffsetIndex, TimeIndex
from .writeback import CHUNK, start_writeback

_log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"
# batches above this are never valid on disk (the offset index positions are uint32)
_MAX_BATCH = 1 << 31
_PREFIX = struct.Struct(">qi")  # base_offset, batch_length


def segment_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


class LogSegment:
    """A .log file with its indexes. `next_offset` is one past the last offset it holds."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        now_ms: int,
        handles: FileHandles | None = None,
    ) -> None:
        """Open (creating if missing) the segment at `base_offset`. `handles`: the cache its
        .log descriptor lives in (default: a private one, for a segment used on its own)."""
        self.directory = directory
        self.base_offset = base_offset
        self.path = directory / segment_name(base_offset, LOG_SUFFIX)
        self.file = SegmentFile(self.path, handles or FileHandles(4, str(directory)))
        with self.file as fd:  # creates the file
            self.size = os.fstat(fd).st_size
        try:
            self.index = OffsetIndex(
                directory / segment_name(base_offset, INDEX_SUFFIX),
                base_offset,
                config.index_size_max_bytes,
            )
            self.time_index = TimeIndex(
                directory / segment_name(base_offset, TIMEINDEX_SUFFIX),
                base_offset,
                config.index_size_max_bytes,
            )
        except OSError:
            self.file.close()
            raise
        self.index_interval_bytes = config.index_interval_bytes
        self.next_offset = base_offset
        self.largest_timestamp = -1
        self.bytes_since_index = 0
        self.created_ms = now_ms
        # (base offset, position) of the first batch the last append() wrote, while the file
        # still holds it there: where a follower that kept up fetches next, found without the
        # index lookup and header read of find() (Log.read)
        self.last_append: tuple[int, int] | None = None

    # -- opening -----------------------------------------------------------------------------

    def load_clean(self) -> bool:
        """Open after a clean shutdown (or below the recovery point): sanity-check the indexes
        and find the tail from the last index entry. Returns False if the segment must be
        recovered (indexes missing/corrupt, or its tail does not end on a whole batch)."""
        if not self.index.load(self.size):
            _log.warning("%s: offset index corrupt or inconsistent, rebuilding", self.index.path)
            return False
        _offset, pos = self.index.last_entry()
        try:
            sparse_ok = self._walk_tail(pos)
        except CorruptRecordError as exc:
            _log.warning("%s: tail does not end on a whole batch (%s), recovering", self.path, exc)
            return False
        if not sparse_ok or (self.size and not self.index.existed):
            _log.warning("%s: offset index missing or incomplete, rebuilding", self.index.path)
            self.rebuild_indexes()
            return True
        if not self.time_index.load(self.next_offset):
            _log.warning("%s: time index corrupt or inconsistent, rebuilding", self.time_index.path)
            self.rebuild_indexes()
        self.largest_timestamp = max(self.largest_timestamp, self.time_index.last_timestamp)
        return True

    def _walk_tail(self, pos: int) -> bool:
        """Walk headers from `pos` (a batch start) to the end; sets next_offset, timestamps.
        Returns False if the index misses an entry it should have (sparse-interval rule)."""
        self.largest_timestamp = max(self.largest_timestamp, self.time_index.last_timestamp)
        self.bytes_since_index = 0
        sparse_ok = True
        while pos < self.size:
            if self.bytes_since_index > self.index_interval_bytes:
                sparse_ok = False
            h = self.header_at(pos)
            self.next_offset = h.next_offset
            self.largest_timestamp = max(self.largest_timestamp, h.max_timestamp)
            pos += h.size
            self.bytes_since_index += h.size
        if pos != self.size:
            raise CorruptRecordError(f"last batch ends at {pos}, file size {self.size}")
        return sparse_ok

    def recover(self) -> tuple[int, str | None]:
        """Validate every batch (lengths, magic, counts, CRC), rebuild both indexes and truncate
        at the first invalid or torn batch. Returns (bytes truncated, reason or None)."""
        self.last_append = None
        self.index.reset()
        self.time_index.reset()
        self.next_offset = self.base_offset
        self.largest_timestamp = -1
        self.bytes_since_index = 0
        valid_end = 0
        reason = None
        try:
            for pos, h in self._scan(check_crc=True):
                if h.base_offset < self.next_offset and valid_end > 0:
                    raise CorruptRecordError(
                        f"offset {h.base_offset} at position {pos} goes backwards "
                        f"(expected >= {self.next_offset})"
                    )
                self._index_batch(h.base_offset, pos, h.size, h.max_timestamp)
                self.next_offset = h.next_offset
                valid_end = pos + h.size
        except CorruptRecordError as exc:
            reason = str(exc)
        truncated = self.size - valid_end
        if truncated:
            if reason is None:
                reason = f"torn batch at position {valid_end}"
            with self.file as fd:
                os.ftruncate(fd, valid_end)
            self.size = valid_end
        return truncated, reason

    def rebuild_indexes(self) -> None:
        """Rebuild both indexes from the batch headers (no CRC check: below the recovery point)."""
        self.last_append = None
        self.index.reset()
        self.time_index.reset()
        self.bytes_since_index = 0
        self.largest_timestamp = -1
        self.next_offset = self.base_offset
        for pos, h in self._scan(check_crc=False):
            self._index_batch(h.base_offset, pos, h.size, h.max_timestamp)
            self.next_offset = h.next_offset

    def headers(self) -> Iterator[BatchHeader]:
        """Every batch header of the segment, in order (no CRC check)."""
        for _pos, h in self._scan(check_crc=False):
            yield h

    def _scan(self, check_crc: bool) -> Iterator[tuple[int, BatchHeader]]:
        """Yield (position, header) of each batch from position 0; raises CorruptRecordError at
        the first invalid batch (a torn tail included)."""
        pos = 0
        while pos < self.size:
            size = peek_size(self.header_bytes(pos, LOG_OVERHEAD))
            if size is None or size < HEADER_SIZE or size > _MAX_BATCH:
                raise CorruptRecordError(f"bad or torn batch length {size} at position {pos}")
            if pos + size > self.size:
                raise CorruptRecordError(
                    f"torn batch at position {pos}: needs {size} bytes, {self.size - pos} present"
                )
            if check_crc:
                with self.file as fd:
                    data = os.pread(fd, size, pos)
                h = validate(data, 0, check_crc=True)
            else:
                h = parse_header(self.header_bytes(pos, HEADER_SIZE))
                if h.magic != MAGIC:
                    raise CorruptRecordError(f"bad magic {h.magic} at position {pos}")
            yield pos, h
            pos += size

    # -- appending ---------------------------------------------------------------------------

    def _index_batch(self, base_offset: int, pos: int, size: int, max_ts: int) -> None:
        if self.bytes_since_index > self.index_interval_bytes:
            self.index.append(base_offset, pos)
            if max_ts > self.largest_timestamp:
                self.largest_timestamp = max_ts
            self.time_index.maybe_append(self.largest_timestamp, base_offset)
            self.bytes_since_index = 0
        elif max_ts > self.largest_timestamp:
            self.largest_timestamp = max_ts
        self.bytes_since_index += size

    def append(
        self,
        data: bytes | bytearray | memoryview,
        batches: list[tuple[int, int, int, int]],
        next_offset: int,
        writeback: bool = False,
    ) -> None:
        """Write whole batches at the end. `batches`: (base_offset, position in data, size,
        max_timestamp) for each batch of `data`. On any OSError the file is cut back to its
        previous size and StorageError is raised; a short write is continued until complete.
        `writeback`: an fdatasync follows soon, so a large append is written in pieces and the
        kernel starts writing each piece to disk at once (broker/log/writeback.py)."""
        start = self.size
        view = memoryview(data)
        pos = start
        early = start_writeback if writeback and len(view) > CHUNK else None
        fd = self.file.acquire()  # an OSError here changed nothing: no rollback
        try:
            while view:
                written = os.pwrite(fd, view[:CHUNK] if early else view, pos)
                if written <= 0:
                    raise OSError(errno.EIO, f"pwrite wrote {written} bytes")
                if early:
                    early(fd, pos, written)
                pos += written
                view = view[written:]
            for base_offset, rel, size, max_ts in batches:
                self._index_batch(base_offset, start + rel, size, max_ts)
        except OSError as exc:
            self._rollback(fd, start, next_offset_before=self.next_offset)
            raise StorageError(exc.errno, f"{self.path}: append failed: {exc}") from exc
        finally:
            self.file.release()
        self.size = pos
        self.next_offset = next_offset
        if batches:
            self.last_append = (batches[0][0], start + batches[0][1])

    def _rollback(self, fd: int, size: int, next_offset_before: int) -> None:
        self.last_append = None
        try:
            os.ftruncate(fd, size)
            self.index.truncate_to(next_offset_before)
            self.time_index.truncate_to(next_offset_before)
        except OSError as exc:
            _log.error("%s: rollback to %d bytes failed: %s", self.path, size, exc)

    @property
    def index_full(self) -> bool:
        return self.index.is_full or self.time_index.is_full

    # -- reading -----------------------------------------------------------------------------

    def header_bytes(self, pos: int, n: int) -> bytes:
        with self.file as fd:
            return os.pread(fd, n, pos)

    def header_at(self, pos: int) -> BatchHeader:
        with self.file as fd:
            data = os.pread(fd, HEADER_SIZE, pos)
        h = parse_header(data)
        if h.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + h.size > self.size:
            raise CorruptRecordError(f"{self.path}: bad batch length {h.batch_length} at {pos}")
        return h

    def find_timestamp(self, timestamp: int, start: int) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch at or after offset `start` whose max
        timestamp >= `timestamp` (the time index gives where to start looking), or None."""
        found = self.find(max(self.time_index.lookup_before(timestamp), start))
        if found is None:
            return None
        pos, h = found
        while h.max_timestamp < timestamp:
            pos += h.size
            if pos >= self.size:
                return None
            h = self.header_at(pos)
        return pos, h

    def first_record_at(
        self, pos: int, h: BatchHeader, timestamp: int, start: int
    ) -> tuple[int, int]:
        """(timestamp, offset) of the first record of batch `h` (at `pos`, max timestamp >=
        `timestamp`) at or after offset `start` whose timestamp >= `timestamp`: from the header
        when its first record is that late, else by decoding the batch (OSError if unreadable)."""
        append_time = bool(h.attributes & TIMESTAMP_TYPE_BIT)  # every record at max_timestamp
        if h.base_offset >= start and (append_time or h.base_timestamp >= timestamp):
            # the first record is that late (deltas are >= 0)
            return (h.max_timestamp if append_time else h.base_timestamp), h.base_offset
        for r in decode_batch(self.read(pos, pos + h.size), check_crc=False):
            if r.offset >= start and r.timestamp >= timestamp:
                return r.timestamp, r.offset
        return h.max_timestamp, max(h.base_offset, start)  # (a batch without such a record)

    def find(self, offset: int) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch whose last offset >= `offset`, or None."""
        if offset >= self.next_offset:
            return None
        _, pos = self.index.lookup(offset)
        size = self.size
        while pos < size:
            h = self.header_at(pos)
            if h.base_offset + h.last_offset_delta >= offset:
                return pos, h
            pos += h.size
        return None

    def read_batches(
        self, offset: int, max_bytes: int, max_offset: int | None
    ) -> tuple[bytes, int, int] | None:
        """(data, base offset of its first batch, next offset) of the whole batches from the
        one holding `offset` (Log.read's rules: up to `max_bytes` but the first whole, none
        from `max_offset` on); data b"" when the first starts at or after `max_offset`; None
        when no batch here ends at or after `offset`. OSError when unreadable."""
        tail = self.last_append
        if (
            tail is not None
            and tail[0] == offset
            and self.size - tail[1] <= max_bytes
            and (max_offset is None or max_offset >= self.next_offset)
        ):
            # A follower that kept up asks for what the last append wrote: the batches from
            # there to the end, as find() and end_position() would choose them, without the
            # index lookup and the header read (a pread per partition read: one producer over
            # 1,000 RF=3 partitions makes two such reads per partition and request)
            return self.read(tail[1], self.size), offset, self.next_offset
        found = self.find(offset)
        if found is None:
            return None
        pos, h = found
        if max_offset is not None and h.base_offset >= max_offset:
            return b"", offset, offset
        end_pos, next_offset = self.end_position(pos, h, max_bytes, max_offset)
        return self.read(pos, end_pos), h.base_offset, next_offset

    def end_position(
        self, start: int, first: BatchHeader, max_bytes: int, max_offset: int | None
    ) -> tuple[int, int]:
        """(end position, next offset) of the whole batches to return from `start` (where batch
        `first` begins): at most `max_bytes` but never less than the first batch; none with
        base_offset >= max_offset."""
        limit, limit_offset = self.size, self.next_offset
        if max_offset is not None and max_offset < self.next_offset:
            found = self.find(max_offset)
            if found is not None:
                pos, h = found
                if h.base_offset >= max_offset:
                    limit, limit_offset = pos, h.base_offset
                else:
                    limit, limit_offset = pos + h.size, h.next_offset
        if limit <= start:
            return start, first.base_offset
        if limit - start <= max_bytes:
            return limit, limit_offset
        target = start + max_bytes
        if target < start + first.size:
            return start + first.size, first.next_offset
        _, pos = self.index.floor_position(target)
        if pos < start:
            pos = start
        while True:  # pos is a batch start below limit with pos <= target
            base_offset, length = _PREFIX.unpack(self.header_bytes(pos, LOG_OVERHEAD))
            n = LOG_OVERHEAD + length
            assert n >= HEADER_SIZE, (self.path, pos, n)
            if pos + n > target:
                return pos, base_offset
            pos += n
            if pos >= limit:
                return limit, limit_offset

    def read(self, start: int, end: int) -> bytes:
        with self.file as fd:
            data = os.pread(fd, end - start, start)
        if len(data) != end - start:
            raise StorageError(errno.EIO, f"{self.path}: short read at {start}")
        return data

    # -- truncation and lifecycle ------------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose last offset >= `offset`. Returns bytes removed."""
        found = self.find(offset)
        if found is None:
            return 0
        pos, h = found
        removed = self.size - pos
        self.last_append = None
        with self.file as fd:
            os.ftruncate(fd, pos)
        self.size = pos
        self.index.truncate_to(h.base_offset)
        self.time_index.truncate_to(h.base_offset)
        self.next_offset = self.base_offset
        self.largest_timestamp = -1
        _, last_pos = self.index.last_entry()
        self._walk_tail(last_pos)
        if self.size == 0:
            self.next_offset = self.base_offset
        return removed

    def sync_fds(self) -> list[int]:
        """New fds on the .log and index files, to fsync outside the Log's lock (the caller
        closes them). Dirty pages belong to the file, so a fresh fd syncs them all."""
        flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
        fds = [os.open(self.path, flags)]
        try:
            fds.append(self.index.sync_fd())
            fds.append(self.time_index.sync_fd())
        except OSError:
            for fd in fds:
                os.close(fd)
            raise
        return fds

    def release_index_fds(self) -> None:
        """Write the buffered entries of a segment that is no longer active."""
        self.index.release()
        self.time_index.release()

    def release_fd(self) -> None:
        """Close the .log descriptor if nobody uses it (it reopens on the next use)."""
        self.file.release_fd()

    def pin(self) -> int:
        """The .log fd, kept open for an fsync outside the Log's lock. unpin() after."""
        return self.file.acquire()

    def unpin(self) -> None:
        self.file.release()

    def close(self) -> None:
        """Write buffered index entries and close the .log fd (only once no flush has it
        pinned)."""
        self.index.close()
        self.time_index.close()
        self.file.close()

    def delete(self) -> None:
        # no point writing buffered index entries of a deleted file: only the .log fd closes
        self.file.close()
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX):
            (self.directory / segment_name(self.base_offset, suffix)).unlink(missing_ok=True)
