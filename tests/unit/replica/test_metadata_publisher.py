"""MetadataPublisher: order of consumers, failure isolation, the image seen during publish."""

from __future__ import annotations

from broker.metadata_publisher import MetadataPublisher
from controller.metadata.image import MetadataImage


class RecordingReplicaManager:
    def __init__(self, publisher_ref: list) -> None:
        self.calls: list = []
        self.publisher_ref = publisher_ref

    def apply_metadata(self, image, delta) -> None:
        pub = self.publisher_ref[0]
        # during the call, handlers still see the old image; new logs read the new one
        self.calls.append((image.offset, pub.image.offset, pub.latest_image.offset))


def test_replica_manager_first_then_subscribers_then_handlers():
    ref: list = []
    rm = RecordingReplicaManager(ref)
    pub = MetadataPublisher(rm)
    ref.append(pub)
    seen: list = []

    def failing(image, delta) -> None:
        raise RuntimeError("boom")

    pub.subscribe(failing)
    pub.subscribe(lambda image, delta: seen.append((image.offset, pub.image.offset)))
    image = MetadataImage(offset=5)
    pub.publish(image, None)
    assert rm.calls == [(5, -1, 5)]
    assert seen == [(5, -1)]  # a failing subscriber does not stop the next one
    assert pub.image is image and pub.latest_image is image
    assert pub.wait_for(lambda img: img.offset >= 5, 0.01)
    assert not pub.wait_for(lambda img: img.offset >= 6, 0.01)
