"""BackgroundSnapshotter: metadata snapshots built off the controller loop.

Serializing a large image (`snapshot_bytes`: ~90,000 records for 9,000 topics x 10 partitions)
takes long enough to stall the Raft loop past an election timeout, so a voter's MetadataLoader
hands the (immutable) image to this object instead: its own thread builds the bytes, and the
store — `metadata_log.write_snapshot(offset, data)`, which compacts the Raft log and fsyncs the
snapshot file — runs back on the controller loop (RaftMetadataLog is loop-only).

At most one snapshot is in progress: an image offered meanwhile is skipped (the loader offers
another after `metadata.log.max.records.between.snapshots` more records). A failed snapshot is
logged and leaves the log as it was (a snapshot is an optimisation, never needed for safety).

Threading: `__call__` from the thread that commits (the controller loop); `close()` from the
owner after the loop stopped. Owns one worker thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading

from controller.metadata.image import MetadataImage
from controller.metadata.snapshot import snapshot_bytes
from controller.quorum.log import MetadataLog

_log = logging.getLogger(__name__)


class BackgroundSnapshotter:
    def __init__(self, metadata_log: MetadataLog, loop: asyncio.AbstractEventLoop) -> None:
        self.log = metadata_log
        self.loop = loop
        self._pool = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix="metadata-snapshot"
        )
        self._lock = threading.Lock()
        self._busy = False
        self._closed = False
        self.written = 0
        self.skipped = 0

    def __call__(self, image: MetadataImage) -> None:
        with self._lock:
            if self._closed:
                return
            if self._busy:
                self.skipped += 1
                _log.debug("metadata snapshot at %d skipped: one in progress", image.offset)
                return
            self._busy = True
        self._pool.submit(self._build, image)

    def _build(self, image: MetadataImage) -> None:  # worker thread
        try:
            data = snapshot_bytes(image)
            self.loop.call_soon_threadsafe(self._store, image.offset, data)
        except Exception:  # RuntimeError: the loop closed meanwhile; anything else is a bug
            _log.exception("metadata snapshot at offset %d not built", image.offset)
            self._done()

    def _store(self, offset: int, data: bytes) -> None:  # controller loop
        try:
            self.log.write_snapshot(offset, data)
        except Exception:  # OSError, or NotControllerError once the log failed or closed
            _log.exception("metadata snapshot at offset %d not stored", offset)
        else:
            self.written += 1
            _log.info("metadata snapshot written at offset %d (%d bytes)", offset, len(data))
        finally:
            self._done()

    def _done(self) -> None:
        with self._lock:
            self._busy = False

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._pool.shutdown(wait=True, cancel_futures=True)
