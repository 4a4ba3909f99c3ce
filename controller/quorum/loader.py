"""MetadataLoader: follows a MetadataLog's committed records into a MetadataImage.

    loader = MetadataLoader(metadata_log, snapshot_every_records=0)
    loader.subscribe(lambda image, delta: ...)     # delta None = reloaded from a snapshot
    loader.start()                                 # loads snapshot + committed records, then follows
    loader.image                                   # the latest committed image (any thread)

On every commit notification the loader reads the log from where it stopped (so it never
misses records, whatever the notifying thread saw), replays the complete atomic batches among
them (controller/metadata/batches.py: a batch cut short by a leader change is dropped) into a
MetadataDelta, publishes the new image, and calls subscribers in order with (image, delta). When the log was compacted
past the image (a follower installed a snapshot) it reloads from the snapshot and calls
subscribers with delta None. With `snapshot_every_records` > 0 it asks the log to store a
snapshot of the image after that many records (the log then drops the records it covers) —
inline, or through `snapshot_writer(image)` when given (controller processes hand it to a
BackgroundSnapshotter, snapshotter.py, so a large image never stalls the Raft loop).

Threading: callbacks run on the thread that committed (LocalMetadataLog: the appender;
RaftMetadataLog: the controller loop) under the loader's lock, so subscribers see images in
order; they must be quick and must not block. `image` may be read from any thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from client.errors import OffsetOutOfRangeError
from controller.metadata.batches import BatchAssembler
from controller.metadata.delta import MetadataDelta
from controller.metadata.image import MetadataImage
from controller.metadata.records import decode_record
from controller.metadata.snapshot import load_snapshot, snapshot_bytes
from controller.quorum.log import MetadataLog

_log = logging.getLogger(__name__)

Subscriber = Callable[[MetadataImage, MetadataDelta | None], None]


class MetadataLoader:
    def __init__(
        self,
        metadata_log: MetadataLog,
        snapshot_every_records: int = 0,
        read_batch: int = 10_000,
        snapshot_writer: Callable[[MetadataImage], None] | None = None,
    ) -> None:
        self.log = metadata_log
        self.snapshot_every_records = snapshot_every_records
        self.snapshot_writer = snapshot_writer
        self.read_batch = read_batch
        self.image = MetadataImage.EMPTY
        self._lock = threading.RLock()
        self._subscribers: list[Subscriber] = []
        self._since_snapshot = 0
        self._started = False
        self._batches = BatchAssembler()  # records of an open batch wait here (batches.py)
        self._position = 0  # next offset to read (past the image while a batch is open)

    def subscribe(self, cb: Subscriber) -> None:
        with self._lock:
            self._subscribers.append(cb)

    def start(self) -> MetadataImage:
        """Load what is committed now and follow further commits; returns the image."""
        with self._lock:
            if not self._started:
                self._started = True
                self.log.add_listener(self._on_commit)
                self._catch_up()
            return self.image

    def stop(self) -> None:
        with self._lock:
            if self._started:
                self._started = False
                self.log.remove_listener(self._on_commit)

    def _on_commit(self, _records: list[tuple[int, bytes]]) -> None:
        with self._lock:
            if self._started:
                self._catch_up()

    def _reload_from_snapshot(self) -> None:
        """Load the latest snapshot. Subscribers hear of it (delta None) only once the records
        after it are replayed too (`_catch_up`): a snapshot older than the log's end does not
        list what those records create, and a full resync against it would take their
        partitions for deleted ones (and delete their logs)."""
        snap = self.log.latest_snapshot()
        self.image = load_snapshot(snap[1]) if snap else MetadataImage.EMPTY
        self._since_snapshot = 0
        self._batches.reset()
        self._position = self.image.offset + 1
        _log.info("metadata image reloaded from snapshot at offset %d", self.image.offset)

    def _catch_up(self) -> None:
        resync = False  # a snapshot was loaded: publish the caught-up image as a full resync
        if self.image.offset < 0 and self.log.log_start_offset() > 0:
            self._reload_from_snapshot()
            resync = True
        while True:
            try:
                batch = self.log.read(self._position, self.read_batch)
            except OffsetOutOfRangeError:
                self._reload_from_snapshot()
                resync = True
                continue
            if not batch:
                if resync:
                    _log.info("metadata image caught up at offset %d", self.image.offset)
                    for cb in list(self._subscribers):
                        cb(self.image, None)
                return
            self._position = batch[-1][0] + 1
            delta = MetadataDelta(self.image)
            for offset, data in batch:
                for o, rec in self._batches.feed(offset, decode_record(data)):
                    delta.replay(rec, o)
            if not delta.records_replayed:
                continue  # only part of an open batch so far
            self.image = delta.apply()
            if not resync:
                for cb in list(self._subscribers):
                    cb(self.image, delta)
            self._since_snapshot += len(batch)
            if self.snapshot_every_records and self._since_snapshot >= self.snapshot_every_records:
                self._since_snapshot = 0
                if self.snapshot_writer is not None:  # e.g. a BackgroundSnapshotter
                    self.snapshot_writer(self.image)
                else:
                    self._write_snapshot()

    def _write_snapshot(self) -> None:
        try:
            self.log.write_snapshot(self.image.offset, snapshot_bytes(self.image))
        except OSError as e:  # a snapshot is an optimisation: retry after more records
            _log.error("metadata snapshot at offset %d failed: %s", self.image.offset, e)
        else:
            _log.info("metadata snapshot written at offset %d", self.image.offset)
