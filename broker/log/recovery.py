"""Opening a partition directory: find segments, sanity-check indexes, recover a torn tail.

After a clean shutdown every segment is opened with LogSegment.load_clean (indexes checked,
tail found from the last index entry; a failed check falls back to full recovery of that
segment). After an unclean shutdown, segments from the one holding the recovery point onward
are scanned batch by batch with CRC checks and their indexes rebuilt; at the first invalid or
torn batch the segment is cut there (WARNING with offset and reason) and every later segment is
deleted; so are the later segments when a segment ends on a whole batch below the next one's
base offset (a gap: its tail was lost while a later file survived a power loss). Nothing before
the last valid batch is ever dropped.

First, an interrupted compaction swap (compaction.py) is settled: a `<base>.log.cleaned` file
(written before the commit point) is deleted, the old segments stand; a `<base>.log.swap`
(committed) replaces every old segment whose base offset lies in [base, end of the swap file),
then becomes `<base>.log`.

Called from the thread opening the Log (LogManager start-up or get_or_create).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from client.fsutil import fsync_dir
from client.records.header import HEADER_SIZE, parse_header

from .compaction import CLEANED_SUFFIX, SWAP_SUFFIX
from .config import LogConfig
from .handles import FileHandles
from .segment import INDEX_SUFFIX, LOG_SUFFIX, TIMEINDEX_SUFFIX, LogSegment, segment_name

_log = logging.getLogger(__name__)


def _base_of(path: Path) -> int | None:
    stem = path.name.split(".", 1)[0]
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


def _swap_end(path: Path) -> int:
    """The offset after the last batch of a swap file (fsynced whole before it was renamed)."""
    end = _base_of(path) or 0
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        pos = 0
        while pos + HEADER_SIZE <= size:
            h = parse_header(os.pread(f.fileno(), HEADER_SIZE, pos))
            end = h.next_offset
            pos += h.size
    return end


def complete_swaps(directory: Path, prefix: str) -> None:
    """Settle compaction swaps a crash interrupted (see the module docstring)."""
    changed = False
    for path in sorted(directory.iterdir()):
        if path.name.endswith(LOG_SUFFIX + CLEANED_SUFFIX):
            _log.info("%s removing unfinished cleaned segment %s", prefix, path.name)
            path.unlink()
            changed = True
    for path in sorted(directory.iterdir()):
        if not path.name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
            continue
        base = _base_of(path)
        if base is None:
            continue
        end = _swap_end(path)
        for old in directory.glob("*" + LOG_SUFFIX):
            b = _base_of(old)
            if b is not None and base <= b < end:
                for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX):
                    (directory / segment_name(b, suffix)).unlink(missing_ok=True)
        for suffix in (INDEX_SUFFIX, TIMEINDEX_SUFFIX):  # rebuilt from the new segment
            (directory / segment_name(base, suffix)).unlink(missing_ok=True)
        os.rename(path, directory / segment_name(base, LOG_SUFFIX))
        _log.warning(
            "%s completed an interrupted compaction swap: segment %d now holds [%d, %d)",
            prefix, base, base, end,
        )  # fmt: skip
        changed = True
    if changed:
        fsync_dir(directory)


def load_segments(
    directory: Path,
    config: LogConfig,
    now_ms: int,
    recovery_point: int,
    clean: bool,
    prefix: str,
    handles: FileHandles | None = None,
) -> list[LogSegment]:
    """Open (and if needed recover) every segment of `directory`, oldest first."""
    complete_swaps(directory, prefix)
    bases: list[int] = []
    for path in directory.iterdir():
        if path.name.endswith(".tmp"):
            _log.info("%s removing leftover temp file %s", prefix, path.name)
            path.unlink()
        elif path.name.endswith(LOG_SUFFIX) and (base := _base_of(path)) is not None:
            bases.append(base)
    bases.sort()
    known = set(bases)
    for suffix in (INDEX_SUFFIX, TIMEINDEX_SUFFIX):
        for path in directory.glob("*" + suffix):
            if _base_of(path) not in known:
                _log.info("%s removing orphan index %s", prefix, path.name)
                path.unlink()
    segments: list[LogSegment] = []
    for i, base in enumerate(bases):
        seg = LogSegment(directory, base, config, now_ms, handles)
        segments.append(seg)
        next_base = bases[i + 1] if i + 1 < len(bases) else None
        below_recovery_point = next_base is not None and next_base <= recovery_point
        if (clean or below_recovery_point) and seg.load_clean():
            continue
        truncated, reason = seg.recover()
        if truncated:
            _log.warning(
                "%s recovery truncated segment %d at offset %d (position %d, %d bytes dropped): %s",
                prefix,
                base,
                seg.next_offset,
                seg.size,
                truncated,
                reason,
            )
        elif next_base is not None and seg.next_offset < next_base:
            # Whole batches at the end of this segment are missing while a later segment
            # survived (a power loss wrote the files back independently): the log ends here.
            _log.warning(
                "%s recovery found a gap: segment %d ends at offset %d, the next segment starts"
                " at %d (its tail was lost); the log ends at offset %d",
                prefix,
                base,
                seg.next_offset,
                next_base,
                seg.next_offset,
            )
        if truncated or (next_base is not None and seg.next_offset < next_base):
            for later in bases[i + 1 :]:
                _log.warning("%s recovery deletes segment %d after the lost tail", prefix, later)
                for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX):
                    (directory / segment_name(later, suffix)).unlink(missing_ok=True)
            break
    for seg in segments[:-1]:
        seg.release_index_fds()
    return segments
