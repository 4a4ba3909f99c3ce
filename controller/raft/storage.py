"""Durable storage for one Raft node: segmented log, hard state, snapshot (file I/O lives here,
never in the pure core). A driver calls `load()` once, then `persist(ready)` for every Ready
before it sends that Ready's messages; `persist` returns after fsync.

Directory layout:

    hardstate                       current term, vote and commit (atomic replace)
    snapshot-<index:020d>.snap      latest snapshot only (atomic replace; older ones deleted)
    log-<first index:020d>.seg      log segments, rolled at `segment_bytes`

Byte layouts (all integers big-endian):

    hardstate:  0  u32 crc32c of bytes 4..
                4  u64 term
               12  i64 vote (-1: none)
               20  u64 commit

    snapshot:   0  4 bytes magic b"GRS2" (b"GRSN": an older file, without the membership)
                4  u64 index
               12  u64 term
               20  u32 crc32c of data
               24  u64 data length
               32  data
                   u32 crc32c of config, u32 config length, config (GRS2 only: the
                   membership in force at index, controller/raft/membership.py; empty: bootstrap)

    segment entry (repeated):
                0  u32 payload length N (17 + len(data))
                4  u32 crc32c of the payload
                8  payload: u64 index, u64 term, u8 kind, data

Atomic replace = write `<name>.tmp`, fsync it, rename over `<name>`, fsync the directory.
Recovery: a torn or corrupt tail of the last segment (a crash during an append that was never
acknowledged) is truncated and logged; damage anywhere else raises `StorageError`.
The hard state is rewritten only when term or vote change (the commit index rides along then);
a stale commit is safe: the leader re-sends it.

Threading: one thread at a time (the driver's I/O thread) may call a RaftStorage.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from client.errors import StorageError
from client.fsutil import fsync_dir, make_dirs, write_atomic
from client.records.crc import crc32c
from controller.raft.messages import Entry, EntryKind, HardState, Snapshot
from controller.raft.state import Ready, StorageState

_log = logging.getLogger(__name__)

_HS = struct.Struct(">IQqQ")
_SNAP = struct.Struct(">4sQQIQ")
_SNAP_MAGIC = b"GRS2"
_SNAP_MAGIC_V1 = b"GRSN"
_SNAP_CONFIG = struct.Struct(">II")
_REC = struct.Struct(">II")
_PAYLOAD = struct.Struct(">QQB")
_MAX_ENTRY_BYTES = 64 * 1024 * 1024


def encode_entry(e: Entry) -> bytes:
    payload = _PAYLOAD.pack(e.index, e.term, int(e.kind)) + e.data
    return _REC.pack(len(payload), crc32c(payload)) + payload


class _Segment:
    def __init__(self, path: Path, first_index: int) -> None:
        self.path = path
        self.first_index = first_index
        self.offsets: list[int] = []  # file offset of each entry, in index order
        self.size = 0

    @property
    def last_index(self) -> int:
        return self.first_index + len(self.offsets) - 1


class RaftStorage:
    def __init__(self, directory: str | Path, segment_bytes: int = 16 * 1024 * 1024) -> None:
        self.dir = Path(directory)
        self.segment_bytes = segment_bytes
        self.segments: list[_Segment] = []
        self.hard_state = HardState()
        self.snapshot = Snapshot()
        self._active: BinaryIO | None = None  # open file object of the last segment
        self._loaded = False
        self._prefix = f"[raft-storage {self.dir}]"

    # ------------------------------------------------------------------ recovery
    def load(self) -> StorageState:
        """Read everything back (creating the directory if needed); truncates a torn tail."""
        make_dirs(self.dir)
        for tmp in self.dir.glob("*.tmp"):
            _log.warning("%s removing leftover %s", self._prefix, tmp.name)
            tmp.unlink()
        self.hard_state = self._load_hard_state()
        self.snapshot = self._load_snapshot()
        entries: list[Entry] = []
        paths = sorted(self.dir.glob("log-*.seg"))
        for n, path in enumerate(paths):
            seg = _Segment(path, int(path.stem[4:]))
            entries.extend(self._load_segment(seg, last=n == len(paths) - 1))
            self.segments.append(seg)
        # contiguity: segments follow one another; keep only what follows the snapshot
        expect = None
        for e in entries:
            if expect is not None and e.index != expect:
                raise StorageError(f"{self._prefix} log gap: entry {e.index}, expected {expect}")
            expect = e.index + 1
        kept = [e for e in entries if e.index > self.snapshot.index]
        if kept and kept[0].index != self.snapshot.index + 1:
            raise StorageError(
                f"{self._prefix} log starts at {kept[0].index} after snapshot {self.snapshot.index}"
            )
        last = kept[-1].index if kept else self.snapshot.index
        hs = self.hard_state
        commit = max(min(hs.commit, last), self.snapshot.index)
        if commit != hs.commit:
            _log.warning("%s stored commit %d clamped to %d", self._prefix, hs.commit, commit)
        self._loaded = True
        self._open_active()
        return StorageState(HardState(hs.term, hs.vote, commit), self.snapshot, tuple(kept))

    def _load_hard_state(self) -> HardState:
        path = self.dir / "hardstate"
        if not path.exists():
            return HardState()
        raw = path.read_bytes()
        if len(raw) != _HS.size:
            raise StorageError(f"{self._prefix} hardstate has {len(raw)} bytes, want {_HS.size}")
        crc, term, vote, commit = _HS.unpack(raw)
        if crc != crc32c(raw[4:]):
            raise StorageError(f"{self._prefix} hardstate CRC mismatch")
        return HardState(term, None if vote < 0 else vote, commit)

    def _load_snapshot(self) -> Snapshot:
        paths = sorted(self.dir.glob("snapshot-*.snap"))
        if not paths:
            return Snapshot()
        for old in paths[:-1]:
            old.unlink()
        raw = paths[-1].read_bytes()
        if len(raw) < _SNAP.size:
            raise StorageError(f"{self._prefix} {paths[-1].name} is truncated")
        magic, index, term, crc, length = _SNAP.unpack_from(raw)
        end = _SNAP.size + length
        data = raw[_SNAP.size : end]
        config = b""
        if magic == _SNAP_MAGIC and len(raw) >= end + _SNAP_CONFIG.size:
            ccrc, clen = _SNAP_CONFIG.unpack_from(raw, end)
            config = raw[end + _SNAP_CONFIG.size :]
            if len(config) != clen or crc32c(config) != ccrc:
                raise StorageError(f"{self._prefix} {paths[-1].name}: corrupt membership")
        elif magic != _SNAP_MAGIC_V1 or len(raw) != end:
            raise StorageError(f"{self._prefix} {paths[-1].name} is corrupt")
        if len(data) != length or crc32c(data) != crc:
            raise StorageError(f"{self._prefix} {paths[-1].name} is corrupt")
        return Snapshot(index, term, data, config)

    def _load_segment(self, seg: _Segment, last: bool) -> list[Entry]:
        raw = seg.path.read_bytes()
        entries: list[Entry] = []
        pos = 0
        problem = None
        while pos < len(raw):
            if len(raw) - pos < _REC.size:
                problem = "short record header"
                break
            length, crc = _REC.unpack_from(raw, pos)
            if length < _PAYLOAD.size or length > _MAX_ENTRY_BYTES:
                problem = f"bad length {length}"
                break
            end = pos + _REC.size + length
            if end > len(raw):
                problem = "short record"
                break
            payload = raw[pos + _REC.size : end]
            if crc32c(payload) != crc:
                problem = "CRC mismatch"
                break
            index, term, kind = _PAYLOAD.unpack_from(payload)
            want = seg.first_index + len(entries)
            if index != want:
                problem = f"entry {index} where {want} belongs"
                break
            entries.append(Entry(index, term, bytes(payload[_PAYLOAD.size :]), EntryKind(kind)))
            seg.offsets.append(pos)
            pos = end
        if problem is not None:
            if not last:
                raise StorageError(f"{self._prefix} {seg.path.name} at byte {pos}: {problem}")
            _log.warning(
                "%s truncating torn tail of %s at byte %d of %d (%s)",
                self._prefix,
                seg.path.name,
                pos,
                len(raw),
                problem,
            )
            with open(seg.path, "r+b") as f:
                f.truncate(pos)
                os.fsync(f.fileno())
        seg.size = pos
        return entries

    # ------------------------------------------------------------------ persisting
    def persist(self, rd: Ready) -> None:
        """Make `rd`'s snapshot, entries and hard state durable (fsync) before returning."""
        if not self._loaded:
            raise RuntimeError("load() must be called before persist()")
        if rd.snapshot_to_install is not None:
            self._write_snapshot(rd.snapshot_to_install)
            self._drop_segments(lambda seg: True)
        elif rd.snapshot_to_persist is not None:
            snap = rd.snapshot_to_persist
            self._write_snapshot(snap)
            self._drop_segments(lambda seg: seg.last_index <= snap.index and seg.offsets != [])
        if rd.entries_to_persist:
            self._append(rd.entries_to_persist)
        hs = rd.hard_state
        if hs is not None and (hs.term, hs.vote) != (self.hard_state.term, self.hard_state.vote):
            vote = -1 if hs.vote is None else hs.vote
            body = _HS.pack(0, hs.term, vote, hs.commit)[4:]
            write_atomic(self.dir / "hardstate", struct.pack(">I", crc32c(body)) + body)
            self.hard_state = hs

    def _write_snapshot(self, snap: Snapshot) -> None:
        path = self.dir / f"snapshot-{snap.index:020d}.snap"
        header = _SNAP.pack(_SNAP_MAGIC, snap.index, snap.term, crc32c(snap.data), len(snap.data))
        trailer = _SNAP_CONFIG.pack(crc32c(snap.config), len(snap.config)) + snap.config
        write_atomic(path, header + snap.data + trailer)
        for old in self.dir.glob("snapshot-*.snap"):
            if old != path:
                old.unlink()
        self.snapshot = snap

    def _drop_segments(self, doomed: Callable[[_Segment], bool]) -> None:
        keep: list[_Segment] = []
        dropped = False
        for seg in self.segments:
            if doomed(seg):
                if self._active is not None and seg is self.segments[-1]:
                    self._active.close()
                    self._active = None
                seg.path.unlink()
                dropped = True
            else:
                keep.append(seg)
        self.segments = keep
        if dropped:
            fsync_dir(self.dir)

    def _append(self, entries: list[Entry]) -> None:
        first = entries[0].index
        if self.segments and first <= self.segments[-1].last_index:
            self._truncate_from(first)
        if self.segments and self.segments[-1].offsets:
            expect = self.segments[-1].last_index + 1
        else:
            expect = self.snapshot.index + 1
        if first != expect:
            raise StorageError(f"{self._prefix} append at {first}, expected {expect}")
        created = False
        for e in entries:
            seg = self.segments[-1] if self.segments else None
            if seg is None or (seg.size >= self.segment_bytes and seg.offsets):
                if self._active is not None:
                    self._active.flush()
                    os.fsync(self._active.fileno())
                    self._active.close()
                path = self.dir / f"log-{e.index:020d}.seg"
                seg = _Segment(path, e.index)
                self.segments.append(seg)
                self._active = open(path, "ab")  # noqa: SIM115 (closed by close()/roll)
                created = True
            rec = encode_entry(e)
            assert self._active is not None
            self._active.write(rec)
            seg.offsets.append(seg.size)
            seg.size += len(rec)
        assert self._active is not None
        self._active.flush()
        os.fsync(self._active.fileno())
        if created:
            fsync_dir(self.dir)

    def _truncate_from(self, index: int) -> None:
        """Drop stored entries with index >= `index` (a follower's conflicting suffix)."""
        while self.segments and self.segments[-1].first_index >= index:
            seg = self.segments.pop()
            if self._active is not None:
                self._active.close()
                self._active = None
            seg.path.unlink()
        if self.segments:
            seg = self.segments[-1]
            n = index - seg.first_index
            if n < len(seg.offsets):
                pos = seg.offsets[n]
                del seg.offsets[n:]
                seg.size = pos
                if self._active is not None:
                    self._active.close()
                    self._active = None
                with open(seg.path, "r+b") as f:
                    f.truncate(pos)
                    os.fsync(f.fileno())
        self._open_active()
        fsync_dir(self.dir)

    def _open_active(self) -> None:
        if self._active is None and self.segments:
            self._active = open(self.segments[-1].path, "ab")  # noqa: SIM115

    def close(self) -> None:
        if self._active is not None:
            self._active.close()
            self._active = None
