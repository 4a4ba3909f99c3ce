"""Retention on a Log (a mixin of broker/log/log.py's Log): time- and size-based deletion of
the oldest segments, DeleteRecords (advance the log start offset), both under the log's lock."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from client.errors import OffsetOutOfRangeError

from .config import LogConfig
from .epoch_cache import LeaderEpochCache
from .segment import LogSegment

_log = logging.getLogger("broker.log.log")
T = TypeVar("T")


class LogRetention:
    # the Log's state this mixin works on (set by Log.__init__)
    config: LogConfig
    epoch_cache: LeaderEpochCache
    _clock: Callable[[], int]
    _lock: threading.Lock
    _segments: list[LogSegment]
    _bases: list[int]
    _prefix: str
    _log_start_offset: int
    _on_lso_changed: Callable[[Any], None] | None

    def _end(self) -> int:
        raise NotImplementedError

    def _guard(self, fn: Callable[..., T], *args: object) -> T:
        raise NotImplementedError

    def _delete_segment_locked(self, seg: LogSegment) -> None:
        raise NotImplementedError

    def delete_old_segments(self, high_watermark: int | None = None) -> int:
        """Retention: delete the oldest non-active segments whose largest timestamp is older than
        retention_ms, then while the log exceeds retention_bytes; only segments wholly below
        `high_watermark` when given; nothing when cleanup.policy lacks delete. Returns the
        number of segments deleted."""
        now = self._clock()
        cfg = self.config
        if not cfg.delete:  # cleanup.policy=compact alone: the cleaner's, never retention's
            return 0
        with self._lock:
            deleted = 0
            total = sum(s.size for s in self._segments)
            while len(self._segments) > 1:
                seg = self._segments[0]
                if high_watermark is not None and seg.next_offset > high_watermark:
                    break
                expired = cfg.retention_ms >= 0 and now - seg.largest_timestamp > cfg.retention_ms
                too_big = cfg.retention_bytes >= 0 and total - seg.size >= cfg.retention_bytes
                if not (expired or too_big):
                    break
                _log.info(
                    "%s retention deletes segment %d (%s)",
                    self._prefix,
                    seg.base_offset,
                    "retention_ms" if expired else "retention_bytes",
                )
                self._segments.pop(0)
                self._bases.pop(0)
                total -= seg.size
                self._guard(self._delete_segment_locked, seg)
                deleted += 1
            if deleted:
                self._advance_start_locked(self._segments[0].base_offset)
        if deleted and self._on_lso_changed is not None:
            self._on_lso_changed(self)
        return deleted

    def delete_records_before(self, offset: int) -> int:
        """Advance the log start offset to `offset` (DeleteRecords) and delete the segments now
        wholly below it (never the active one). Returns the new log start offset."""
        with self._lock:
            if offset > self._end():
                raise OffsetOutOfRangeError(
                    f"{self._prefix} offset {offset} above end {self._end()}"
                )
            if offset <= self._log_start_offset:
                return self._log_start_offset
            deleted = 0
            while len(self._segments) > 1 and self._segments[1].base_offset <= offset:
                self._bases.pop(0)
                self._guard(self._delete_segment_locked, self._segments.pop(0))
                deleted += 1
            _log.info(
                "%s log start offset %d -> %d (delete records, %d segment(s) deleted)",
                self._prefix,
                self._log_start_offset,
                offset,
                deleted,
            )
            self._advance_start_locked(offset)
        if self._on_lso_changed is not None:
            self._on_lso_changed(self)
        return offset

    def _advance_start_locked(self, offset: int) -> None:
        if offset > self._log_start_offset:
            self._log_start_offset = offset
            self._guard(self.epoch_cache.truncate_from_start, offset)
