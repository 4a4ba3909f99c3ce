"""Retention of one Log (held by it as `log.retention`): what decides how far the log start
offset moves up. Time- and size-based retention picks the oldest segments to delete;
DeleteRecords names an offset. Neither moves the start past the last stable offset (the
first record of a transaction not yet decided, or the high watermark), so a segment holding
an open transaction's first records is never deleted (docs/storage.md, "Retention and
transactions"). The move itself (segments wholly below the new start deleted,
the leader-epoch cache trimmed, the owner told) is the Log's, under its lock:
`Log.advance_start`, which calls the policy here with the segment list."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from client.errors import OffsetOutOfRangeError

from .segment import LogSegment

if TYPE_CHECKING:
    from .log import Log

_log = logging.getLogger("broker.log.log")


class LogRetention:
    """Any thread (the LogManager's retention task, the DeleteRecords handler, a follower
    following its leader's log start offset)."""

    def __init__(self, log: Log, clock: Callable[[], int]) -> None:
        self._log = log
        self._clock = clock

    def delete_old_segments(self, high_watermark: int | None = None) -> int:
        """Retention: delete the oldest non-active segments whose largest timestamp is older than
        retention_ms, then while the log exceeds retention_bytes; only segments wholly below
        the last stable offset: `high_watermark` or, when lower, the first offset of a
        transaction not yet decided (open, or decided by a marker the high watermark has not
        passed; with no `high_watermark`, by any marker: `_stable_bound_locked`). Nothing when cleanup.policy lacks delete. Returns the
        number of segments deleted."""
        now = self._clock()
        cfg = self._log.config
        if not cfg.delete:  # cleanup.policy=compact alone: the cleaner's, never retention's
            return 0
        prefix = self._log.prefix

        def choose(segments: Sequence[LogSegment], log_start_offset: int) -> int | None:
            total = sum(s.size for s in segments)
            n = 0
            bound: int | None = None  # the LSO, looked up once a segment is a candidate
            for seg in segments[:-1]:
                if high_watermark is not None and seg.next_offset > high_watermark:
                    break
                expired = cfg.retention_ms >= 0 and now - seg.largest_timestamp > cfg.retention_ms
                too_big = cfg.retention_bytes >= 0 and total - seg.size >= cfg.retention_bytes
                if not (expired or too_big):
                    break
                if bound is None:
                    bound = self._stable_bound_locked(segments, log_start_offset, high_watermark)
                if seg.next_offset > bound:
                    _log.info(
                        "%s retention stops at segment %d: it holds offset %d, the first of a "
                        "transaction not yet decided (last stable offset)",
                        prefix,
                        seg.base_offset,
                        bound,
                    )
                    break
                _log.info(
                    "%s retention deletes segment %d (%s)",
                    prefix,
                    seg.base_offset,
                    "retention_ms" if expired else "retention_bytes",
                )
                total -= seg.size
                n += 1
            return segments[n].base_offset if n else None  # the oldest segment kept

        return self._log.advance_start(choose)

    def _stable_bound_locked(
        self, segments: Sequence[LogSegment], log_start_offset: int, high_watermark: int | None
    ) -> int:
        """The last stable offset at `high_watermark`; with none known, the first offset of a
        transaction open or decided by any marker (each counts as not yet replicated), else
        the log end. Builds the producer state on first use (a scan of the log after its
        latest snapshot)."""
        producers = self._log.producers
        if high_watermark is not None:
            return producers.last_stable_offset_locked(high_watermark)
        first = producers.first_unstable_offset_locked(log_start_offset)
        return segments[-1].next_offset if first is None else first

    def delete_records_before(self, offset: int, high_watermark: int | None = None) -> int:
        """Advance the log start offset to `offset` (DeleteRecords) and delete the segments now
        wholly below it (never the active one). Returns the new log start offset. Raises
        OffsetOutOfRangeError above the log end offset, and, with `high_watermark` (the
        leader's DeleteRecords), above the last stable offset at that high watermark: the
        records there belong to a transaction not yet decided. Followers, which follow their
        leader's start, pass none."""
        log = self._log
        before = -1

        def choose(segments: Sequence[LogSegment], log_start_offset: int) -> int:
            nonlocal before
            end = segments[-1].next_offset
            if offset > end:
                raise OffsetOutOfRangeError(f"{log.prefix} offset {offset} above end {end}")
            if high_watermark is not None and offset > log_start_offset:
                hw = min(high_watermark, end)
                lso = log.producers.last_stable_offset_locked(hw)
                if offset > lso:
                    why = (
                        f"the last stable offset {lso}: the records from {lso} on belong to "
                        "a transaction not yet decided"
                        if lso < hw
                        else f"the high watermark {hw}"
                    )
                    raise OffsetOutOfRangeError(f"{log.prefix} offset {offset} is above {why}")
            before = log_start_offset
            return offset

        deleted = log.advance_start(choose)
        if offset <= before:
            return before
        _log.info(
            "%s log start offset %d -> %d (delete records, %d segment(s) deleted)",
            log.prefix,
            before,
            offset,
            deleted,
        )
        return offset
