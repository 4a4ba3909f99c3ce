"""Retention of one Log (held by it as `log.retention`): what decides how far the log start
offset moves up. Time- and size-based retention picks the oldest segments to delete;
DeleteRecords names an offset. The move itself (segments wholly below the new start deleted,
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
        `high_watermark` when given; nothing when cleanup.policy lacks delete. Returns the
        number of segments deleted."""
        now = self._clock()
        cfg = self._log.config
        if not cfg.delete:  # cleanup.policy=compact alone: the cleaner's, never retention's
            return 0
        prefix = self._log.prefix

        def choose(segments: Sequence[LogSegment], log_start_offset: int) -> int | None:
            total = sum(s.size for s in segments)
            n = 0
            for seg in segments[:-1]:
                if high_watermark is not None and seg.next_offset > high_watermark:
                    break
                expired = cfg.retention_ms >= 0 and now - seg.largest_timestamp > cfg.retention_ms
                too_big = cfg.retention_bytes >= 0 and total - seg.size >= cfg.retention_bytes
                if not (expired or too_big):
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

    def delete_records_before(self, offset: int) -> int:
        """Advance the log start offset to `offset` (DeleteRecords) and delete the segments now
        wholly below it (never the active one). Returns the new log start offset. Raises
        OffsetOutOfRangeError above the log end offset."""
        log = self._log
        before = -1

        def choose(segments: Sequence[LogSegment], log_start_offset: int) -> int:
            nonlocal before
            end = segments[-1].next_offset
            if offset > end:
                raise OffsetOutOfRangeError(f"{log.prefix} offset {offset} above end {end}")
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
