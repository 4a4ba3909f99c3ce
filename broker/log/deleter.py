"""DirDeleter: removes the directories of deleted logs (renamed *-delete by LogManager) on its
own thread, cutting each file down in steps before it is unlinked.

    deleter = DirDeleter()                 # LogManager owns one
    deleter.remove(Path(".../orders-3.1f2e...-delete"))   # small: now; large: submit()ted
    deleter.close()                        # what is left is removed at the next start-up

Why in steps: unlinking a file of hundreds of MB frees all its blocks in one journal
transaction (ext4; with the `discard` mount option they are also trimmed then), and every fsync
on that file system waits for that commit, including the other brokers' on the same disk. A
partition moved away by a reassignment is such a file: beside the unlink of a 256 MB file a
100 B append's fdatasync took 40-60 ms instead of ~5 (an acks=all producer's p99 during a move
showed it); truncated STEP_BYTES at a time with PAUSE_S between, no fdatasync waited more than
usual (docs/operations.md, "Growing and shrinking a cluster"). Kafka also deletes a log's files
asynchronously (file.delete.delay.ms), after renaming its directory *-delete.

A directory whose files are all at most one step (an empty or small partition: the 1,000 of a
decommission) is removed on the caller's thread at once, as before: nothing to spread, and
nothing left running beside the log creations that follow. Larger ones are not removed on the
caller's thread: 256 MB takes ~0.3 s this way, which the metadata applier (a
reassignment's removed replica) or a DeleteTopics should not wait for, nor hold the
LogManager's lock meanwhile. The rename (under the lock, made durable by a directory fsync)
is what deletes the log; an unfinished removal is finished at the next start-up.

Threads: submit and close from any thread; the removal on the deleter's own thread (started
with the first submit).
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

_log = logging.getLogger(__name__)

STEP_BYTES = 8 * 1024 * 1024  # cut off per truncate
PAUSE_S = 0.01  # between two cuts (~800 MB/s at most)


def cut_points(size: int, step: int = STEP_BYTES) -> list[int]:
    """The sizes a file of `size` bytes is truncated to, one step at a time, ending at 0
    (nothing for an empty file)."""
    points = []
    while size > 0:
        size = max(0, size - step)
        points.append(size)
    return points


def largest_file(path: Path) -> int:
    """The size of the largest regular file directly in directory `path` (0: none)."""
    sizes = [e.stat().st_size for e in os.scandir(path) if e.is_file(follow_symlinks=False)]
    return max(sizes, default=0)


def remove_gradually(
    path: Path,
    step: int = STEP_BYTES,
    pause: float = PAUSE_S,
    sleep: Callable[[float], None] = time.sleep,
    stop: Callable[[], bool] = lambda: False,
) -> bool:
    """Remove directory `path`: each regular file larger than `step` is truncated by `step`
    bytes at a time, `sleep(pause)` after each cut, then everything is removed. Returns False
    when `stop()` turned true first (the directory is left, partly cut)."""
    for entry in sorted(path.iterdir()):
        if not entry.is_file() or entry.is_symlink():
            continue
        size = entry.stat().st_size
        if size <= step:
            continue
        fd = os.open(entry, os.O_WRONLY)
        try:
            for point in cut_points(size, step):
                if stop():
                    return False
                os.ftruncate(fd, point)
                sleep(pause)
        finally:
            os.close(fd)
    shutil.rmtree(path)
    return True


class DirDeleter:
    def __init__(
        self,
        step: int = STEP_BYTES,
        pause: float = PAUSE_S,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self._step, self._pause = step, pause
        self._cond = threading.Condition()
        self._queue: deque[Path] = deque()
        self._closed = False
        self._busy = False
        self._thread: threading.Thread | None = None
        # the pause waits on the condition, so close() cuts it short
        self._sleep = sleep or self._wait

    def _wait(self, seconds: float) -> None:
        with self._cond:
            if not self._closed:
                self._cond.wait(seconds)

    def remove(self, path: Path) -> None:
        """Remove `path`: at once on the calling thread when no file in it is larger than a
        step (a small log: as fast as a plain rmtree, and nothing left running), else on the
        deleter's thread, gradually."""
        if largest_file(path) <= self._step:
            shutil.rmtree(path)
        else:
            self.submit(path)

    def submit(self, path: Path) -> None:
        with self._cond:
            if self._closed:
                return  # removed at the next start-up
            self._queue.append(path)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="log-deleter", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def pending(self) -> int:
        """Directories not removed yet (queued or being removed)."""
        with self._cond:
            return len(self._queue) + int(self._busy)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                path = self._queue.popleft()
                self._busy = True
            try:
                remove_gradually(path, self._step, self._pause, self._sleep, self._is_closed)
            except OSError as exc:  # the next start-up tries again
                _log.error("removing %s failed: %s", path, exc)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _is_closed(self) -> bool:
        return self._closed

    def close(self, timeout: float = 5.0) -> None:
        """Stop: the directory being removed is left as it is; it and the queued ones are
        removed at the next start-up (LogManager's *-delete sweep)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
