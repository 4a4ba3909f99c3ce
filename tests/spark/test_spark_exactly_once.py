"""Transactions through Spark: the source's kafka.isolation.level=read_committed, and the
sink's exactlyOnce (docs/spark.md, "Exactly-once sink"), against a real loopback broker."""

from __future__ import annotations

import contextlib
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import create_topic, read_committed

from client.errors import ConfigError
from client.spark.options import parse_sink_options

pyspark_sql = pytest.importorskip("pyspark.sql")
Row = pyspark_sql.Row

from client.spark.sink import (  # noqa: E402  (needs pyspark)
    committed_batch,
    transactional_id,
    write_rows_exactly_once,
)

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
    rows = [Row(value=f"b0-{i}") for i in range(50)]
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
    rows1 = [Row(value=f"b1-{i}") for i in range(30)]
    retry = write_rows_exactly_once(opts, iter(rows1), "q1", 0, 1)
    assert (retry.records, retry.skipped) == (30, False)
    with pytest.raises(Exception, match="(?i)fenced|epoch"):
        dead.commit_transaction()
    dead.close()
    got = read_committed(bs, "eos-direct", 2)
    assert Counter(got) == Counter([r.value.encode() for r in rows + rows1])


def _stream_query(spark: Any, bs: str, src: str, dst: str, ck: str) -> Any:
    return (
        spark.readStream.format("gregor")
        .option("bootstrap.servers", bs)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
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
    assert Counter(read_committed(bs, "eos-out", 2)) == expected

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
    assert Counter(read_committed(bs, "eos-out", 2)) == expected

    shutil.rmtree(ck)


def _session_pids(sid: int) -> list[tuple[int, str]]:
    """(pid, command line) of the processes of session `sid` (the driver's process tree)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[3]) == sid:  # state ppid pgrp session
            out.append((int(d.name), cmd))
    return out


@pytest.mark.long
@pytest.mark.timeout(2400)  # 10 driver starts (a JVM each) and a drain, on a loaded machine
def test_stream_exactly_once_survives_driver_and_executor_kills(
    broker_server: Any, tmp_path: Path
) -> None:
    """10 rounds: start the query's driver, SIGKILL one of its Python workers (an executor
    crash: the task is retried) at a random point, then SIGKILL the whole driver at a random
    point; more input arrives each round. A final run drains the input: the output, read
    read_committed, holds each input record exactly once."""
    import os
    import random
    import signal
    import subprocess
    import sys
    import time

    from helpers import wait_until
    from spark_helpers import produce

    seed = int(os.environ.get("GREGOR_EOS_SEED", random.randrange(2**32)))
    print(f"exactly-once kill test seed={seed} (GREGOR_EOS_SEED={seed} replays the schedule)")
    rng = random.Random(seed)
    bs = broker_server.bootstrap
    create_topic(bs, "kill-in", 2)
    create_topic(bs, "kill-out", 2)
    ck = tmp_path / "ck"
    job = Path(__file__).with_name("eos_stream_job.py")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "PYSPARK_PYTHON": sys.executable}
    sent: Counter[bytes] = Counter()

    def batches_done() -> int:
        return len(list((ck / "commits").glob("[0-9]*"))) if (ck / "commits").exists() else 0

    def start(mode: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, str(job), bs, "kill-in", "kill-out", str(ck), mode],
            env=env,
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=(tmp_path / f"driver-{mode}.log").open("ab"),
        )

    for rnd in range(10):
        vals = {p: [(None, f"r{rnd}-{p}-{i}".encode()) for i in range(150)] for p in range(2)}
        produce(bs, "kill-in", vals)
        sent.update(v for pairs in vals.values() for _, v in pairs)
        driver = start("run")
        try:
            before = batches_done()
            wait_until(lambda b=before: batches_done() > b, 300, f"round {rnd}: a batch")
            time.sleep(rng.uniform(0, 1.5))  # the random kill point (chaos, not a wait)
            workers = [pid for pid, cmd in _session_pids(driver.pid) if "pyspark.daemon" in cmd]
            if workers:
                victim = rng.choice(sorted(workers))
                print(f"round {rnd}: SIGKILL python worker {victim}")
                with contextlib.suppress(ProcessLookupError):
                    os.kill(victim, signal.SIGKILL)
            time.sleep(rng.uniform(0, 3))  # the random driver kill point
        finally:
            print(f"round {rnd}: SIGKILL driver {driver.pid} after {batches_done()} batches")
            # the whole session: Spark's Python daemons run in process groups of their own
            for pid, _ in _session_pids(driver.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            driver.wait(30)
    drain = start("drain")
    try:
        assert drain.wait(600) == 0, (tmp_path / "driver-drain.log").read_text()[-3000:]
    finally:
        for pid, _ in _session_pids(drain.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    got = Counter(read_committed(bs, "kill-out", 2))
    dup = {v: n for v, n in got.items() if n > 1}
    assert not dup, f"seed={seed}: written twice: {list(dup)[:5]}"
    assert got == sent, f"seed={seed}: missing {len(sent - got)}, extra {len(got - sent)}"
