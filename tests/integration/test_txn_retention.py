"""Retention and DeleteRecords against one in-process broker with an open transaction (issue
29, "retention respects the LSO"): the transaction's first segment is past retention.ms, yet
the broker's retention keeps it, and DeleteRecords stops at the last stable offset (-1 means
it; an offset past it is OFFSET_OUT_OF_RANGE); once the transaction commits, retention goes
on and a read_committed consumer reads from the new start."""

from __future__ import annotations

import time

import pytest
from helpers import poll_n, wait_until

from client import Admin, Consumer, Producer, TopicPartition
from client.errors import OffsetOutOfRangeError

TOPIC = "rt"
TP = TopicPartition(TOPIC, 0)
VALUE = b"x" * 300


def test_retention_keeps_an_open_transactions_segment(broker_factory) -> None:
    handle = broker_factory(**{"transaction.state.log.num.partitions": 2})
    node = handle.server.node
    old = int(time.time() * 1000) - 3_600_000  # an hour ago: past retention.ms
    with Admin(bootstrap_servers=handle.bootstrap) as admin:
        admin.create_topic(TOPIC, config={"segment.bytes": "1024", "retention.ms": "60000"})
        log = handle.server.services.log_manager.get(TOPIC, 0)
        with (
            Producer(bootstrap_servers=handle.bootstrap, linger_ms=0) as plain,
            Producer(bootstrap_servers=handle.bootstrap, transactional_id="rt-1") as txn,
        ):
            for i in range(8):  # one batch each: several segments
                plain.send(TOPIC, b"before-%d" % i + VALUE, partition=0, timestamp_ms=old).result(
                    15
                )
            txn.init_transactions()
            txn.begin_transaction()
            first = txn.send(TOPIC, b"t-0" + VALUE, partition=0, timestamp_ms=old).result(15)
            for i in range(1, 4):
                txn.send(TOPIC, b"t-%d" % i + VALUE, partition=0, timestamp_ms=old).result(15)
            for i in range(8):
                plain.send(TOPIC, b"after-%d" % i + VALUE, partition=0, timestamp_ms=old).result(15)
            assert len(log.segment_base_offsets) > 4
            hw = node.replica_manager.get_partition(TOPIC, 0).high_watermark
            assert log.producers.last_stable_offset(hw) == first.offset

            # retention: the segments below the open transaction go, its first segment stays
            assert node.run_retention() > 0
            start = log.log_start_offset
            assert 0 < start <= first.offset
            assert log.segment_base_offsets[0] == start
            assert node.run_retention() == 0 and log.log_start_offset == start

            # DeleteRecords: -1 is the last stable offset; past it, refused
            with pytest.raises(OffsetOutOfRangeError, match="not yet decided"):
                admin.delete_records({TP: first.offset + 1})
            assert admin.delete_records({TP: -1}) == {TP: first.offset}
            assert log.log_start_offset == first.offset

            txn.commit_transaction()
            wait_until(
                lambda: node.run_retention() >= 0 and log.log_start_offset > first.offset,
                15,
                "retention passes the committed transaction",
            )
            end = log.end_offset
            start = log.log_start_offset
    with Consumer(
        bootstrap_servers=handle.bootstrap,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
    ) as c:
        c.assign([TP])
        # every offset from the new start but the last (the COMMIT marker, never returned)
        got = poll_n(c, end - 1 - start, timeout=15)
        assert [r.offset for r in got] == list(range(start, end - 1))
        assert got[-1].value.startswith(b"after-7")
