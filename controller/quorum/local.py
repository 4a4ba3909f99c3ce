"""LocalController: the controller of a combined (single-node) process, wired in one place.

    lc = LocalController(metadata_dir, ControllerSettings.from_config(config),
                         snapshot_every_records=10_000)
    lc.loader.subscribe(publisher)       # (image, delta) after every commit, in order
    lc.start()                           # loads the log, starts the controller thread
    lc.submit(lambda c: c.replication.create_topics([...])).result()  # resolved on commit
    lc.image                             # latest committed MetadataImage
    lc.stop()

Parts: LocalMetadataLog(metadata_dir) (fsync per append, committed at once), QuorumController,
ControllerThread (own thread + event loop; periodic tick), MetadataLoader (follows the log,
snapshots every `snapshot_every_records`). Subscribers run on the controller thread (the
initial load inside `start()` on the caller's thread).
`start()`/`stop()` and the calls may be used from any thread.
"""

from __future__ import annotations

import concurrent.futures
import random
from collections.abc import Callable
from typing import TypeVar

from controller.metadata.image import MetadataImage
from controller.quorum.controller import QuorumController
from controller.quorum.loader import MetadataLoader
from controller.quorum.log import LocalMetadataLog
from controller.quorum.runner import ControllerCall, ControllerThread
from controller.quorum.state import ControllerSettings

T = TypeVar("T")


class LocalController:
    def __init__(
        self,
        metadata_dir: str,
        settings: ControllerSettings | None = None,
        clock: Callable[[], float] | None = None,
        rng: random.Random | None = None,
        snapshot_every_records: int = 10_000,
        tick_interval_ms: int = 100,
    ) -> None:
        self.log = LocalMetadataLog(metadata_dir)
        self.controller = QuorumController(self.log, settings, clock, rng or random.Random())
        self.loader = MetadataLoader(self.log, snapshot_every_records=snapshot_every_records)
        self.runner = ControllerThread(
            self.controller, tick_interval_ms=tick_interval_ms, name="controller"
        )
        self._started = False

    @property
    def image(self) -> MetadataImage:
        return self.loader.image

    def start(self) -> MetadataImage:
        if not self._started:
            self._started = True
            self.loader.start()
            self.runner.start()
        return self.loader.image

    def stop(self) -> None:
        if self._started:
            self._started = False
            self.runner.stop()
            self.loader.stop()
        self.log.close()

    def submit(self, call: ControllerCall[T]) -> concurrent.futures.Future[T]:
        """`call(controller)` on the controller thread (ControllerThread.submit): e.g.
        `lc.submit(lambda c: c.replication.create_topics([...]))`, resolved on commit."""
        return self.runner.submit(call)
