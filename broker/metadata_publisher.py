"""MetadataPublisher: the one broker-side seam for committed metadata (docs/architecture.md §8).

    publisher = MetadataPublisher(replica_manager)
    publisher.subscribe(callback)         # more consumers of (image, delta): e.g. group coordinator
    loader.subscribe(publisher.publish)   # the one-voter quorum's MetadataLoader (or an observer's)
    publisher.image                       # the latest published MetadataImage (request handlers)

`publish(image, delta)` is called in commit order with each new image and the delta that made
it (delta None = reloaded from a snapshot: consumers resync fully). It hands them to the replica
manager first (become leader / follower, stop replica, delete log), then to other subscribers,
and finally exposes the image to the request handlers, so a handler that sees a topic in the
image finds its partition in the replica manager. Whether the records came from a local
one-voter quorum or a remote one is invisible here.

Threads: `publish` on the loader's thread (the committer), one call at a time; `image` and
`wait_for` from any thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from controller.metadata.image import MetadataImage

_log = logging.getLogger(__name__)

Subscriber = Callable[[MetadataImage, Any], None]


class MetadataPublisher:
    def __init__(self, replica_manager: Any) -> None:
        self._replica_manager = replica_manager
        self._subscribers: list[Subscriber] = []
        self._image = MetadataImage.EMPTY
        self._applying: MetadataImage | None = None
        self._cond = threading.Condition()

    @property
    def image(self) -> MetadataImage:
        return self._image

    @property
    def latest_image(self) -> MetadataImage:
        """The image being published right now (else the published one): what the replica
        manager's callees (e.g. a new log's topic config) must read during `publish`."""
        return self._applying or self._image

    def subscribe(self, cb: Subscriber) -> None:
        self._subscribers.append(cb)

    def publish(self, image: MetadataImage, delta: Any) -> None:
        self._applying = image
        try:
            for cb in [self._replica_manager.apply_metadata, *self._subscribers]:
                try:
                    cb(image, delta)
                except Exception:
                    # a broken invariant on the broker side: say so loudly, keep following
                    _log.exception("metadata consumer %r failed at offset %d", cb, image.offset)
        finally:
            with self._cond:
                self._image = image
                self._applying = None
                self._cond.notify_all()

    def wait_for(self, predicate: Callable[[MetadataImage], bool], timeout: float) -> bool:
        """Wait until `predicate(image)` holds for the published image (or `timeout` s)."""
        with self._cond:
            return self._cond.wait_for(lambda: predicate(self._image), timeout)
