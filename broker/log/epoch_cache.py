"""Leader-epoch cache: epoch -> first offset written in that epoch (KIP-101 / KIP-279).

Persisted as `leader-epoch-checkpoint` in the partition directory (format in checkpoint.py),
rewritten atomically. A new epoch (`assign`, once per leader change, on the first append in it)
is only recorded in memory and marked dirty: the log's next flush persists it (`persist`)
together with the data it covers, so the first write to each of thousands of partitions does
not pay an fsync of its own on the request path. A crash before that flush loses nothing: the
epoch is in the headers of the batches past the recovery point, and recovery assigns it again
from them (log.py). Truncations persist at once. Called with the owning Log's lock held, except
`persist` and the staged writes, which the flush calls outside it (a lock of its own keeps
writers apart).

A flush covered by one syncfs for many logs (flusher.py) writes the file in two steps instead of
`persist`'s fsyncs: `stage()` writes the entries to a staged file (SPARE_NAME) before the sync
that makes the segments durable, `commit_staged()` swaps it in as the checkpoint after that
sync, and a second sync makes the swap durable before the flush reports its offset. A crash at
any point leaves the previous checkpoint or the new one, whole, and the new epochs are still in
the batches past the recovery point. The swap is an exchange of names (rename_exchange.py), so
the old checkpoint is the next staged file: a leader change rewrites one file in place instead
of creating one. The first write to each of 5,000 partitions after a leader change took 2.2 s
of per-partition fsyncs (docs/storage.md).
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from pathlib import Path

from .checkpoint import read_epochs, write_epochs
from .rename_exchange import exchange

_log = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1
CHECKPOINT_NAME = "leader-epoch-checkpoint"
# the staged file; after a commit it holds the previous checkpoint, overwritten by the next stage
# (rename_exchange.py). Never read: whatever a crash left in it is harmless.
SPARE_NAME = CHECKPOINT_NAME + ".spare"
_NO_EXCHANGE = frozenset({errno.ENOENT, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP})


class LeaderEpochCache:
    def __init__(self, directory: Path) -> None:
        self.path = directory / CHECKPOINT_NAME
        self._entries: list[tuple[int, int]] = read_epochs(self.path)
        self.dirty = False  # entries changed since the file was last written
        self._write_lock = threading.Lock()
        self._writes = 0  # checkpoints written (persist, commit_staged): a stage is kept if none
        self._staged_path = directory / SPARE_NAME

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1][0] if self._entries else UNDEFINED_EPOCH

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch whose range holds `offset` (UNDEFINED_EPOCH if before every entry)."""
        epoch = UNDEFINED_EPOCH
        for e, start in self._entries:
            if start > offset:
                break
            epoch = e
        return epoch

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset` (ignored unless it is a newer epoch)."""
        if epoch < 0 or epoch <= self.latest_epoch:
            return
        # a newer epoch cannot start before an older one's start: drop such stale entries
        while self._entries and self._entries[-1][1] >= start_offset:
            dropped = self._entries.pop()
            _log.info(
                "%s: epoch %d superseded by %d at %d",
                self.path.parent.name,
                dropped[0],
                epoch,
                start_offset,
            )
        self._entries.append((epoch, start_offset))
        self.dirty = True  # after the append: persist() clears it before copying the entries

    def end_offset_for_epoch(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(largest epoch <= `epoch`, end offset of that epoch) per KIP-279: the start offset of
        the first later epoch, or the log end offset when `epoch` is the latest. Returns
        (UNDEFINED_EPOCH, UNDEFINED_OFFSET) when `epoch` precedes every cached epoch."""
        if not self._entries or epoch < self._entries[0][0]:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if epoch >= self.latest_epoch:
            return self.latest_epoch, log_end_offset
        found = UNDEFINED_EPOCH
        for e, start in self._entries:
            if e > epoch:
                return found, start
            found = e
        raise AssertionError("unreachable: epoch below latest has a successor")

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after `end_offset` (follower truncation)."""
        keep = [(e, o) for e, o in self._entries if o < end_offset]
        if keep != self._entries:
            self._entries = keep
            self._persist()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries wholly below `start_offset`; the one spanning it now starts there."""
        entries = self._entries
        i = 0
        while i + 1 < len(entries) and entries[i + 1][1] <= start_offset:
            i += 1
        keep = entries[i:]
        if keep and keep[0][1] < start_offset:
            keep[0] = (keep[0][0], start_offset)
        if keep != entries:
            self._entries = keep
            self._persist()

    def clear(self) -> None:
        if self._entries:
            self._entries = []
            self._persist()

    def persist(self) -> None:
        """Write the entries if they changed since the last write (any thread). On failure
        they stay dirty and the error is raised."""
        with self._write_lock:
            if not self.dirty:
                return
            self.dirty = False
            entries = list(self._entries)
            try:
                write_epochs(self.path, entries)
            except BaseException:
                self.dirty = True
                raise
            self._writes += 1

    def stage(self) -> int | None:
        """Write the entries, if they changed, to the staged file without any fsync; returns a
        token for `commit_staged`, or None when there was nothing to write. On failure they
        stay dirty and the OSError is raised."""
        with self._write_lock:
            if not self.dirty:
                return None
            self.dirty = False
            try:
                write_epochs(self._staged_path, list(self._entries), durable=False)
            except BaseException:
                self.dirty = True
                raise
            return self._writes

    def commit_staged(self, token: int) -> None:
        """After a sync made the staged file's data durable: swap it in as the checkpoint (a
        second sync makes that durable). A persist since the stage wrote newer entries
        durably: the staged ones are then left where they are. On failure the entries are
        dirty again and the OSError is raised."""
        with self._write_lock:
            if token != self._writes:
                return  # (the staged file stays, as the next stage's)
            try:
                self._swap_in()
            except BaseException:
                self.dirty = True
                raise
            self._writes += 1

    def _swap_in(self) -> None:
        """The staged file becomes the checkpoint; the old checkpoint, if any, the staged one."""
        if exchange is not None:
            try:
                exchange(self._staged_path, self.path)
                return
            except OSError as exc:
                if exc.errno not in _NO_EXCHANGE:  # ENOENT: no checkpoint yet
                    raise
        os.replace(self._staged_path, self.path)

    def abort_staged(self) -> None:
        """The covered flush failed: the entries are written again by a later flush."""
        with self._write_lock:
            self.dirty = True

    def _persist(self) -> None:
        self.dirty = True
        self.persist()
