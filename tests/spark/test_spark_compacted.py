"""A Spark batch read of a compacted topic (issue 13): the planned offset ranges cross the gaps
compaction left, ranges with no record left in them end at once (no poll timeout), and the rows
are exactly the records the log holds: the latest value of every key below the active segment."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import wait_until
from spark_helpers import produce

from client import Admin
from client.records import decode_records

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _log_records(log: Any) -> set:
    out, offset = set(), 0
    while offset < log.end_offset:
        r = log.read(offset, 1 << 20)
        out |= {(rec.offset, rec.key, rec.value) for rec in decode_records(r.data)}
        offset = r.next_offset
    return out


def test_batch_read_of_a_compacted_topic(spark: Any, broker_factory: Any) -> None:
    broker = broker_factory(**{"log.cleaner.backoff.ms": 50})
    bs = broker.bootstrap
    with Admin(bootstrap_servers=bs) as admin:
        admin.create_topic(
            "ckv",
            config={"cleanup.policy": "compact", "segment.bytes": "2048",
                    "min.cleanable.dirty.ratio": "0.1"},
        )  # fmt: skip
    pairs = [(b"k%d" % (i % 10), b"v%04d" % i) for i in range(400)]
    for i in range(0, 400, 20):  # batches of 20 records: ~2 KiB segments roll
        produce(bs, "ckv", {0: pairs[i : i + 20]})
    log = broker.server.services.log_manager.get("ckv", 0)
    wait_until(
        lambda: 0 < log.segment_base_offsets[-1] <= log.compaction.first_dirty_offset(),
        60,
        "cleaned",
    )
    held = _log_records(log)
    assert len(held) < 200  # most of the 400 are gone
    for use_arrow in ("true", "false"):
        rows = (
            spark.read.format("gregor")
            .option("bootstrap.servers", bs)
            .options(subscribe="ckv", minPartitions="8", useArrow=use_arrow, pollTimeoutMs="30000")
            .load()
            .collect()
        )
        got = {(r.offset, bytes(r.key), bytes(r.value)) for r in rows}
        assert len(rows) == len(got) and got == held
        latest = {key: value for _offset, key, value in sorted(got)}  # the last one wins
        assert latest == {b"k%d" % k: b"v%04d" % (390 + k) for k in range(10)}
    # a range inside the cleaned part: only what is left of it
    rows = (
        spark.read.format("gregor")
        .option("bootstrap.servers", bs)
        .options(subscribe="ckv", endingOffsets='{"ckv":{"0":250}}', pollTimeoutMs="30000")
        .load()
        .collect()
    )
    assert {(r.offset, bytes(r.key), bytes(r.value)) for r in rows} == {
        h for h in held if h[0] < 250
    }
