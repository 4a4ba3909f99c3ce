"""1,000 topics x 10 partitions through the controller API of a 3-voter quorum of real processes:
every record committed exactly once, and the same image on all three voters and on an observer.

The client is `RemoteController` (what brokers use): CreateTopics of 100 topics per request. The
voters never snapshot here, so each voter's whole committed log can be read back with
MetadataFetch from offset 0 and counted. The observer is a `RemoteMetadataLog` +
`MetadataLoader` fetching from the active controller, as a broker follows the metadata log.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest
from helpers import wait_until

from controller.metadata import BatchAssembler, Partition, Topic, decode_record
from controller.metadata.snapshot import snapshot_bytes
from controller.quorum.loader import MetadataLoader
from controller.quorum.remote import RemoteController
from controller.quorum.remote_log import RemoteMetadataLog

pytestmark = pytest.mark.slow

TOPICS, PARTITIONS, PER_REQUEST = 1000, 10, 100
OBSERVER_ID = 100


def test_thousand_topics_committed_once_and_consistent_everywhere(controller_quorum):
    q = controller_quorum(**{"metadata.log.max.records.between.snapshots": 1_000_000})
    q.start_all()
    q.wait_leader(5, "a leader")
    epochs = q.add_brokers(1, 2, 3)

    observer_log = RemoteMetadataLog(q.voters, max_records=10_000, replica_id=OBSERVER_ID)
    observer = MetadataLoader(observer_log)
    observer.start()
    observer_log.start()
    rc = RemoteController(q.voters, request_timeout_ms=30_000)
    try:
        names = [f"topic-{i:04d}" for i in range(TOPICS)]
        started = time.monotonic()
        for i in range(0, TOPICS, PER_REQUEST):
            batch = [
                {"name": n, "num_partitions": PARTITIONS, "replication_factor": 3}
                for n in names[i : i + PER_REQUEST]
            ]
            results = rc.create_topics(batch).result(30)
            assert [r["error_code"] for r in results] == [0] * len(batch), results[:3]
        took = time.monotonic() - started
        print(f"{TOPICS} topics x {PARTITIONS} partitions committed in {took:.2f}s")

        lid = q.wait_leader(5, "the leader")
        hw = q.high_watermark(lid)
        wait_until(
            lambda: all(q.high_watermark(n) == hw for n in q.ids), 10, "every voter committed"
        )
        logs = {n: q.committed(n) for n in q.ids}
        # The voters hold the same committed log, record for record.
        base, records, _ = logs[lid]
        assert base.offset == -1, "no snapshot was taken: the whole log is readable"
        for n, (b, recs, h) in logs.items():
            assert b.offset == -1 and h == hw and recs == records, f"voter {n} differs"

        # Every controller call's batch is whole (none cut short, none left open).
        batches = BatchAssembler()
        for offset, rec in records:
            batches.feed(offset, rec)
        assert batches.dropped == 0 and batches.open_records == 0
        # Every topic and partition record exactly once.
        topics = [r for _, r in records if isinstance(r, Topic)]
        parts = [r for _, r in records if isinstance(r, Partition)]
        assert sorted(t.name for t in topics) == names
        assert len({t.topic_id for t in topics}) == TOPICS
        per_partition = Counter((p.topic_id, p.partition) for p in parts)
        assert len(parts) == TOPICS * PARTITIONS and set(per_partition.values()) == {1}
        assert {tid for tid, _ in per_partition} == {t.topic_id for t in topics}

        # The same image on every voter (rebuilt from its own log) and on the observer.
        image = q.image(lid)
        assert len(image.topics) == TOPICS
        assert {b: r.broker_epoch for b, r in image.brokers.items()} == epochs
        for n in q.ids:
            assert q.image(n) == image, f"voter {n}'s image differs"
        wait_until(lambda: observer.image.offset == image.offset, 10, "the observer caught up")
        assert observer.image == image
        assert snapshot_bytes(observer.image) == snapshot_bytes(image)
        observed = observer_log.read(0, 2 * len(records))
        assert [(o, decode_record(d)) for o, d in observed] == records

        # The leader lists the observer, caught up to the high watermark, in DescribeQuorum.
        def observer_listed() -> bool:
            d = q.describe(lid) or {}
            return {"replica_id": OBSERVER_ID, "log_end_offset": hw} in [
                {k: o[k] for k in ("replica_id", "log_end_offset")} for o in d.get("observers", [])
            ]

        wait_until(observer_listed, 5, "the observer in the leader's DescribeQuorum")
    finally:
        rc.close()
        observer.stop()
        observer_log.close()
