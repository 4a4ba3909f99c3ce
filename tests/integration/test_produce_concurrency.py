"""Concurrency: 8 producers x 4 partitions against one in-process broker (acks=all, fsync on
ack), one consumer reads everything back: per-partition order of each producer's records, no
loss, no duplicates.

Size: 100,000 records per producer (800,000 in all; ~4 s here). GREGOR_CONCURRENCY_RECORDS
overrides it.
"""

from __future__ import annotations

import os
import threading
import time

import pytest

from client import Admin, Consumer, Producer, TopicPartition

PRODUCERS = 8
PARTITIONS = 4
RECORDS = int(os.environ.get("GREGOR_CONCURRENCY_RECORDS", "100000"))
CHUNK = 1000


@pytest.mark.slow
def test_eight_producers_four_partitions_one_consumer(broker_server):
    bootstrap = broker_server.bootstrap
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topic("conc", partitions=PARTITIONS)
    errors: list[BaseException] = []

    def produce(pid: int) -> None:
        try:
            with Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=5) as p:
                futs = []
                for start in range(0, RECORDS, CHUNK):
                    by_part: dict[int, list[bytes]] = {q: [] for q in range(PARTITIONS)}
                    for seq in range(start, min(start + CHUNK, RECORDS)):
                        by_part[seq % PARTITIONS].append(b"%d:%d" % (pid, seq))
                    for q, values in by_part.items():
                        futs.append(p.send_many("conc", values, partition=q))
                p.flush(120)
                assert sum(f.result(120) for f in futs) == RECORDS
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    t0 = time.monotonic()
    threads = [threading.Thread(target=produce, args=(i,)) for i in range(PRODUCERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    produce_s = time.monotonic() - t0
    assert not errors, errors
    total = PRODUCERS * RECORDS
    seen: dict[int, set[int]] = {pid: set() for pid in range(PRODUCERS)}
    last: dict[tuple[int, int], int] = {}
    count = 0
    tps = [TopicPartition("conc", q) for q in range(PARTITIONS)]
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign(tps)
        c.seek_to_beginning(*tps)
        deadline = time.monotonic() + 120
        while count < total:
            assert time.monotonic() < deadline, f"consumed {count} of {total}"
            for r in c.poll(timeout_ms=500):
                pid, seq = (int(x) for x in r.value.split(b":"))
                assert seq % PARTITIONS == r.partition
                assert seq not in seen[pid], f"duplicate {pid}:{seq}"
                seen[pid].add(seq)
                key = (pid, r.partition)
                assert last.get(key, -1) < seq, f"out of order {pid}:{seq} on {r.partition}"
                last[key] = seq
                count += 1
        ends = c.end_offsets(tps)
    assert all(len(s) == RECORDS for s in seen.values())
    assert sum(ends.values()) == total
    print(f"produced {total} records with {PRODUCERS} producers in {produce_s:.1f}s")
