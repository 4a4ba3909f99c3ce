"""The aborted-transaction index of one partition log (Kafka's `.txnindex`, one file per
partition here: `<log_dir>/<topic>-<partition>/aborted-transactions`).

Byte layout: a sequence of 34-byte entries, Kafka's AbortedTxn, all big-endian:

    off  size  field
    0    2     version             int16   0
    2    8     producer_id         int64
    10   8     first_offset        int64   the transaction's first data offset here
    18   8     last_offset         int64   the offset of its ABORT marker
    26   8     last_stable_offset  int64   the partition's LSO when the marker was appended

Entries are appended in marker order (last_offset ascending). A read_committed fetch asks for
the entries overlapping the range it returns (`collect`); the consumer drops those producers'
records from `first_offset` until their marker. The file is appended without an fsync; it is
fsynced before each producer-state snapshot (producer_state.py), and what the log holds past
the latest snapshot is scanned again when the producer state is rebuilt, which re-adds any
entry a crash lost (`add` ignores one already present). Truncation drops the entries whose
marker is gone; a log start moving past a marker drops its entry. Not thread-safe: the Log's
LogProducers calls it under the log's lock.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
from pathlib import Path
from typing import NamedTuple

from client.fsutil import write_atomic

_log = logging.getLogger(__name__)

TXN_INDEX_FILE = "aborted-transactions"
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class AbortedTxnIndex:
    def __init__(self, directory: Path) -> None:
        self.path = directory / TXN_INDEX_FILE
        self.entries: list[AbortedTxn] = []
        self._lasts: list[int] = []  # last_offset of each entry (bisect)
        self._dirty = False
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        whole = len(data) - len(data) % ENTRY_SIZE
        if whole != len(data):
            _log.warning("%s: dropping a torn tail of %d bytes", self.path, len(data) - whole)
        for pos in range(0, whole, ENTRY_SIZE):
            version, *fields = _ENTRY.unpack_from(data, pos)
            if version != VERSION:
                _log.warning(
                    "%s: entry version %d at %d: the rest is ignored", self.path, version, pos
                )
                break
            e = AbortedTxn(*fields)
            if self._lasts and e.last_offset <= self._lasts[-1]:
                continue  # (a duplicate re-added by a rebuild before a crash)
            self.entries.append(e)
            self._lasts.append(e.last_offset)
        if whole != len(data) or len(self.entries) * ENTRY_SIZE != whole:
            self._rewrite()

    def __len__(self) -> int:
        return len(self.entries)

    def add(self, e: AbortedTxn) -> None:
        """Append `e` (its marker is the newest one indexed), unless it is here already."""
        if self._lasts and e.last_offset <= self._lasts[-1]:
            i = bisect.bisect_left(self._lasts, e.last_offset)
            if i < len(self._lasts) and self._lasts[i] == e.last_offset:
                return  # already indexed (a rebuild scanning what was indexed before)
            self.entries.insert(i, e)
            self._lasts.insert(i, e.last_offset)
            self._rewrite()
            return
        self.entries.append(e)
        self._lasts.append(e.last_offset)
        with open(self.path, "ab") as f:
            f.write(_ENTRY.pack(VERSION, *e))
        self._dirty = True

    def collect(self, fetch_offset: int, upper_offset: int) -> list[AbortedTxn]:
        """The entries of transactions overlapping [fetch_offset, upper_offset): marker at or
        after `fetch_offset`, first offset below `upper_offset` (Kafka's collectAbortedTxns)."""
        i = bisect.bisect_left(self._lasts, fetch_offset)
        return [e for e in self.entries[i:] if e.first_offset < upper_offset]

    def truncate_to(self, end: int) -> None:
        """The log was truncated to `end`: entries whose marker is at or past it go."""
        i = bisect.bisect_left(self._lasts, end)
        if i < len(self.entries):
            del self.entries[i:], self._lasts[i:]
            self._rewrite()

    def drop_below(self, start: int) -> None:
        """The log start moved to `start`: entries whose marker is below it go."""
        i = bisect.bisect_left(self._lasts, start)
        if i:
            del self.entries[:i], self._lasts[:i]
            self._rewrite()

    def sync(self) -> None:
        """fsync what `add` appended (before a producer-state snapshot is written)."""
        if self._dirty:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            self._dirty = False

    def _rewrite(self) -> None:
        if not self.entries:
            self.path.unlink(missing_ok=True)
        else:
            write_atomic(self.path, b"".join(_ENTRY.pack(VERSION, *e) for e in self.entries))
        self._dirty = False
