"""Compaction on a Log (a mixin of broker/log/log.py's Log): what the cleaner (cleaner.py) may
clean, and the atomic swap of cleaned segments, under the log's lock.

Swap protocol (Kafka's): the cleaner writes the cleaned replacement of a run of old segments to
`<base>.log.cleaned` and fsyncs it without the lock. Then, under the lock, after checking the
old segments are still the log's (no truncation, retention or close since):

    1. rename `<base>.log.cleaned` -> `<base>.log.swap`, fsync the directory  (the commit point)
    2. delete the old segments' files (.log, .index, .timeindex)
    3. rename `<base>.log.swap` -> `<base>.log`, rebuild its indexes, fsync the directory

A crash before 1 leaves a `.cleaned` file that start-up deletes (the old segments stand); from
1 on, start-up completes the swap (recovery.py `complete_swaps`). The new segment keeps the
first old segment's base offset and ends at the last one's end (the cleaner keeps the last
batch of a run, empty if need be), so segment names stay contiguous and every offset above
the cleaning point is untouched. The active segment is never part of a run.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from client.errors import InvalidRecordError
from client.fsutil import fsync_dir, write_atomic
from client.records.reader import decode_batch

from .config import LogConfig
from .handles import FileHandles
from .producer_state import ProducerStateManager
from .segment import LOG_SUFFIX, LogSegment, segment_name

_log = logging.getLogger("broker.log.log")

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"


def cleaned_path(directory: Path, base_offset: int) -> Path:
    return directory / (segment_name(base_offset, LOG_SUFFIX) + CLEANED_SUFFIX)


def swap_path(directory: Path, base_offset: int) -> Path:
    return directory / (segment_name(base_offset, LOG_SUFFIX) + SWAP_SUFFIX)


def check_keys(buf: bytes | bytearray | memoryview, headers: list[tuple], prefix: str) -> None:
    """A compacted log takes only records with a key (Kafka's rule: the cleaner could not
    keep a keyless record): InvalidRecordError otherwise. Decodes every batch (CRCs were
    checked already)."""
    for pos, h in headers:
        if h.is_control:
            continue
        for rec in decode_batch(buf, pos, check_crc=False):
            if rec.key is None:
                raise InvalidRecordError(
                    f"{prefix} compacted topic (cleanup.policy=compact) cannot accept a record "
                    f"without a key (offset delta {rec.offset - h.base_offset})"
                )


def _no_fault(step: str) -> None:
    return None


class LogCompaction:
    # the Log's state this mixin works on (set by Log.__init__)
    directory: Path
    config: LogConfig
    _clock: Callable[[], int]
    _lock: threading.Lock
    _segments: list[LogSegment]
    _bases: list[int]
    _dirty: dict[int, LogSegment]
    _dir_dirty: bool
    _generation: int
    _closed: bool
    _offline: bool
    _prefix: str
    _handles: FileHandles
    _log_start_offset: int

    def _fail(self, exc: OSError) -> Any:
        raise NotImplementedError

    def producer_state_locked(self) -> ProducerStateManager:
        raise NotImplementedError

    def cleanable_segments(self, upper_bound: int) -> tuple[list[LogSegment], int, set[int]]:
        """(the segments the cleaner may rewrite: every one before the active segment that
        ends at or below `upper_bound`, up to the first holding a record younger than
        min.compaction.lag.ms, the log's generation, the last offsets of the batches the
        producer state keeps). Any thread."""
        lag = self.config.min_compaction_lag_ms
        youngest = self._clock() - lag
        with self._lock:
            segs = []
            for s in self._segments[:-1]:
                if s.next_offset > upper_bound or (lag > 0 and s.largest_timestamp > youngest):
                    break
                segs.append(s)
            kept = {
                b.last_offset
                for entry in self.producer_state_locked().producers.values()
                for b in entry.batches
            }
            return segs, self._generation, kept

    def first_dirty_offset(self) -> int:
        """Where the last clean stopped (the cleaner checkpoint), at least the log start."""
        try:
            text = (self.directory / CLEANER_CHECKPOINT).read_text().strip()
            offset = int(text) if text else 0
        except (OSError, ValueError):
            offset = 0
        return max(offset, self._log_start_offset)

    def set_first_dirty_offset(self, offset: int) -> None:
        """Persist where the next clean starts (atomically: a crash leaves the old value, and
        the next clean redoes work already done, which changes nothing)."""
        write_atomic(self.directory / CLEANER_CHECKPOINT, f"{offset}\n")

    def _clamp_first_dirty_locked(self, end: int) -> None:
        """After a truncation: the cleaner checkpoint never stays above the log end (records
        appended again below it would count as cleaned)."""
        path = self.directory / CLEANER_CHECKPOINT
        if path.exists():
            try:
                above = int(path.read_text().strip() or 0) > end
            except ValueError:
                above = True
            if above:
                write_atomic(path, f"{end}\n")

    def replace_segments(
        self,
        old: list[LogSegment],
        cleaned: Path,
        generation: int,
        fault: Callable[[str], None] = _no_fault,
    ) -> bool:
        """Swap `cleaned` in for the contiguous run `old` (see the module docstring). False,
        with `cleaned` deleted, when the log changed since `cleanable_segments`. `fault(step)`
        is called after each step (tests inject crashes there). Raises StorageError."""
        with self._lock:
            try:
                i = self._segments.index(old[0]) if old[0] in self._segments else -1
                if (
                    self._closed
                    or self._offline
                    or self._generation != generation
                    or i < 0
                    or self._segments[i : i + len(old)] != old
                    or i + len(old) >= len(self._segments)  # never the active segment
                ):
                    cleaned.unlink(missing_ok=True)
                    return False
                base = old[0].base_offset
                swap = swap_path(self.directory, base)
                os.rename(cleaned, swap)
                fault("renamed_swap")
                fsync_dir(self.directory)
                fault("swap_durable")
                for seg in old:
                    self._dirty.pop(seg.base_offset, None)
                    seg.delete()
                    fault("deleted_old")
                os.rename(swap, self.directory / segment_name(base, LOG_SUFFIX))
                fault("renamed_log")
                new = LogSegment(self.directory, base, self.config, self._clock(), self._handles)
                new.rebuild_indexes()
                new.release_index_fds()
                assert new.next_offset == old[-1].next_offset, (new.next_offset, old[-1])
                self._segments[i : i + len(old)] = [new]
                self._bases[i : i + len(old)] = [base]
                self._dirty[base] = new  # its indexes get fsynced by the next flush
                self._dir_dirty = True
                fsync_dir(self.directory)
                fault("done")
            except OSError as exc:
                raise self._fail(exc) from exc
        return True
