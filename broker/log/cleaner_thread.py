"""LogCleaner: the broker's background thread that compacts logs (Kafka's LogCleaner).

Each round it looks at every online log whose `cleanup.policy` includes compact, computes its
dirty ratio (bytes of cleanable segments past the cleaner checkpoint / bytes of all cleanable
segments, cleaner.py) below its upper bound (the high watermark and the flushed offset: never
records a follower could still truncate), and cleans the dirtiest one whose ratio reaches its
`min.cleanable.dirty.ratio`; when none does, it sleeps `log.cleaner.backoff.ms` (or until
woken). A log whose cleaning fails (a corrupt batch, a storage error) is logged and skipped
for 10 backoffs; other logs go on being cleaned. One thread (`log.cleaner.threads` = 1) with
one OffsetMap of `log.cleaner.dedupe.buffer.size` bytes.

Owned and stopped by the LogManager (start_cleaner / close). `clean_once` may be called by
tests instead of the thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from client.config.loader import Config

from .cleaner import CleanAborted, Cleaner, CleanStats

_log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
_SKIP_BACKOFFS = 10
STATS_KEPT = 100


@dataclass(frozen=True)
class CleanerSettings:
    enable: bool = True
    dedupe_buffer_bytes: int = 128 * 1024 * 1024
    backoff_ms: int = 15_000

    @classmethod
    def from_config(cls, config: Config) -> CleanerSettings:
        return cls(
            enable=bool(config.log_cleaner_enable),
            dedupe_buffer_bytes=int(config.log_cleaner_dedupe_buffer_size),
            backoff_ms=int(config.log_cleaner_backoff_ms),
        )


class LogCleaner:
    def __init__(
        self,
        logs: Callable[[], dict[TopicPartition, Any]],
        settings: CleanerSettings,
        high_watermarks: Callable[[], dict[TopicPartition, int]] | None = None,
        clock: Callable[[], int] | None = None,
        fault: Callable[[str], None] | None = None,
    ) -> None:
        """`logs()`: the broker's logs; `high_watermarks()`: their high watermarks (None:
        every flushed record may be cleaned, for a log used alone)."""
        self._logs = logs
        self.settings = settings
        self._hws = high_watermarks
        kw = {} if fault is None else {"fault": fault}
        self.cleaner = Cleaner(settings.dedupe_buffer_bytes, clock, **kw)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._skip_until: dict[TopicPartition, float] = {}
        self._mutex = threading.Lock()  # guards _paused and _cleaning
        self._pass_lock = threading.Lock()  # held by the cleaner for one pass
        self._paused: set[TopicPartition] = set()
        self._cleaning: TopicPartition | None = None
        self.stats: list[CleanStats] = []  # the latest passes (at most STATS_KEPT)
        self.passes = 0

    def _upper_bound(
        self, tp: TopicPartition, log: Any, hws: dict[TopicPartition, int] | None
    ) -> int:
        bound = log.flushed_offset
        if hws is not None:
            bound = min(bound, hws.get(tp, log.log_start_offset))
        return int(bound)

    def pick(self) -> tuple[TopicPartition, Any, int] | None:
        """The compacted log with the highest dirty ratio at or above its minimum, or None."""
        hws = self._hws() if self._hws is not None else None
        now = time.monotonic()
        best = None
        best_ratio = -1.0
        for tp, log in self._logs().items():
            if (
                not log.config.compact
                or log.offline
                or self._skip_until.get(tp, 0) > now
                or tp in self._paused
            ):
                continue
            bound = self._upper_bound(tp, log, hws)
            try:
                ratio, dirty = self.cleaner.dirty_ratio(log, bound)
            except Exception as exc:  # e.g. its log dir failed: the others go on
                self._skip(tp, exc)
                continue
            if dirty and ratio >= log.config.min_cleanable_dirty_ratio and ratio > best_ratio:
                best, best_ratio = (tp, log, bound), ratio
        return best

    def clean_once(self) -> CleanStats | None:
        """Clean the dirtiest log one pass; None when no log needs it. Never raises for one
        log's failure (it is logged, and the log skipped for a while)."""
        with self._pass_lock:
            picked = self.pick()
            if picked is None:
                return None
            tp, log, bound = picked
            with self._mutex:
                if tp in self._paused:
                    return None
                self._cleaning = tp
            try:
                return self._clean(tp, log, bound)
            finally:
                with self._mutex:
                    self._cleaning = None

    @contextmanager
    def paused(self, tps: Iterable[TopicPartition]) -> Iterator[None]:
        """No pass over the logs of `tps` while inside (one under way is waited for): the
        LogManager deletes logs inside it."""
        tps = set(tps)
        with self._mutex:
            self._paused |= tps
            busy = self._cleaning in tps
        try:
            if busy:
                with self._pass_lock:
                    pass
            yield
        finally:
            with self._mutex:
                self._paused -= tps

    def _clean(self, tp: TopicPartition, log: Any, bound: int) -> CleanStats | None:
        try:
            stats = self.cleaner.clean(log, bound)
        except CleanAborted:
            _log.info("[%s-%d] cleaning stopped: the broker is shutting down", tp[0], tp[1])
            return None
        except Exception as exc:
            self._skip(tp, exc)
            return None
        if stats is not None:
            self.passes += 1
            self.stats.append(stats)
            del self.stats[:-STATS_KEPT]
            _log.info(
                "[%s-%d] cleaned [%d, %d): %d keys, %d -> %d segments, %d -> %d bytes, "
                "%d of %d records kept, %d tombstones dropped, %.3f s",
                tp[0], tp[1], stats.first_dirty, stats.map_end, stats.keys_mapped,
                stats.segments_before, stats.segments_after, stats.bytes_read,
                stats.bytes_written, stats.records_kept, stats.records_read,
                stats.tombstones_dropped, stats.elapsed_s,
            )  # fmt: skip
        return stats

    def _skip(self, tp: TopicPartition, exc: Exception) -> None:
        self._skip_until[tp] = time.monotonic() + _SKIP_BACKOFFS * self.settings.backoff_ms / 1000
        _log.error("[%s-%d] cleaning failed, skipped for a while: %r", tp[0], tp[1], exc)

    # -- the thread ----------------------------------------------------------------------------

    def start(self) -> LogCleaner:
        if self.settings.enable and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="log-cleaner", daemon=True)
            self._thread.start()
        return self

    def wake(self) -> None:
        """Look for work now instead of at the end of the backoff."""
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                stats = self.clean_once()
            except Exception:  # pick() itself failed: a bug, logged; the thread goes on
                _log.exception("log cleaner round failed")
                stats = None
            if stats is None:
                self._wake.wait(self.settings.backoff_ms / 1000)
                self._wake.clear()

    def stop(self) -> None:
        """Stop the thread; a pass under way is given up at its next batch."""
        self._stop.set()
        self.cleaner.abort.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(30.0)
            self._thread = None
