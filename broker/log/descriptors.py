"""DescriptorMonitor: whether this broker can take new replicas, as far as file descriptors go.

A broker out of descriptors cannot create a replica (its directory, segment and index files,
the checkpoints that list it). Rather than let the controller place replicas on it and have
them fail after the topic was created (failed_replicas, leaderless), the broker says so in
every BrokerHeartbeat (`cannot_create_replicas`: a short reason, None when it can) and the
controller's placement skips it.

`reason()` is measured on the heartbeat cadence:
- free descriptors = the soft RLIMIT_NOFILE minus the descriptors open now (the entries of
  /proc/self/fd: cheap, no syscall per descriptor). Under `reserve` (1/64 of the limit,
  between 16 and 256) the broker reports; it stops once they are back to twice the reserve
  (hysteresis, so a broker at the edge does not flap);
- a FileLimitError (EMFILE/ENFILE) that hit creating or opening a replica since the last
  measurement (`note_limit_hit`) reports too, whatever the count says now;
- where the open descriptors cannot be counted (no /proc), only the hits count: a hit keeps
  the report for `HOLD_S` seconds.

Threads: `note_limit_hit` from whichever thread applies metadata; `reason` from the broker's
task thread (heartbeats). A lock covers the little state there is.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable

from .handles import is_fd_limit, nofile_limit

RESERVE_SHARE = 64  # the reserve is 1/RESERVE_SHARE of the limit ...
RESERVE_MIN, RESERVE_MAX = 16, 256  # ... within these bounds
HOLD_S = 30.0  # without a count: how long a FileLimitError keeps the report
KEYS = "raise `ulimit -n` (LimitNOFILE=) or lower log.max.open.files"


def open_descriptors() -> int | None:
    """How many descriptors this process has open (None where it cannot tell). Out of
    descriptors, listing them needs one more: that failure means none is free."""
    try:
        return len(os.listdir("/proc/self/fd")) - 1  # (minus the one listing them)
    except OSError as exc:
        if is_fd_limit(exc):
            return -1  # caller: no descriptor free
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.EACCES):
            return None
        raise


def reserve_for(limit: int) -> int:
    return max(RESERVE_MIN, min(RESERVE_MAX, limit // RESERVE_SHARE))


class DescriptorMonitor:
    def __init__(
        self,
        limit: Callable[[], int] = nofile_limit,
        count_open: Callable[[], int | None] = open_descriptors,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`limit()`: the soft RLIMIT_NOFILE; `count_open()`: descriptors open now (None when
        unknown, -1 when the process is out of them)."""
        self._limit = limit
        self._count_open = count_open
        self._clock = clock
        self._lock = threading.Lock()
        self._hits = 0  # FileLimitErrors since the last measurement
        self._last_hit: float | None = None
        self._reporting = False

    def note_limit_hit(self) -> None:
        """A replica could not be created or opened for lack of descriptors."""
        with self._lock:
            self._hits += 1
            self._last_hit = self._clock()

    def reason(self) -> str | None:
        """Why this broker cannot take new replicas now, None when it can (one measurement)."""
        limit = self._limit()
        reserve = reserve_for(limit)
        used = self._count_open()
        with self._lock:
            hits, self._hits = self._hits, 0
            now = self._clock()
            recent = self._last_hit is not None and now - self._last_hit < HOLD_S
            if used is None:
                free = None
                low = hits > 0 or recent
            else:
                free = 0 if used < 0 else max(0, limit - used)
                low = hits > 0 or free < (2 * reserve if self._reporting else reserve)
            self._reporting = low
        if not low:
            return None
        if used is None:
            return f"out of file descriptors recently (open-files limit {limit}): {KEYS}"
        if used < 0:
            return f"out of file descriptors: none free under open-files limit {limit}: {KEYS}"
        return (
            f"out of file descriptors: {used} open under open-files limit {limit}"
            f" ({free} free, {reserve} kept in reserve): {KEYS}"
        )
