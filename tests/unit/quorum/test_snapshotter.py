"""BackgroundSnapshotter: a MetadataLoader's snapshots built off the loop, stored on it."""

from __future__ import annotations

import asyncio
import random
import threading

import pytest
from helpers import wait_until

from controller.metadata import load_snapshot
from controller.quorum import LocalMetadataLog, QuorumController
from controller.quorum.loader import MetadataLoader
from controller.quorum.snapshotter import BackgroundSnapshotter


@pytest.fixture
def loop():
    loop = asyncio.new_event_loop()
    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    t.join(5)
    loop.close()


def test_loader_snapshots_through_the_background_snapshotter(tmp_path, loop):
    log = LocalMetadataLog(str(tmp_path))
    c = QuorumController(log, None, None, random.Random(1))
    stored_on = []
    write = log.write_snapshot

    def recording_write(offset, data):
        stored_on.append(threading.current_thread())
        write(offset, data)

    log.write_snapshot = recording_write
    snapshotter = BackgroundSnapshotter(log, loop)
    loader = MetadataLoader(log, snapshot_every_records=3, snapshot_writer=snapshotter)
    loader.start()
    r = c.cluster.register_broker(1, "h", 1)
    c.cluster.broker_heartbeat(1, r["broker_epoch"], c.last_written_offset)
    c.replication.create_topics([{"name": "a", "num_partitions": 4, "replication_factor": 1}])
    wait_until(lambda: snapshotter.written >= 1, 5, "a snapshot stored")
    wait_until(lambda: not snapshotter._busy, 5, "the snapshotter idle")
    offset, data = log.latest_snapshot()
    assert load_snapshot(data).offset == offset and offset <= c.image.offset
    assert log.log_start_offset() == offset + 1, "the log dropped what the snapshot covers"
    assert stored_on and all(t is not threading.current_thread() for t in stored_on)
    snapshotter.close()
    snapshotter(loader.image)  # after close: ignored
    assert snapshotter.written == len(stored_on)
    log.close()
