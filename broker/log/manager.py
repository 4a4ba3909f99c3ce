"""LogManager: every partition log of this broker, across its log directories.

Layout of each log dir (docs/storage.md):

    <log_dir>/<topic>-<partition>/          one Log per partition replica
    <log_dir>/recovery-point-offset-checkpoint
    <log_dir>/replication-offset-checkpoint  high watermarks
    <log_dir>/log-start-offset-checkpoint
    <log_dir>/.gregor_clean_shutdown        present only between a clean close() and the next open

Checkpoints are written atomically (checkpoint.py). At start-up every log is opened; without the
clean-shutdown marker, logs recover from their recovery point. An OSError in a directory marks it
offline: its logs refuse appends, other directories keep working. Running out of file
descriptors (EMFILE/ENFILE) is not a disk failure and never marks a directory offline: segment
descriptors live in one bounded LRU per log dir (handles.py, `log.max.open.files`), and an
operation that still finds no descriptor fails alone with FileLimitError.

Threads: all methods are thread-safe (a manager lock guards the maps and the checkpoint files);
call them from I/O workers or the broker's lifecycle thread, never from an event loop.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from client.errors import StorageError
from client.fsutil import fsync_dir, make_dirs

from .checkpoint import read_offsets, write_offsets
from .cleaner_thread import CleanerSettings, LogCleaner
from .config import LogConfig
from .deleter import DirDeleter
from .flusher import PARALLELISM, Flusher, OnFlushed, OnFlushedMany, flush_each
from .handles import FileHandles, derive_max_open_files, fd_limit_error, is_fd_limit, nofile_limit
from .log import Log

_log = logging.getLogger(__name__)

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEAN_SHUTDOWN_MARKER = ".gregor_clean_shutdown"

TopicPartition = tuple[str, int]


def _now_ms() -> int:
    return int(time.time() * 1000)


def parse_partition_dir(name: str) -> TopicPartition | None:
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


def _remove_partial(directory: Path) -> None:
    """Remove a partition directory whose creation failed. Out of descriptors, listing it is
    impossible, so the files a new log makes are removed by name (a leftover only gets
    reused by the next creation of that partition)."""
    try:
        shutil.rmtree(directory)
        return
    except OSError:
        pass
    first = "0" * 20
    for name in (f"{first}.log", f"{first}.index", f"{first}.timeindex", "leader-epoch-checkpoint"):
        for path in (directory / name, directory / f"{name}.tmp"):
            try:
                path.unlink(missing_ok=True)
            except OSError:
                pass
    try:
        directory.rmdir()
    except OSError as exc:
        _log.warning("%s: partly created partition directory left behind: %s", directory, exc)


class LogManager:
    def __init__(
        self,
        log_dirs: Iterable[Path | str],
        config: LogConfig,
        clock: Callable[[], int] = _now_ms,
        *,
        topic_config: Callable[[str], LogConfig] | None = None,
        max_open_files: int = -1,
    ) -> None:
        """Open every log of `log_dirs`. `clock()` returns wall-clock milliseconds;
        `topic_config(topic)` gives a topic's LogConfig (default: `config` for all);
        `max_open_files` bounds the open segment descriptors of all dirs together (-1: half
        the process's RLIMIT_NOFILE; handles.py)."""
        self.log_dirs = [Path(d).resolve() for d in log_dirs]
        if not self.log_dirs:
            raise ValueError("LogManager needs at least one log dir")
        self.max_open_files = derive_max_open_files(max_open_files)
        per_dir = max(1, self.max_open_files // len(self.log_dirs))
        self._handles = {d: FileHandles(per_dir, str(d)) for d in self.log_dirs}
        self._counts = dict.fromkeys(self.log_dirs, 0)  # logs per dir
        _log.info(
            "file handle budget: %d open segment files (%d per log dir, log.max.open.files=%s)"
            " of an open-files limit of %d (RLIMIT_NOFILE); index files hold none",
            self.max_open_files,
            per_dir,
            max_open_files if max_open_files >= 0 else "-1: limit/2",
            nofile_limit(),
        )
        self.config = config
        self._clock = clock
        self._topic_config = topic_config or (lambda topic: config)
        self._lock = threading.RLock()
        self._logs: dict[TopicPartition, Log] = {}
        self._offline: set[Path] = set()
        self._flushers: dict[Path, Flusher] = {}
        self._deleter = DirDeleter()  # removes deleted logs' *-delete directories
        # metrics: each flusher round's duration in seconds and the record bytes it made
        # durable (set before start_flushers)
        self.on_flush_round: Callable[[float, int], None] | None = None
        self.cleaner: LogCleaner | None = None  # start_cleaner
        self._closed = False
        for log_dir in self.log_dirs:
            try:
                self._open_dir(log_dir)
            except OSError as exc:
                _log.error("log dir %s failed at start-up, marking it offline: %s", log_dir, exc)
                self._offline.add(log_dir)

    # -- start-up ------------------------------------------------------------------------------

    def _open_dir(self, log_dir: Path) -> None:
        make_dirs(log_dir)
        marker = log_dir / CLEAN_SHUTDOWN_MARKER
        clean = marker.exists()
        recovery_points = read_offsets(log_dir / RECOVERY_POINT_CHECKPOINT)
        start_offsets = read_offsets(log_dir / LOG_START_OFFSET_CHECKPOINT)
        found = []
        for entry in sorted(log_dir.iterdir()):
            tp = parse_partition_dir(entry.name) if entry.is_dir() else None
            if tp is None:
                if entry.is_dir() and entry.name.endswith("-delete"):
                    shutil.rmtree(entry)
                continue
            if tp in self._logs:
                raise StorageError(f"partition {tp[0]}-{tp[1]} found in two log dirs: {entry}")
            found.append((entry, tp))
        if not found and not clean and not (log_dir / RECOVERY_POINT_CHECKPOINT).exists():
            _log.info("opening log dir %s (new: no logs yet)", log_dir)
        else:
            state = "clean" if clean else "UNCLEAN"
            _log.info("opening log dir %s (%s shutdown, %d logs)", log_dir, state, len(found))
        for entry, tp in found:
            self._logs[tp] = self._new_log(
                entry, tp, clean, recovery_points.get(tp, 0), start_offsets.get(tp)
            )
            self._counts[log_dir] += 1
        if not clean:  # make what recovery kept durable: many fdatasyncs, so in parallel
            self._flush_all([self._logs[tp] for _entry, tp in found])
        self._handles[log_dir].close_all_idle()  # inactive partitions hold no descriptor
        if clean:
            marker.unlink()
            fsync_dir(log_dir)

    def _flush_all(self, logs: list[Log]) -> None:
        """Flush `logs` on up to PARALLELISM threads (the file system commits concurrent
        fdatasyncs together); a failure marks the dir offline and is raised."""
        with ThreadPoolExecutor(PARALLELISM, thread_name_prefix="recovery-flush") as pool:
            for _ in pool.map(lambda log: log.flush(), logs):
                pass

    def _new_log(
        self, directory: Path, tp: TopicPartition, clean: bool, recovery_point: int, lso: int | None
    ) -> Log:
        return Log(
            directory,
            tp[0],
            tp[1],
            self._topic_config(tp[0]),
            self._clock,
            recovery_point=recovery_point,
            log_start_offset=lso,
            clean=clean,
            on_storage_error=self._on_storage_error,
            on_log_start_offset_changed=self._on_log_start_offset_changed,
            on_truncated=self._on_log_truncated,
            handles=self._handles[directory.parent],
            flush_recovered=False,  # _open_dir flushes them all in parallel
            log_dir=next(d for d in self.log_dirs if d == directory.parent),
        )

    def handles(self, log_dir: Path) -> FileHandles:
        """The open-segment cache of `log_dir` (statistics for tests and benchmarks)."""
        return self._handles[Path(log_dir).resolve()]

    def open_segment_files(self) -> int:
        """Segment descriptors open now, over every log dir."""
        return sum(h.open_count for h in self._handles.values())

    # -- logs ----------------------------------------------------------------------------------

    def get(self, topic: str, partition: int) -> Log | None:
        with self._lock:
            return self._logs.get((topic, partition))

    def logs(self) -> dict[TopicPartition, Log]:
        with self._lock:
            return dict(self._logs)

    def get_or_create(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        """The log of (topic, partition), created empty in the online dir with the fewest logs.
        Raises StorageError when every log dir is offline."""
        tp = (topic, partition)
        with self._lock:
            log = self._logs.get(tp)
            if log is not None:
                return log
            online = [d for d in self.log_dirs if d not in self._offline]
            if not online:
                raise StorageError("every log dir is offline")
            counts = self._counts  # kept up to date: no walk over every log per creation
            log_dir = min(online, key=lambda d: counts[d])
            directory = log_dir / f"{topic}-{partition}"
            try:
                directory.mkdir(exist_ok=True)  # a refused creation may have left it
                fsync_dir(log_dir)
                log = Log(
                    directory,
                    topic,
                    partition,
                    config or self._topic_config(topic),
                    self._clock,
                    on_storage_error=self._on_storage_error,
                    on_log_start_offset_changed=self._on_log_start_offset_changed,
                    on_truncated=self._on_log_truncated,
                    handles=self._handles[log_dir],
                    log_dir=log_dir,
                )
            except OSError as exc:
                if is_fd_limit(exc):  # refused, nothing offline: remove what was made
                    _remove_partial(directory)
                    _log.debug("cannot create log %s-%d: %s", topic, partition, exc)
                    if isinstance(exc, StorageError):
                        raise
                    raise fd_limit_error(exc, f"creating log {topic}-{partition}") from exc
                self._mark_offline(log_dir, exc)
                raise StorageError(exc.errno, f"creating {directory}: {exc}") from exc
            log.release_fds()  # a new partition holds no descriptor until it is used
            self._logs[tp] = log
            self._counts[log_dir] += 1
            _log.info("created log %s-%d in %s", topic, partition, log_dir)
            return log

    def delete(self, topic: str, partition: int) -> bool:
        """Close and remove the log's directory (renamed to *-delete first, then removed)."""
        return self.delete_many([(topic, partition)]) == 1

    def delete_many(self, tps: Iterable[TopicPartition]) -> int:
        """Delete the logs of `tps` (those that exist): each directory is renamed to
        *-delete (one directory fsync per log dir makes the renames durable: an unfinished
        removal is finished at start-up), then removed (deleter.py: one with a large file on the
        DirDeleter's thread, in steps, not to stall other fsyncs), and each log dir's checkpoints are
        rewritten once for all of them. Returns how many logs were deleted. A cleaning pass
        over one of them is waited for (the cleaner writes into the directory)."""
        tps = list(tps)
        cleaner = self.cleaner
        if cleaner is None:
            return self._delete_many(tps)
        with cleaner.paused(tps):
            return self._delete_many(tps)

    def _delete_many(self, tps: list[TopicPartition]) -> int:
        with self._lock:
            doomed: dict[Path, list[tuple[Log, Path]]] = {}
            for tp in tps:
                log = self._logs.pop(tp, None)
                if log is None:
                    continue
                log.close()
                self._counts[log.log_dir] -= 1
                target = log.log_dir / f"{log.directory.name}.{uuid.uuid4().hex}-delete"
                doomed.setdefault(log.log_dir, []).append((log, target))
            for log_dir, logs in doomed.items():
                try:
                    for log, target in logs:
                        os.rename(log.directory, target)
                    fsync_dir(log_dir)
                    for log, target in logs:
                        # a large one on the deleter's thread, a step at a time (deleter.py)
                        self._deleter.remove(target)
                        _log.info("deleted log %s-%d", log.topic, log.partition)
                except OSError as exc:
                    self._mark_offline(log_dir, exc)
                    raise StorageError(exc.errno, f"deleting logs in {log_dir}: {exc}") from exc
                self._write_dir_checkpoints(log_dir)
            return sum(len(logs) for logs in doomed.values())

    # -- offline directories -------------------------------------------------------------------

    def offline_dirs(self) -> list[Path]:
        with self._lock:
            return sorted(self._offline)

    def is_offline(self, log: Log) -> bool:
        return log.log_dir in self._offline

    def _on_storage_error(self, log: Log, exc: OSError) -> None:
        self._mark_offline(log.log_dir, exc)

    def _mark_offline(self, log_dir: Path, exc: OSError) -> None:
        if is_fd_limit(exc):  # out of descriptors is not a disk failure
            _log.error("log dir %s stays online: %s", log_dir, exc)
            return
        with self._lock:
            if log_dir in self._offline:
                return
            self._offline.add(log_dir)
            affected = [log for log in self._logs.values() if log.log_dir == log_dir]
            for log in affected:
                log.mark_offline()
        _log.error("log dir %s is OFFLINE (%d logs): %s", log_dir, len(affected), exc)

    # -- checkpoints ---------------------------------------------------------------------------

    def _logs_in(self, log_dir: Path) -> dict[TopicPartition, Log]:
        if len(self.log_dirs) == 1:  # the common case: no walk comparing paths
            return dict(self._logs) if log_dir == self.log_dirs[0] else {}
        return {tp: log for tp, log in self._logs.items() if log.log_dir == log_dir}

    def _write(self, log_dir: Path, name: str, offsets: dict[TopicPartition, int]) -> None:
        try:
            write_offsets(log_dir / name, offsets)
        except OSError as exc:
            self._mark_offline(log_dir, exc)
            raise StorageError(exc.errno, f"writing {log_dir / name}: {exc}") from exc

    def _write_dir_checkpoints(self, log_dir: Path, also: Log | None = None) -> None:
        """Recovery points and log start offsets of `log_dir`'s logs (`also`: one not
        registered yet). The manager's lock held."""
        logs = self._logs_in(log_dir)
        if also is not None:
            logs[(also.topic, also.partition)] = also
        self._write(
            log_dir, RECOVERY_POINT_CHECKPOINT, {tp: log.flushed_offset for tp, log in logs.items()}
        )
        self._write(
            log_dir,
            LOG_START_OFFSET_CHECKPOINT,
            {tp: log.log_start_offset for tp, log in logs.items()},
        )

    def _on_log_truncated(self, log: Log) -> None:
        """A log was truncated (its lock held): rewrite its dir's recovery points and log
        start offsets (Log._report_truncation_locked says why)."""
        with self._lock:
            if log.log_dir not in self._offline:
                self._write_dir_checkpoints(log.log_dir, also=log)

    def _on_log_start_offset_changed(self, log: Log) -> None:
        log_dir = log.log_dir
        with self._lock:
            if log_dir in self._offline:
                return
            logs = self._logs_in(log_dir)
            logs[(log.topic, log.partition)] = log
            self._write(
                log_dir,
                LOG_START_OFFSET_CHECKPOINT,
                {tp: lg.log_start_offset for tp, lg in logs.items()},
            )

    def checkpoint_recovery_points(self) -> None:
        """Write each online dir's recovery points (= flushed offsets) and log start offsets.
        Call periodically; a stale recovery point only makes recovery scan more."""
        with self._lock:
            for log_dir in self.log_dirs:
                if log_dir not in self._offline:
                    self._write_dir_checkpoints(log_dir)

    def checkpoint_high_watermarks(self, high_watermarks: dict[TopicPartition, int]) -> None:
        """Persist high watermarks, each in the dir holding its log (others are ignored)."""
        with self._lock:
            per_dir: dict[Path, dict[TopicPartition, int]] = {d: {} for d in self.log_dirs}
            for tp, hw in high_watermarks.items():
                log = self._logs.get(tp)
                if log is not None:
                    per_dir[log.log_dir][tp] = hw
            for log_dir, offsets in per_dir.items():
                if log_dir not in self._offline:
                    self._write(log_dir, HIGH_WATERMARK_CHECKPOINT, offsets)

    def read_high_watermarks(self) -> dict[TopicPartition, int]:
        """High watermarks from every online dir's replication-offset-checkpoint."""
        out: dict[TopicPartition, int] = {}
        with self._lock:
            for log_dir in self.log_dirs:
                if log_dir not in self._offline:
                    out.update(read_offsets(log_dir / HIGH_WATERMARK_CHECKPOINT))
        return out

    # -- periodic tasks ------------------------------------------------------------------------

    def run_retention(self, high_watermarks: dict[TopicPartition, int] | None = None) -> int:
        """Apply retention to every online log (segments wholly below its high watermark when
        given). Returns segments deleted. Call periodically (log.retention.check.interval.ms)."""
        deleted = 0
        for tp, log in self.logs().items():
            if log.offline:
                continue
            hw = None if high_watermarks is None else high_watermarks.get(tp, log.log_start_offset)
            try:
                deleted += log.retention.delete_old_segments(hw)
            except StorageError as exc:
                _log.error("[%s-%d] retention failed: %s", tp[0], tp[1], exc)
        return deleted

    def remove_expired_producers(self) -> int:
        """Drop, in every online log, the producer state idle past its
        producer_id_expiration_ms with no open transaction (producer_state.py). Returns how
        many producers went. Call periodically (producer.id.expiration.check.interval.ms)."""
        removed = 0
        for log in self.logs().values():
            if not log.offline:
                removed += log.producers.remove_expired()
        return removed

    def flush_due(self) -> None:
        """With flush_on_ack=False: request flushes for logs due under flush_messages/flush_ms."""
        for log in self.logs().values():
            if not log.offline and log.durability.should_flush():
                self.request_flush(log)

    # -- group commit --------------------------------------------------------------------------

    def start_flushers(
        self, on_flushed: OnFlushed | None = None, on_flushed_many: OnFlushedMany | None = None
    ) -> None:
        """Start one Flusher thread per log dir; stopped by close(). Flushed offsets are
        reported through `on_flushed_many` (a round's at once) when given, else `on_flushed`."""
        with self._lock:
            for log_dir in self.log_dirs:
                if log_dir not in self._flushers:
                    flusher = Flusher(
                        log_dir.name,
                        None if on_flushed_many is not None else on_flushed,
                        directory=log_dir,
                        on_flushed_many=on_flushed_many,
                    )
                    flusher.on_round = self.on_flush_round
                    self._flushers[log_dir] = flusher.start()

    def flusher_for(self, log: Log) -> Flusher:
        return self._flushers[log.log_dir]

    def request_flush(self, log: Log) -> None:
        """Wake the flusher of the log's dir (start_flushers first)."""
        self.request_flush_many((log,))

    def request_flush_many(self, logs: Iterable[Log]) -> None:
        """`request_flush` for many logs: each dir's flusher is woken once, for all of its logs
        (one group-commit round covers a whole request)."""
        for log_dir, dir_logs in self._per_dir(logs):
            flusher = self._flushers.get(log_dir)
            if flusher is None:
                raise RuntimeError(f"no flusher for {log_dir}: call start_flushers() first")
            flusher.request_flush_many(dir_logs)

    def _per_dir(self, logs: Iterable[Log]) -> Iterable[tuple[Path, list[Log]]]:
        """(log dir, its logs among `logs`) for each dir holding some."""
        if len(self.log_dirs) == 1:  # the common case: every log is in it, none to look at
            in_dir = list(logs)
            return ((self.log_dirs[0], in_dir),) if in_dir else ()
        return _by_dir(logs).items()

    def flush_now(self, logs: list[Log]) -> None:
        """Flush `logs` on the calling thread before returning: per log dir one syncfs for many
        (Flusher.flush_now), else each log on its own (also without started flushers)."""
        for log_dir, dir_logs in self._per_dir(logs):
            flusher = self._flushers.get(log_dir)
            if flusher is not None:
                flusher.flush_now(dir_logs)
            else:
                flush_each(dir_logs)

    # -- compaction ----------------------------------------------------------------------------

    def start_cleaner(
        self,
        settings: CleanerSettings,
        high_watermarks: Callable[[], dict[TopicPartition, int]] | None = None,
    ) -> LogCleaner:
        """Start the log cleaner thread (cleaner_thread.py; not when settings.enable is
        False: the LogCleaner is still returned, for clean_once); stopped by close()."""
        with self._lock:
            if self.cleaner is None:
                self.cleaner = LogCleaner(self.logs, settings, high_watermarks, self._clock)
                self.cleaner.start()
            return self.cleaner

    def close(self, clean: bool = True) -> None:
        """Stop the cleaner and flushers; with `clean`, flush every online log, write checkpoints and the
        clean-shutdown marker. `clean=False` only closes files (crash simulation in tests)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            flushers, self._flushers = list(self._flushers.values()), {}
            cleaner, self.cleaner = self.cleaner, None
        if cleaner is not None:
            cleaner.stop()
        for flusher in flushers:
            flusher.stop()
        self._deleter.close()
        with self._lock:
            if clean:
                for log in self._logs.values():
                    if log.log_dir not in self._offline:
                        try:
                            log.flush()
                        except StorageError as exc:
                            _log.error(
                                "[%s-%d] flush at close failed: %s", log.topic, log.partition, exc
                            )
            for log_dir in self.log_dirs if clean else []:
                if log_dir in self._offline:
                    continue
                try:
                    self._write_dir_checkpoints(log_dir)
                except StorageError:
                    continue
            for log in self._logs.values():
                log.close()
            for log_dir in self.log_dirs if clean else []:
                if log_dir in self._offline:
                    continue
                try:
                    (log_dir / CLEAN_SHUTDOWN_MARKER).touch()
                    fsync_dir(log_dir)
                except OSError as exc:
                    _log.error("log dir %s: clean-shutdown marker not written: %s", log_dir, exc)


def _by_dir(logs: Iterable[Log]) -> dict[Path, list[Log]]:
    """`logs` grouped by their log dir (each dir has its own flusher)."""
    by_dir: dict[Path, list[Log]] = {}
    for log in logs:
        by_dir.setdefault(log.log_dir, []).append(log)
    return by_dir
