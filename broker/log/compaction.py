"""Compaction of one Log (held by it as `log.compaction`): what the cleaner (cleaner.py) may
clean, where the last clean stopped (the cleaner checkpoint file, this object's state), and the
atomic swap of cleaned segments, under the log's lock (the Log splices the new segment into
its list: `Log.splice_locked`).

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
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from client.errors import InvalidRecordError
from client.fsutil import fsync_dir, write_atomic
from client.records.reader import decode_batch

from .segment import LOG_SUFFIX, LogSegment, segment_name

if TYPE_CHECKING:
    from .handles import FileHandles
    from .log import Log

_log = logging.getLogger("broker.log.log")

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"


def cleaned_path(directory: Path, base_offset: int) -> Path:
    return directory / (segment_name(base_offset, LOG_SUFFIX) + CLEANED_SUFFIX)


def swap_path(directory: Path, base_offset: int) -> Path:
    return directory / (segment_name(base_offset, LOG_SUFFIX) + SWAP_SUFFIX)


def check_keys(
    buf: bytes | bytearray | memoryview, headers: list[tuple[Any, ...]], prefix: str
) -> None:
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
    """Any thread (the cleaner's, and the Log's truncation for `clamp_first_dirty_locked`)."""

    def __init__(self, log: Log, clock: Callable[[], int], handles: FileHandles) -> None:
        self._log = log
        self._clock = clock
        self._handles = handles  # for the segment the swap opens
        self._checkpoint = log.directory / CLEANER_CHECKPOINT

    def cleanable_segments(self, upper_bound: int) -> tuple[list[LogSegment], int, set[int]]:
        """(the segments the cleaner may rewrite: every one before the active segment that
        ends at or below `upper_bound`, up to the first holding a record younger than
        min.compaction.lag.ms, the log's generation, the last offsets of the batches the
        producer state keeps). `upper_bound` is lowered to the first offset of a transaction
        not known decided (and replicated). Any thread."""
        log = self._log
        lag = log.config.min_compaction_lag_ms
        youngest = self._clock() - lag
        with log.lock:
            # nothing at or past an undecided transaction (Kafka: below the last stable offset)
            unstable = log.producers.first_uncleanable_locked(upper_bound)
            if unstable is not None:
                upper_bound = min(upper_bound, unstable)
            segs = []
            for s in log.segments[:-1]:
                if s.next_offset > upper_bound or (lag > 0 and s.largest_timestamp > youngest):
                    break
                segs.append(s)
            kept = {
                b.last_offset
                for entry in log.producers.state_locked().producers.values()
                for b in entry.batches
            }
            return segs, log.generation, kept

    def first_dirty_offset(self) -> int:
        """Where the last clean stopped (the cleaner checkpoint), at least the log start."""
        try:
            text = self._checkpoint.read_text().strip()
            offset = int(text) if text else 0
        except (OSError, ValueError):
            offset = 0
        return max(offset, self._log.log_start_offset)

    def set_first_dirty_offset(self, offset: int) -> None:
        """Persist where the next clean starts (atomically: a crash leaves the old value, and
        the next clean redoes work already done, which changes nothing)."""
        write_atomic(self._checkpoint, f"{offset}\n")

    def clamp_first_dirty_locked(self, end: int) -> None:
        """After a truncation (the log's lock held): the cleaner checkpoint never stays above
        the log end (records appended again below it would count as cleaned)."""
        path = self._checkpoint
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
        log = self._log
        directory = log.directory
        with log.lock:
            try:
                segments = log.segments
                i = segments.index(old[0]) if old[0] in segments else -1
                if (
                    log.closed
                    or log.offline
                    or log.generation != generation
                    or i < 0
                    or segments[i : i + len(old)] != old
                    or i + len(old) >= len(segments)  # never the active segment
                ):
                    cleaned.unlink(missing_ok=True)
                    return False
                base = old[0].base_offset
                swap = swap_path(directory, base)
                os.rename(cleaned, swap)
                fault("renamed_swap")
                fsync_dir(directory)
                fault("swap_durable")
                for seg in old:
                    log.delete_segment_locked(seg)
                    fault("deleted_old")
                os.rename(swap, directory / segment_name(base, LOG_SUFFIX))
                fault("renamed_log")
                new = LogSegment(directory, base, log.config, self._clock(), self._handles)
                new.rebuild_indexes()
                new.release_index_fds()
                log.splice_locked(old, new)
                fsync_dir(directory)
                fault("done")
            except OSError as exc:
                raise log.fail(exc) from exc
        return True
