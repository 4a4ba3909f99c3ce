"""Opening a partition directory: find segments, sanity-check indexes, recover a torn tail.

After a clean shutdown every segment is opened with LogSegment.load_clean (indexes checked,
tail found from the last index entry; a failed check falls back to full recovery of that
segment). After an unclean shutdown, segments from the one holding the recovery point onward
are scanned batch by batch with CRC checks and their indexes rebuilt; at the first invalid or
torn batch the segment is cut there (WARNING with offset and reason) and every later segment is
deleted; so are the later segments when a segment ends on a whole batch below the next one's
base offset (a gap: its tail was lost while a later file survived a power loss). Nothing before
the last valid batch is ever dropped.

Called from the thread opening the Log (LogManager start-up or get_or_create).
"""

from __future__ import annotations

import logging
from pathlib import Path

from .config import LogConfig
from .handles import FileHandles
from .segment import INDEX_SUFFIX, LOG_SUFFIX, TIMEINDEX_SUFFIX, LogSegment, segment_name

_log = logging.getLogger(__name__)


def _base_of(path: Path) -> int | None:
    stem = path.name.split(".", 1)[0]
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


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
