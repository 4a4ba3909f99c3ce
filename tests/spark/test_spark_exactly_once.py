"""Transactions through Spark: the source's kafka.isolation.level=read_committed, and the
sink's exactlyOnce (docs/spark.md, "Exactly-once sink"), against a real loopback broker."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import create_topic, wait_query

from client.errors import ConfigError
from client.spark.options import parse_sink_options
from client.spark.sink import committed_batch, transactional_id, write_rows_exactly_once

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _txn(bs: str, tid: str, topic: str, values: list[bytes], commit: bool) -> None:
    from client import Producer

    with Producer(bootstrap_servers=bs, transactional_id=tid) as p:
        p.init_transactions()
        p.begin_transaction()
        for v in values:
            p.send(topic, v, partition=0)
        p.flush(30)
        if commit:
            p.commit_transaction()
        else:
            p.abort_transaction()


def _read_committed(bs: str, topic: str, partitions: int) -> list[bytes]:
    """Every committed value of `topic` up to its last stable offset, via the client."""
    import time

    from client import Consumer, TopicPartition

    tps = [TopicPartition(topic, p) for p in range(partitions)]
    with Consumer(
        bootstrap_servers=bs, auto_offset_reset="earliest", isolation_level="read_committed"
    ) as c:
        c.assign(tps)
        ends = c.end_offsets(tps)
        out: list[bytes] = []
        deadline = time.monotonic() + 30
        while any(c.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, f"timed out reading {topic}"
            out.extend(r.value for r in c.poll(timeout_ms=200))
        return out


def test_source_read_committed_hides_aborted_and_control_records(
    spark: Any, broker_server: Any
) -> None:
    bs = broker_server.bootstrap
    create_topic(bs, "txn-in", 1)
    _txn(bs, "src-a", "txn-in", [b"c1", b"c2"], commit=True)
    _txn(bs, "src-b", "txn-in", [b"a1", b"a2", b"a3"], commit=False)
    _txn(bs, "src-c", "txn-in", [b"c3"], commit=True)

    def read(**opts: str) -> list[tuple[bytes, int]]:
        df = (
            spark.read.format("gregor")
            .option("bootstrap.servers", bs)
            .option("subscribe", "txn-in")
            .options(**opts)
            .load()
        )
        return sorted((bytes(r.value), r.offset) for r in df.collect())

    committed = read(**{"kafka.isolation.level": "read_committed"})
    assert [v for v, _ in committed] == [b"c1", b"c2", b"c3"]
    # read_uncommitted (the default) returns the aborted records too, never the 3 markers
    assert sorted(v for v, _ in read()) == [b"a1", b"a2", b"a3", b"c1", b"c2", b"c3"]
    with pytest.raises(Exception, match="isolation.level"):
        read(**{"kafka.isolation.level": "read_committedd"})


def test_source_read_committed_stops_at_open_transaction(spark: Any, broker_server: Any) -> None:
    """An open transaction holds the last stable offset: a read_committed batch ends there
    (without waiting pollTimeoutMs for records it may not return)."""
    from client import Producer

    bs = broker_server.bootstrap
    create_topic(bs, "txn-open", 1)
    _txn(bs, "open-a", "txn-open", [b"c1"], commit=True)
    with Producer(bootstrap_servers=bs, transactional_id="open-b") as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("txn-open", b"open", partition=0)
        p.flush(30)
        df = (
            spark.read.format("gregor")
            .option("bootstrap.servers", bs)
            .option("subscribe", "txn-open")
            .option("kafka.isolation.level", "read_committed")
            .option("pollTimeoutMs", "600000")
            .load()
        )
        assert [bytes(r.value) for r in df.collect()] == [b"c1"]
        p.abort_transaction()


def test_sink_options_exactly_once_refusals() -> None:
    with pytest.raises(ConfigError, match="needs the option 'topic'"):
        parse_sink_options({"bootstrap.servers": "h:1", "exactlyOnce": "true"}, ["topic", "value"])
    with pytest.raises(ConfigError, match="kafka.transactional.id"):
        parse_sink_options(
            {
                "bootstrap.servers": "h:1",
                "topic": "t",
                "exactlyOnce": "true",
                "kafka.transactional.id": "x",
            },
            ["value"],
        )
    with pytest.raises(ConfigError, match="exactlyOnce"):
        parse_sink_options(
            {"bootstrap.servers": "h:1", "topic": "t", "exactlyOnce": "yes"}, ["value"]
        )
    opts = parse_sink_options(
        {"bootstrap.servers": "h:1", "topic": "t", "exactlyOnce": "TRUE"}, ["value"]
    )
    assert opts.exactly_once


def test_replayed_batch_partition_writes_nothing(broker_server: Any) -> None:
    """The writer of (query, P, B) run twice: the second finds B committed and writes
    nothing; an attempt left open by a dead task is aborted by the next one's fencing."""
    from client import Producer

    bs = broker_server.bootstrap
    create_topic(bs, "eos-direct", 2)
    opts = parse_sink_options(
        {"bootstrap.servers": bs, "topic": "eos-direct", "exactlyOnce": "true"}, ["value"]
    )
    rows = [{"value": f"b0-{i}"} for i in range(50)]
    first = write_rows_exactly_once(opts, iter(rows), "q1", 0, 0)
    assert (first.records, first.skipped) == (50, False)
    again = write_rows_exactly_once(opts, iter(rows), "q1", 0, 0)
    assert (again.records, again.skipped) == (0, True)
    assert committed_batch(opts, transactional_id("q1", 0)) == 0
    # another partition of the same query has its own progress
    assert committed_batch(opts, transactional_id("q1", 1)) is None

    # batch 1: an attempt dies mid-transaction (its rows sent, never committed) ...
    tid = transactional_id("q1", 0)
    dead = Producer(bootstrap_servers=bs, transactional_id=tid, acks="all")
    dead.init_transactions()
    dead.begin_transaction()
    for i in range(20):
        dead.send("eos-direct", f"dead-{i}".encode(), partition=1)
    dead.flush(30)
    # ... the retry fences it, aborts its transaction, writes batch 1 once
    rows1 = [{"value": f"b1-{i}"} for i in range(30)]
    retry = write_rows_exactly_once(opts, iter(rows1), "q1", 0, 1)
    assert (retry.records, retry.skipped) == (30, False)
    with pytest.raises(Exception, match="(?i)fenced|epoch"):
        dead.commit_transaction()
    dead.close()
    got = _read_committed(bs, "eos-direct", 2)
    assert Counter(got) == Counter([r["value"].encode() for r in rows + rows1])


def _stream_query(spark: Any, bs: str, src: str, dst: str, ck: str) -> Any:
    return (
        spark.readStream.format("gregor")
        .option("bootstrap.servers", bs)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "100")
        .load()
        .selectExpr("key", "value")
        .writeStream.format("gregor")
        .option("bootstrap.servers", bs)
        .option("topic", dst)
        .option("exactlyOnce", "true")
        .option("checkpointLocation", ck)
        .trigger(availableNow=True)
        .start()
    )


def test_stream_exactly_once_restart_after_lost_commit_entry(
    spark: Any, broker_server: Any, tmp_path: Path
) -> None:
    """A query writes with exactlyOnce; then its last commit log entry is deleted (a driver
    that crashed after the tasks committed, before Spark's commit log), and the restarted
    query replays that batch: the tasks find it committed, the output holds each input once."""
    from spark_helpers import produce

    bs = broker_server.bootstrap
    create_topic(bs, "eos-in", 2)
    create_topic(bs, "eos-out", 2)
    values = {p: [(None, f"{p}-{i}".encode()) for i in range(150)] for p in range(2)}
    produce(bs, "eos-in", values)
    ck = tmp_path / "ck"
    q = _stream_query(spark, bs, "eos-in", "eos-out", str(ck))
    assert q.awaitTermination(180), "availableNow query did not finish"
    assert q.exception() is None
    expected = Counter(v for pairs in values.values() for _, v in pairs)
    assert Counter(_read_committed(bs, "eos-out", 2)) == expected

    commits = sorted((ck / "commits").glob("[0-9]*"), key=lambda f: int(f.name))
    assert commits, "no commit log entry"
    last = commits[-1]
    last.unlink()  # the crashed driver never wrote it
    crc = last.with_name(f".{last.name}.crc")
    if crc.exists():
        crc.unlink()
    q2 = _stream_query(spark, bs, "eos-in", "eos-out", str(ck))
    assert q2.awaitTermination(180), "restarted query did not finish"
    assert q2.exception() is None
    assert (ck / "commits" / last.name).exists(), "the replayed batch was not committed"
    assert Counter(_read_committed(bs, "eos-out", 2)) == expected

    # new input after the restart flows once too
    more = {0: [(None, b"late-0")], 1: [(None, b"late-1")]}
    produce(bs, "eos-in", more)
    q3 = _stream_query(spark, bs, "eos-in", "eos-out", str(ck))
    wait_query(q3, lambda: not q3.isActive, 180, "the third run")
    assert Counter(_read_committed(bs, "eos-out", 2)) == expected + Counter([b"late-0", b"late-1"])
    shutil.rmtree(ck)
