"""MetadataLoader over a real LocalMetadataLog: follow commits, snapshots, reload."""

from __future__ import annotations

import random

from controller.metadata import MetadataImage
from controller.quorum import LocalMetadataLog, QuorumController
from controller.quorum.loader import MetadataLoader


def _topic(name):
    return {"name": name, "num_partitions": 2, "replication_factor": 1}


def test_loader_follows_controller_writes(tmp_path):
    log = LocalMetadataLog(str(tmp_path))
    c = QuorumController(log, None, None, random.Random(1))
    seen = []
    loader = MetadataLoader(log)
    loader.subscribe(lambda img, d: seen.append((img.offset, d and set(d.created_topics))))
    assert loader.start() == MetadataImage.EMPTY
    r = c.register_broker(1, "h", 1)
    c.broker_heartbeat(1, r["broker_epoch"], c.last_written_offset)
    c.create_topics([_topic("a")])
    assert loader.image == c.image
    assert seen[-1] == (c.image.offset, {"a"})
    assert [o for o, _ in seen] == sorted(o for o, _ in seen)
    loader.stop()
    c.create_topics([_topic("b")])
    assert "b" not in loader.image.topics
    log.close()


def test_loader_snapshots_and_a_new_loader_starts_from_them(tmp_path):
    log = LocalMetadataLog(str(tmp_path))
    c = QuorumController(log, None, None, random.Random(1))
    loader = MetadataLoader(log, snapshot_every_records=5)
    loader.start()
    r = c.register_broker(1, "h", 1)
    c.broker_heartbeat(1, r["broker_epoch"], c.last_written_offset)
    for i in range(6):
        c.create_topics([_topic(f"t{i}")])
    snap = log.latest_snapshot()
    assert snap is not None and log.log_start_offset() == snap[0] + 1 > 0
    assert loader.image == c.image
    log.close()
    log2 = LocalMetadataLog(str(tmp_path))
    reloads = []
    fresh = MetadataLoader(log2)
    fresh.subscribe(lambda img, d: reloads.append(d is None))
    assert fresh.start() == c.image
    assert reloads[0] is True, "first publication is the snapshot load"
    c2 = QuorumController(log2, None, None, random.Random(2))
    assert c2.image == c.image
    log2.close()
