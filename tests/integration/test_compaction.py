"""Log compaction on a live broker (issue 13): a cleanup.policy=compact topic is cleaned by the
broker's cleaner thread, and a Consumer reading it from offset 0 gets the latest value of every
key, crossing the gaps; __consumer_offsets is created compacted and the group coordinator still
loads the latest commit per key from the cleaned log."""

from __future__ import annotations

import time

import pytest
from helpers import wait_until

from client import Admin, Consumer, Producer, TopicPartition
from client.errors import InvalidRecordError
from client.records import decode_records

KEYS = 20


def _consume_all(bootstrap: str, topic: str, end: int) -> list:
    tp = TopicPartition(topic, 0)
    out: list = []
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign([tp])
        c.seek(tp, 0)
        deadline = time.monotonic() + 60
        while c.position(tp) < end:
            assert time.monotonic() < deadline, f"position {c.position(tp)} never reached {end}"
            out += c.poll(timeout_ms=200)
    return out


def test_a_compacted_topic_keeps_the_latest_value_per_key(broker_factory) -> None:
    broker = broker_factory(**{"log.cleaner.backoff.ms": 50})
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topic(
            "kv",
            config={
                "cleanup.policy": "compact",
                "segment.bytes": "4096",
                "min.cleanable.dirty.ratio": "0.1",
                "delete.retention.ms": "0",
            },
        )
    sent: list[tuple[int, bytes, bytes | None]] = []
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as p:
        for i in range(600):
            key = b"key-%02d" % (i % KEYS)
            # every 7th record of key-00..key-04 is a tombstone (deleted, later rewritten)
            value = None if i % 7 == 0 and i % KEYS < 5 else b"value-%04d-" % i + b"x" * 40
            md = p.send("kv", value, key=key, partition=0).result(30)
            sent.append((md.offset, key, value))
        with pytest.raises(InvalidRecordError, match="without a key"):
            p.send("kv", b"no key", partition=0).result(30)
    log = broker.server.services.log_manager.get("kv", 0)
    end = log.end_offset
    assert end == 600 and len(log.segment_base_offsets) > 1  # cleaned as it rolled, too
    cleaner = broker.server.services.log_manager.cleaner
    # cleaned once everything below the active segment holds at most one record per key
    active = log.segment_base_offsets[-1]
    wait_until(
        lambda: log.compaction.first_dirty_offset() >= active,
        60,
        "the cleaner cleans up to the active segment",
    )
    assert cleaner is not None and cleaner.passes >= 1
    got = _consume_all(broker.bootstrap, "kv", end)
    by_offset = {o: (k, v) for o, k, v in sent}
    offsets = [r.offset for r in got]
    assert offsets == sorted(set(offsets)) and len(got) < 600 - 400  # gaps crossed
    for r in got:  # every record read is the one produced at its offset
        assert by_offset[r.offset] == (r.key, r.value)
    latest = {k: (o, v) for o, k, v in sent}
    last_read = {r.key: (r.offset, r.value) for r in got}
    for key, (o, v) in latest.items():
        if v is not None or o >= active:
            assert last_read[key] == (o, v), key
    below = [r for r in got if r.offset < active]
    assert len({r.key for r in below}) == len(below)  # one record per key below the active one


def test_offsets_topic_is_compacted_and_commits_survive_cleaning(broker_factory, tmp_path) -> None:
    overrides = {
        "log.cleaner.backoff.ms": 50,
        "log.cleaner.delete.retention.ms": 0,
        "offsets.topic.num.partitions": 1,
        "offsets.topic.segment.bytes": 2048,
        "log.cleaner.min.cleanable.ratio": 0.1,
    }
    broker = broker_factory(data_dir=tmp_path / "b", **overrides)
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topic("t", partitions=2)
    with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as p:
        for i in range(4):
            p.send("t", b"v%d" % i, partition=i % 2).result(30)
    tps = [TopicPartition("t", 0), TopicPartition("t", 1)]
    with Consumer(bootstrap_servers=broker.bootstrap, group_id="g", enable_auto_commit=False) as c:
        c.assign(tps)
        for n in range(1, 120):  # many commits of the same two keys: segments roll
            c.commit({tps[0]: n, tps[1]: 1000 + n})
    with Consumer(
        bootstrap_servers=broker.bootstrap, group_id="gone", enable_auto_commit=False
    ) as c:
        c.assign(tps)
        c.commit({tps[0]: 7, tps[1]: 8})
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.delete_group("gone")  # tombstones for its two offsets
    offsets_log = broker.server.services.log_manager.get("__consumer_offsets", 0)
    assert sum(r.value is None for r in _records(offsets_log, offsets_log.end_offset)) == 2
    with Consumer(bootstrap_servers=broker.bootstrap, group_id="g", enable_auto_commit=False) as c:
        c.assign(tps)
        for n in range(120, 160):  # more commits after the tombstones: they get cleaned twice
            c.commit({tps[0]: n, tps[1]: 1000 + n})
    log = broker.server.services.log_manager.get("__consumer_offsets", 0)
    assert log is not None and log.config.compact and not log.config.delete
    wait_until(
        lambda: 0 < log.segment_base_offsets[-1] <= log.compaction.first_dirty_offset(),
        60,
        "offsets topic cleaned up to its active segment",
    )
    active = log.segment_base_offsets[-1]
    below = _records(log, active)
    assert active > 150 and len(below) <= 4, below  # the latest commits, maybe tombstones
    # the deleted group's tombstones go at the next clean that finds them below its starting
    # point (delete.retention.ms 0 here): more commits make that clean happen
    with Consumer(bootstrap_servers=broker.bootstrap, group_id="g", enable_auto_commit=False) as c:
        c.assign(tps)
        for n in range(160, 220):
            c.commit({tps[0]: n, tps[1]: 1000 + n})

    def tombstones_gone() -> bool:
        active = log.segment_base_offsets[-1]
        below = _records(log, active)
        return log.compaction.first_dirty_offset() >= active and all(
            r.value is not None for r in below
        )

    wait_until(tombstones_gone, 60, "tombstones dropped by a later clean")
    # a restart loads the group's offsets from the cleaned log
    broker.server.shutdown(timeout=10.0)
    broker = broker_factory(data_dir=tmp_path / "b", **overrides)
    with Consumer(bootstrap_servers=broker.bootstrap, group_id="g", enable_auto_commit=False) as c:
        want = {tps[0]: 219, tps[1]: 1219}
        wait_until(lambda: _committed(c, tps) == want, 60, "latest commits loaded after cleaning")
    with Consumer(
        bootstrap_servers=broker.bootstrap, group_id="gone", enable_auto_commit=False
    ) as c:
        assert _committed(c, tps) == {tps[0]: None, tps[1]: None}


def _records(log, upto: int) -> list:
    out, offset = [], 0
    while offset < upto:
        r = log.read(offset, 1 << 20, upto)
        if not r.data:
            break
        out += [rec for rec in decode_records(r.data) if rec.offset < upto]
        offset = r.next_offset
    return out


def _committed(c: Consumer, tps: list) -> dict | None:
    try:
        return c.committed(tps)
    except Exception:  # the coordinator is still loading the offsets: wait_until retries
        return None
