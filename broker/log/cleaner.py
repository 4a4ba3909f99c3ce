"""Cleaning one compacted log (Kafka's Cleaner): keep the latest record of each key.

A log with `cleanup.policy` compact has a clean part (below its first dirty offset, the cleaner
checkpoint) and a dirty part. One pass, given an upper bound (the log's high watermark and
flushed offset: nothing a follower truncation could take back is cleaned against):

1. Map: scan the dirty records of the cleanable segments (every segment before the active one
   that ends at or below the bound) in offset order, putting key -> offset into the OffsetMap.
   When the map is full, the pass maps only up to that record (`map_end`); the rest is left
   for the next pass, so any dedupe buffer makes progress.
2. Rewrite: the cleanable segments from the log start up to the one holding `map_end - 1`, in
   runs of at most `segment.bytes`, each into one new segment (`<base>.log.cleaned`) that keeps
   a record when
   - its offset >= map_end (this pass did not look at its key), or
   - it has a key whose latest mapped offset is not later, unless it is a tombstone (null
     value) that was already in the clean part before this pass and whose batch's max
     timestamp is more than `delete.retention.ms` old (consumers had that long to see it).
   Records without a key are dropped (Kafka's cleaner does the same). Control batches stay.
   Transactions: the bound is lowered to the first offset of an undecided transaction
   (compaction.py); the records of aborted transactions (the aborted-transaction index, from
   the log start on) are neither mapped nor kept, as Kafka's cleaner discards them, while their
   markers and index entries stay (a marker is never removed: decisions.md).
3. Swap each run in atomically (compaction.py), then write the new first dirty offset.

Batches: a batch whose records all stay is copied byte for byte. Otherwise it is rebuilt with
the same header fields (base offset, last offset delta, epochs, producer id, epoch and base
sequence, timestamps) and the records kept, with their own offset and timestamp deltas: offsets
never change, gaps appear, and the producer state derived from headers stays the same. A batch
left with no record is dropped, except the last batch of a run (so the segment still ends where
it did: recovery reads a short segment as a lost tail) and a batch the producer state keeps
(the last 5 of a producer, for duplicate detection): those stay as empty batches (record_count
0), as Kafka keeps a producer's last batch.

Threads: called from the cleaner thread (cleaner_thread.py) only; it reads segments without the
log's lock and takes it only for `cleanable_segments` and the swap.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack

from client.errors import StorageError
from client.records.compression import NONE, compress, decompress
from client.records.crc import crc32c
from client.records.header import (
    CRC_OFFSET,
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TRANSACTIONAL_BIT,
    BatchHeader,
    iter_headers,
)

from .compaction import cleaned_path
from .offset_map import OffsetMap, key_digest
from .segment import LogSegment
from .txn_index import AbortedTxn

_log = logging.getLogger(__name__)

READ_CHUNK = 4 << 20
_packb = msgpack.Packer(use_bin_type=True).pack
_MAX_RELATIVE = (1 << 32) - 1


@dataclass
class CleanStats:
    """What one pass did (the cleaner thread logs it; tests and the benchmark read it)."""

    topic: str = ""
    partition: int = -1
    first_dirty: int = 0
    map_end: int = 0
    keys_mapped: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    tombstones_dropped: int = 0
    segments_before: int = 0
    segments_after: int = 0
    swaps_abandoned: int = 0
    elapsed_s: float = 0.0


def _batches(seg: LogSegment) -> Iterator[tuple[BatchHeader, bytes]]:
    """(header, whole batch bytes) of every batch of a non-active segment, read in chunks."""
    pos = 0
    size = seg.size
    while pos < size:
        data = seg.read(pos, min(size, pos + READ_CHUNK))
        used = 0
        for p, h in iter_headers(data):
            yield h, data[p : p + h.size]
            used = p + h.size
        if used == 0:  # one batch larger than the chunk
            h = seg.header_at(pos)
            yield h, seg.read(pos, pos + h.size)
            used = h.size
        pos += used


def _with_last(batches: Iterator[tuple[BatchHeader, bytes]]) -> Iterator[tuple[Any, bytes, bool]]:
    """(header, bytes, is the last one) of each batch: one batch of lookahead."""
    prev = None
    for item in batches:
        if prev is not None:
            yield prev[0], prev[1], False
        prev = item
    if prev is not None:
        yield prev[0], prev[1], True


def _rows(h: BatchHeader, batch: bytes) -> tuple[Any, ...]:
    section = decompress(h.compression, memoryview(batch)[HEADER_SIZE:])
    rows: tuple[Any, ...] = msgpack.unpackb(section, raw=False, use_list=False, strict_map_key=True)
    if len(rows) != h.record_count:
        raise StorageError(f"batch at {h.base_offset}: {len(rows)} records, header says "
                           f"{h.record_count}")  # fmt: skip
    return rows


def _rebuild(h: BatchHeader, rows: list[Any]) -> bytes:
    """The batch `h` with only `rows`, every header field kept but length, count and CRC."""
    packed = _packb(rows)
    section = packed if h.compression == NONE else compress(h.compression, packed)
    header = bytearray(
        HEADER.pack(
            h.base_offset,
            HEADER_SIZE - LOG_OVERHEAD + len(section),
            h.partition_leader_epoch,
            h.magic,
            0,
            h.attributes,
            h.last_offset_delta,
            h.base_timestamp,
            h.max_timestamp,
            h.producer_id,
            h.producer_epoch,
            h.base_sequence,
            len(rows),
        )
    )
    crc = crc32c(section, crc32c(bytes(header[CRC_START:])))
    header[CRC_OFFSET : CRC_OFFSET + 4] = crc.to_bytes(4, "big")
    return bytes(header) + section


class _AbortedRanges:
    """The aborted transactions of a log: is a batch one of theirs?"""

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._by_pid: dict[int, list[tuple[int, int]]] = {}
        for e in aborted:
            self._by_pid.setdefault(e.producer_id, []).append((e.first_offset, e.last_offset))

    def holds(self, h: BatchHeader) -> bool:
        if not self._by_pid or not h.attributes & TRANSACTIONAL_BIT or h.is_control:
            return False
        return any(
            first <= h.base_offset < last for first, last in self._by_pid.get(h.producer_id, ())
        )


def _no_fault(step: str) -> None:
    return None


class CleanAborted(Exception):
    """The cleaner is stopping: the pass was given up (its .cleaned file deleted)."""


class Cleaner:
    """Cleans logs one pass at a time with one OffsetMap (`dedupe_buffer_bytes` of memory)."""

    def __init__(
        self,
        dedupe_buffer_bytes: int,
        clock: Callable[[], int] | None = None,
        fault: Callable[[str], None] = _no_fault,
    ) -> None:
        self.offset_map = OffsetMap(dedupe_buffer_bytes)
        self._clock = clock or (lambda: int(time.time() * 1000))
        self._fault = fault  # tests: called after each step of the swap
        self.abort = threading.Event()  # set by the owner to stop a pass between two batches
        self._aborted = _AbortedRanges([])  # the log being cleaned's aborted transactions

    @staticmethod
    def dirty_ratio(log: Any, upper_bound: int) -> tuple[float, int]:
        """(dirty bytes / cleanable bytes, dirty bytes) of `log` below `upper_bound`."""
        first_dirty = log.compaction.first_dirty_offset()
        clean = dirty = 0
        for seg in log.compaction.cleanable_segments(upper_bound)[0]:
            if seg.next_offset <= first_dirty:
                clean += seg.size
            else:
                dirty += seg.size
        total = clean + dirty
        return (dirty / total if total else 0.0), dirty

    def clean(self, log: Any, upper_bound: int) -> CleanStats | None:
        """One pass over `log` (a broker.log.Log) below `upper_bound`; None when there is
        nothing dirty to clean. Raises StorageError (the log's dir may go offline)."""
        t0 = time.monotonic()
        stats = CleanStats(log.topic, log.partition)
        segments, generation, producer_batches = log.compaction.cleanable_segments(upper_bound)
        first_dirty = log.compaction.first_dirty_offset()
        dirty = [s for s in segments if s.next_offset > first_dirty]
        if not dirty:
            return None
        stats.first_dirty = first_dirty
        omap = self.offset_map
        omap.clear()
        self._aborted = _AbortedRanges(
            log.producers.aborted_transactions(log.log_start_offset, dirty[-1].next_offset)
        )
        map_end = self._build_map(dirty, first_dirty, stats)
        stats.map_end = map_end
        stats.keys_mapped = len(omap)
        if map_end <= first_dirty:
            raise StorageError(
                f"[{log.topic}-{log.partition}] dedupe buffer holds no key: cannot clean"
            )
        to_clean = [s for s in segments if s.base_offset < map_end]
        horizon_ms = self._clock() - log.config.delete_retention_ms
        stats.segments_before = len(to_clean)
        for run in self._runs(to_clean, log.config.segment_bytes):
            path = cleaned_path(log.directory, run[0].base_offset)
            self._write_run(run, path, map_end, first_dirty, horizon_ms, producer_batches, stats)
            if not log.compaction.replace_segments(run, path, generation, self._fault):
                stats.swaps_abandoned += 1
                _log.info(
                    "[%s-%d] log changed during cleaning: pass abandoned", log.topic, log.partition
                )
                return stats
            stats.segments_after += 1
        log.compaction.set_first_dirty_offset(map_end)
        stats.elapsed_s = time.monotonic() - t0
        return stats

    def _build_map(self, dirty: list[LogSegment], first_dirty: int, stats: CleanStats) -> int:
        omap = self.offset_map
        for seg in dirty:
            for h, batch in _batches(seg):
                if self.abort.is_set():
                    raise CleanAborted()
                if h.next_offset <= first_dirty or h.is_control or self._aborted.holds(h):
                    continue
                stats.bytes_read += len(batch)
                base = h.base_offset
                for row in _rows(h, batch):
                    offset: int = base + row[0]
                    key = row[2]
                    if offset < first_dirty or key is None:
                        continue
                    if not omap.put(key_digest(key), offset):
                        return offset  # full: this pass maps [first_dirty, offset)
        return dirty[-1].next_offset

    @staticmethod
    def _runs(segments: list[LogSegment], max_bytes: int) -> Iterator[list[LogSegment]]:
        """Consecutive segments whose sizes add up to at most `max_bytes`, whose offsets fit
        one segment's 32-bit relative offsets and whose index entries one index holds, as
        Kafka groups them (the cleaned data is no larger, so its indexes fit too)."""
        run: list[LogSegment] = []
        size = entries = time_entries = 0
        for seg in segments:
            if run and (
                size + seg.size > max_bytes
                or seg.next_offset - 1 - run[0].base_offset > _MAX_RELATIVE
                or entries + len(seg.index) >= seg.index.max_entries
                or time_entries + len(seg.time_index) >= seg.time_index.max_entries
            ):
                yield run
                run, size, entries, time_entries = [], 0, 0, 0
            run.append(seg)
            size += seg.size
            entries += len(seg.index)
            time_entries += len(seg.time_index)
        if run:
            yield run

    def _write_run(
        self,
        run: list[LogSegment],
        path: Path,
        map_end: int,
        first_dirty: int,
        horizon_ms: int,
        producer_batches: set[int],
        stats: CleanStats,
    ) -> None:
        omap = self.offset_map
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0))
        try:
            out: list[bytes] = []
            pending = 0
            last_seg = run[-1]
            for seg in run:
                for h, batch, last in _with_last(_batches(seg)):
                    if self.abort.is_set():
                        raise CleanAborted()
                    stats.bytes_read += len(batch)
                    if h.is_control or h.base_offset >= map_end:
                        out.append(batch)
                        pending += len(batch)
                        continue
                    rows = _rows(h, batch)
                    stats.records_read += len(rows)
                    kept = []
                    aborted = self._aborted.holds(h)
                    if aborted:  # an aborted transaction's records go (Kafka's cleaner)
                        stats.records_read -= len(rows)
                        rows = ()
                    base = h.base_offset
                    for row in rows:
                        offset = base + row[0]
                        key = row[2]
                        if offset >= map_end:
                            kept.append(row)
                        elif key is None or omap.get(key_digest(key)) > offset:
                            continue
                        elif (
                            row[3] is None
                            and offset < first_dirty
                            and h.max_timestamp <= horizon_ms
                        ):
                            stats.tombstones_dropped += 1
                        else:
                            kept.append(row)
                    stats.records_kept += len(kept)
                    if len(kept) == len(rows) and not aborted:
                        new = batch
                    elif (
                        kept
                        or (last and seg is last_seg)
                        or (h.producer_id >= 0 and h.last_offset in producer_batches)
                    ):
                        new = _rebuild(h, kept)
                    else:
                        continue
                    out.append(new)
                    pending += len(new)
                    if pending >= READ_CHUNK:
                        self._write_all(fd, out, stats)
                        out, pending = [], 0
            self._write_all(fd, out, stats)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            path.unlink(missing_ok=True)
            raise
        os.close(fd)

    @staticmethod
    def _write_all(fd: int, parts: list[bytes], stats: CleanStats) -> None:
        view = memoryview(b"".join(parts))
        stats.bytes_written += len(view)
        while view:
            view = view[os.write(fd, view) :]
