"""Offsets inside transactions with Gregor's client against an in-process broker (issue 29):
a consume-transform-produce loop (consume `in`, produce `out`, send the offsets in the same
transaction) is exactly-once across a SIGKILL of the loop's process between sending and
committing; send_offsets_to_transaction with a subscribed consumer's group metadata (the
member check) in both flavours; an aborted transaction leaves the group's offset where it
was."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import wait_until

from client import Admin, Consumer, Producer, TopicPartition, aio
from client.aio.types import ConsumerGroupMetadata
from client.errors import ErrorCode, StaleMemberEpochError, TransactionStateError

OVERRIDES = {"transaction.state.log.num.partitions": 1, "offsets.topic.num.partitions": 1}
ROOT = Path(__file__).resolve().parents[2]

# The loop, run in a child process: argv = bootstrap, number of inputs, the batch after
# whose send (and flush) it SIGKILLs itself (-1: never).
LOOP = textwrap.dedent(
    """
    import os, signal, sys
    from client import Consumer, Producer, TopicPartition
    bootstrap, total, crash_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    tp = TopicPartition("in", 0)
    p = Producer(bootstrap_servers=bootstrap, transactional_id="ctp-loop")
    p.init_transactions()  # fences the previous incarnation, aborting its transaction
    c = Consumer(bootstrap_servers=bootstrap, group_id="ctp", enable_auto_commit=False,
                 isolation_level="read_committed", auto_offset_reset="earliest")
    c.assign([tp])
    start = c.committed([tp])[tp]  # (assign(): the loop starts at the group's offset itself)
    if start is not None:
        c.seek(tp, start)
    batches = 0
    while c.position(tp) < total:
        records = c.poll(200, max_records=7)
        if not records:
            continue
        p.begin_transaction()
        for r in records:
            p.send("out", r.value.upper())
        p.send_offsets_to_transaction({tp: records[-1].offset + 1}, c.group_metadata())
        batches += 1
        if batches == crash_at:
            p.flush()  # the outputs are in the log, the transaction still open
            os.kill(os.getpid(), signal.SIGKILL)
        p.commit_transaction()
    p.close()
    c.close()
    """
)


def _loop(bootstrap: str, total: int, crash_at: int) -> int:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
           os.environ.get("PYTHONPATH")]))}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", LOOP, bootstrap, str(total), str(crash_at)],
        env=env, timeout=120, capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode not in (0, -signal.SIGKILL):
        print(done.stdout, done.stderr)
    return done.returncode


def _read_committed(bootstrap: str, topic: str, n: int) -> list[bytes]:
    with Consumer(bootstrap_servers=bootstrap, isolation_level="read_committed") as c:
        c.assign([TopicPartition(topic, 0)])
        got: list[bytes] = []

        def read() -> bool:
            got.extend(r.value for r in c.poll(200))
            return len(got) >= n

        wait_until(read, 30, f"{n} committed records in {topic}")
        got.extend(r.value for r in c.poll(300))  # (nothing more may come)
        return got


@pytest.fixture
def ctp_broker(broker_factory):
    handle = broker_factory(**OVERRIDES)
    with Admin(bootstrap_servers=handle.bootstrap) as admin:
        admin.create_topic("in", 1, 1)
        admin.create_topic("out", 1, 1)
    return handle


def test_consume_transform_produce_is_exactly_once_across_a_kill(ctp_broker) -> None:
    bootstrap = ctp_broker.bootstrap
    total = 30
    inputs = [b"r%02d" % i for i in range(total)]
    with Producer(bootstrap_servers=bootstrap) as p:
        for v in inputs:
            p.send("in", v, partition=0)
        p.flush()
    assert _loop(bootstrap, total, crash_at=2) == -signal.SIGKILL  # killed before a commit
    assert _loop(bootstrap, total, crash_at=-1) == 0
    assert _read_committed(bootstrap, "out", total) == [v.upper() for v in inputs]
    with Consumer(bootstrap_servers=bootstrap, group_id="ctp") as c:
        assert c.committed([TopicPartition("in", 0)]) == {TopicPartition("in", 0): total}


def test_group_metadata_of_a_member_and_abort(ctp_broker) -> None:
    bootstrap = ctp_broker.bootstrap
    tp = TopicPartition("in", 0)
    with Producer(bootstrap_servers=bootstrap) as p:
        p.send("in", b"x", partition=0).result(10)
    with (
        Consumer("in", bootstrap_servers=bootstrap, group_id="member-g",
                 enable_auto_commit=False, auto_offset_reset="earliest") as c,
        Producer(bootstrap_servers=bootstrap, transactional_id="member-tx") as p,
    ):  # fmt: skip
        p.init_transactions()
        wait_until(lambda: c.poll(100) is not None and c.assignment() == {tp}, 20, "assigned")
        meta = c.group_metadata()
        assert meta.group_id == "member-g" and meta.member_id and meta.generation_id > 0
        p.begin_transaction()
        p.send_offsets_to_transaction({tp: 1}, meta)
        p.commit_transaction()
        assert c.committed([tp]) == {tp: 1}

        p.begin_transaction()  # aborted: the offset stays at 1
        p.send_offsets_to_transaction({tp: 5}, meta)
        p.abort_transaction()
        assert c.committed([tp]) == {tp: 1}

        p.begin_transaction()  # a stale member epoch: the transaction must be aborted
        stale = ConsumerGroupMetadata("member-g", meta.generation_id - 1, meta.member_id)
        with pytest.raises(StaleMemberEpochError):
            p.send_offsets_to_transaction({tp: 7}, stale)
        with pytest.raises(TransactionStateError):
            p.commit_transaction()
        p.abort_transaction()
        assert c.committed([tp]) == {tp: 1}


def test_asyncio_send_offsets(ctp_broker) -> None:
    bootstrap = ctp_broker.bootstrap
    tp = TopicPartition("in", 0)

    async def run() -> None:
        async with aio.Producer(bootstrap_servers=bootstrap, transactional_id="aio-tx") as p:
            await p.init_transactions()
            p.begin_transaction()
            await p.send("out", b"y")
            await p.send_offsets_to_transaction({tp: 3}, "aio-g")  # a bare group id
            await p.commit_transaction()
        async with aio.Consumer(bootstrap_servers=bootstrap, group_id="aio-g") as c:
            assert await c.committed([tp]) == {tp: 3}

    asyncio.run(run())


def test_confluent_kafka_send_offsets_to_transaction(broker_factory) -> None:
    """librdkafka's send_offsets_to_transaction through the Kafka listener (AddOffsetsToTxn,
    FindCoordinator, TxnOffsetCommit): committed with the transaction, dropped by an abort."""
    ck = pytest.importorskip("confluent_kafka")
    handle = broker_factory(
        listeners="GREGOR://127.0.0.1:0,KAFKA://127.0.0.1:0",
        **{"listener.protocol.map": "KAFKA:KAFKA",
           "listener.security.protocol.map": "GREGOR:PLAINTEXT,KAFKA:PLAINTEXT",
           "inter.broker.listener.name": "GREGOR", **OVERRIDES},
    )  # fmt: skip
    port = next(e.port for e in handle.server.listeners.bind if e.name == "KAFKA")
    address = f"127.0.0.1:{port}"
    with Admin(bootstrap_servers=handle.bootstrap) as admin:
        admin.create_topic("ck-in", 1, 1)
        admin.create_topic("ck-out", 1, 1)
    # the internal topics made and loaded first: librdkafka's retries back off for seconds
    with Producer(bootstrap_servers=handle.bootstrap, transactional_id="warm-up") as warm:
        warm.init_transactions()
    tp = TopicPartition("ck-in", 0)
    with Consumer(bootstrap_servers=handle.bootstrap, group_id="ck-ctp") as gc:
        assert gc.committed([tp]) == {tp: None}
    c = ck.Consumer({"bootstrap.servers": address, "group.id": "ck-ctp",
                     "enable.auto.commit": False})  # fmt: skip
    p = ck.Producer({"bootstrap.servers": address, "transactional.id": "ck-ctp-app"})
    try:
        p.init_transactions(30)
        p.begin_transaction()
        p.produce("ck-out", b"transformed", partition=0)
        p.send_offsets_to_transaction(
            [ck.TopicPartition("ck-in", 0, 4)], c.consumer_group_metadata(), 30
        )
        p.commit_transaction(30)
        p.begin_transaction()
        p.send_offsets_to_transaction(
            [ck.TopicPartition("ck-in", 0, 9)], c.consumer_group_metadata(), 30
        )
        p.abort_transaction(30)
        (got,) = c.committed([ck.TopicPartition("ck-in", 0)], timeout=30)
        assert got.offset == 4
    finally:
        c.close()
        p.flush(1)
    with Consumer(bootstrap_servers=handle.bootstrap, group_id="ck-ctp") as gc:
        assert gc.committed([tp]) == {tp: 4}


def test_a_restarted_broker_reloads_committed_and_pending_offsets(broker_factory, tmp_path) -> None:
    """A broker restart reloads `__consumer_offsets`: the committed transaction's offsets are
    the group's (their marker is in the log); the open one's stay pending, so a stable
    fetch waits, until the next producer with the id aborts it."""
    data = tmp_path / "restart"
    handle = broker_factory(data_dir=data, **OVERRIDES)
    with Admin(bootstrap_servers=handle.bootstrap) as admin:
        admin.create_topic("in", 1, 1)
    tp = TopicPartition("in", 0)
    p = Producer(bootstrap_servers=handle.bootstrap, transactional_id="restart-tx")
    p.init_transactions()
    p.begin_transaction()
    p.send_offsets_to_transaction({tp: 3}, "restart-g")
    p.commit_transaction()
    p.begin_transaction()
    p.send_offsets_to_transaction({tp: 8}, "restart-g")  # left open
    p.close()
    handle.server.shutdown(timeout=10.0)

    handle = broker_factory(data_dir=data, **OVERRIDES)
    gc = handle.server.node.group_coordinator
    with Consumer(bootstrap_servers=handle.bootstrap, group_id="restart-g",
                  request_timeout_ms=1000) as c:  # fmt: skip
        wait_until(lambda: _stable_fetch(gc) is not None, 20, "the offsets partition loaded")
        assert _stable_fetch(gc) == (3, ErrorCode.UNSTABLE_OFFSET_COMMIT)
        with Producer(bootstrap_servers=handle.bootstrap, transactional_id="restart-tx") as p2:
            p2.init_transactions()  # aborts the open transaction: ABORT marker, offset 8 gone
        wait_until(lambda: _stable_fetch(gc) == (3, 0), 20, "the pending offsets dropped")
        assert c.committed([tp]) == {tp: 3}


def _stable_fetch(gc) -> tuple[int, int] | None:
    from broker.group import GroupError

    try:
        (t,) = gc.fetch_offsets("restart-g", [{"name": "in", "partitions": [0]}], True)
    except GroupError:
        return None
    (p,) = t["partitions"]
    return p["committed_offset"], p["error_code"]
