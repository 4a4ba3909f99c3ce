"""Every acknowledged offset is the offset the record is read back at (issue 10, item 1).

One Produce request may carry several batches of one partition (the sender drains every ready
batch of a partition); the broker answers with the first batch's base offset and the client
numbers the rest. A hypothesis test against a live broker drives that with any mix of record
sizes, batch sizes, partitions per request, compression and in-flight limit.
"""

from __future__ import annotations

import itertools

from helpers import poll_n
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from client import Admin, Consumer, Producer, TopicPartition


def _check(bootstrap: str, topic: str, partitions: int, sends: list, **producer_cfg) -> None:
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topic(topic, partitions=partitions)
    with Producer(bootstrap_servers=bootstrap, acks="all", **producer_cfg) as p:
        futs = []
        for i, (part, size) in enumerate(sends):
            value = (b"%d:" % i).ljust(size, b"x")
            futs.append((value, p.send(topic, value, partition=part % partitions)))
        acked = {
            (md.partition, md.offset): value for value, md in ((v, f.result(30)) for v, f in futs)
        }
    assert len(acked) == len(sends), "two records were acknowledged at the same offset"
    with Consumer(bootstrap_servers=bootstrap) as c:
        c.assign([TopicPartition(topic, q) for q in range(partitions)])
        stored = {(r.partition, r.offset): r.value for r in poll_n(c, len(sends), timeout=30)}
    assert stored == acked


def test_the_issue_repro_forty_1kib_records_with_linger(broker_server) -> None:
    """The report: linger 100 ms, 40 x 1 KiB to partition 0 (16 KiB batches: three batches in
    one request) acknowledged 0..14, 0..14, 30..39."""
    _check(broker_server.bootstrap, "repro", 1, [(0, 1024)] * 40, linger_ms=100)


_names = itertools.count()


def test_acknowledged_offsets_match_the_log(broker_server) -> None:
    @settings(
        max_examples=12,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        derandomize=False,
    )
    @given(
        partitions=st.integers(1, 3),
        sends=st.lists(
            st.tuples(st.integers(0, 2), st.sampled_from([1, 10, 200, 1024, 5000])),
            min_size=1,
            max_size=120,
        ),
        batch_size=st.sampled_from([512, 2048, 16_384]),
        linger_ms=st.sampled_from([0, 20, 100]),
        compression=st.sampled_from(["none", "gzip", "lz4", "zstd"]),
        in_flight=st.integers(1, 5),
    )
    def run(partitions, sends, batch_size, linger_ms, compression, in_flight) -> None:
        _check(
            broker_server.bootstrap,
            f"offsets-{next(_names)}",
            partitions,
            sends,
            batch_size=batch_size,
            linger_ms=linger_ms,
            compression_type=compression,
            max_in_flight_requests_per_connection=in_flight,
        )

    run()
