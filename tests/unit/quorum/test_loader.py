"""MetadataLoader over a real LocalMetadataLog: follow commits, snapshots, reload."""

from __future__ import annotations

import random

from controller.metadata import (
    BatchBegin,
    MetadataImage,
    Partition,
    RegisterBroker,
    Topic,
    encode_record,
)
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
    r = c.cluster.register_broker(1, "h", 1)
    c.cluster.broker_heartbeat(1, r["broker_epoch"], c.last_written_offset)
    c.replication.create_topics([_topic("a")])
    assert loader.image == c.image
    assert seen[-1] == (c.image.offset, {"a"})
    assert [o for o, _ in seen] == sorted(o for o, _ in seen)
    loader.stop()
    c.replication.create_topics([_topic("b")])
    assert "b" not in loader.image.topics
    log.close()


def test_loader_snapshots_and_a_new_loader_starts_from_them(tmp_path):
    log = LocalMetadataLog(str(tmp_path))
    c = QuorumController(log, None, None, random.Random(1))
    loader = MetadataLoader(log, snapshot_every_records=5)
    loader.start()
    r = c.cluster.register_broker(1, "h", 1)
    c.cluster.broker_heartbeat(1, r["broker_epoch"], c.last_written_offset)
    for i in range(6):
        c.replication.create_topics([_topic(f"t{i}")])
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


def test_loader_and_controller_drop_a_batch_cut_short(tmp_path):
    """A leader died after part of a batch reached the voter that took over, and the new leader
    committed that prefix: readers must never apply it."""
    log = LocalMetadataLog(str(tmp_path))
    tid_a = b"\x01" * 16
    log.append(
        [
            encode_record(r)
            for r in (
                RegisterBroker(1, 0, "h", 1, fenced=False),
                BatchBegin(3),
                Topic("a", tid_a),
                Partition(tid_a, 0, (1,), (1,), 1),  # partition 1 of "a" never arrived
            )
        ]
    )
    loader = MetadataLoader(log)
    loader.start()
    assert "a" not in loader.image.topics and loader.image.offset == 0, "open batch waits"
    c = QuorumController(log, None, None, random.Random(1))
    assert "a" not in c.image.topics
    # the next active controller writes its own batch on top: the cut one is dropped
    c.replication.create_topics([_topic("a")])
    assert loader.image == c.image
    assert loader.image.topics["a"].topic_id != tid_a
    assert sorted(loader.image.topics["a"].partitions) == [0, 1]
    restarted = QuorumController(log, None, None, random.Random(2))
    assert restarted.image == c.image
    log.close()
