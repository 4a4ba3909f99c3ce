"""Early writeback: ask the kernel to start writing freshly appended bytes to disk while the
rest of a large append is still being copied into the page cache.

With `log.flush.on.ack=true` every append is followed by an fdatasync from the flusher. For a
large append (a 1 KiB-record producer sends ~7 MB per request) a single `pwrite` then an
`fdatasync` run one after the other: the copy into the page cache, then the whole writeback.
Writing in CHUNK pieces and calling Linux `sync_file_range(SYNC_FILE_RANGE_WRITE)` after each
piece lets the disk work on piece i while piece i+1 is copied, so the fdatasync that follows
finds most of the data already on its way (measured on the 2-core VM, 7.2 MB per append:
pwrite + fdatasync 18-25 ms as one write, 15 ms in 1 MiB pieces; docs/broker.md).

`sync_file_range` is a hint here: it is not a durability guarantee (the fdatasync is) and its
errors are ignored (an I/O error on those pages is reported by the fdatasync that follows).
Where it does not exist (not Linux, or a libc without it) `start_writeback` is None and appends
are written in one piece as before. Called through ctypes, which releases the GIL.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable

CHUNK = 1 << 20  # bytes per piece; appends up to this size are written in one call
_SYNC_FILE_RANGE_WRITE = 2  # from <fcntl.h>: start writeback of dirty pages, do not wait


def _load() -> Callable[[int, int, int], None] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    fn.restype = ctypes.c_int

    def start_writeback(fd: int, offset: int, nbytes: int) -> None:
        """Start writing [offset, offset + nbytes) of `fd` to disk; returns at once."""
        fn(fd, offset, nbytes, _SYNC_FILE_RANGE_WRITE)

    return start_writeback


start_writeback = _load()
