"""Gregor's transactional producer against an in-process broker (issue 29): init, begin, send,
commit and abort as the coordinator sees them (its state and DescribeTransactions), a second
producer with the same transactional.id fencing the first, the asyncio flavour, and reading
back committed-only data once the partition side (WriteTxnMarkers) is merged.

The coordinator's markers go through a recording channel (the partition side's
WriteTxnMarkers is not on this branch): each job counts as written at once."""

from __future__ import annotations

import asyncio

import pytest
from helpers import wait_until

from broker.txn import MarkerJob
from broker.txn.state import TxnState
from client import Admin, Producer, TopicPartition, aio
from client.errors import (
    ClientClosedError,
    ProducerFencedError,
    TransactionalIdNotFoundError,
    TransactionStateError,
)
from client.protocol import ApiKey

OVERRIDES = {"transaction.state.log.num.partitions": 2}


class CompletingMarkers:
    def __init__(self) -> None:
        self.jobs: list[MarkerJob] = []

    def send(self, job, done, still_valid) -> None:
        self.jobs.append(job)
        done(True)

    def start(self) -> None:
        pass

    def shutdown(self) -> None:
        pass


def _wait_state(tc, tid: str, state: TxnState) -> None:
    """The markers are sent after EndTxn is answered; Complete* follows them."""
    wait_until(lambda: tc.describe(tid).state == state, 10, f"{tid} in {state.name}")


@pytest.fixture
def txn_broker(broker_factory):
    handle = broker_factory(**OVERRIDES)
    tc = handle.server.node.txn_coordinator
    tc.markers.shutdown()
    tc.markers = CompletingMarkers()
    with Admin(bootstrap_servers=handle.bootstrap) as admin:
        admin.create_topic("orders", 2, 1)
    return handle


def test_commit_and_abort(txn_broker) -> None:
    tc = txn_broker.server.node.txn_coordinator
    markers = tc.markers
    with Producer(bootstrap_servers=txn_broker.bootstrap, transactional_id="app") as p:
        with pytest.raises(TransactionStateError, match="init_transactions|outside a transaction"):
            p.send("orders", b"early")
        p.init_transactions()
        with pytest.raises(TransactionStateError, match="outside a transaction"):
            p.send("orders", b"no transaction")
        p.begin_transaction()
        futs = [p.send("orders", b"v%d" % i, partition=i % 2) for i in range(10)]
        p.commit_transaction()
        assert all(f.done() and f.exception() is None for f in futs)
        _wait_state(tc, "app", TxnState.COMPLETE_COMMIT)
        job = markers.jobs[-1]
        assert job.commit and job.partitions == {("orders", 0), ("orders", 1)}

        p.begin_transaction()
        p.send("orders", b"aborted", partition=1).result(10)
        p.abort_transaction()
        _wait_state(tc, "app", TxnState.COMPLETE_ABORT)
        assert not markers.jobs[-1].commit and markers.jobs[-1].partitions == {("orders", 1)}

        with Admin(bootstrap_servers=txn_broker.bootstrap) as admin:
            d = admin.describe_transactions(["app"])["app"]
            assert (d.state, d.coordinator, d.timeout_ms, d.start_time_ms) == (
                "CompleteAbort", 1, 60_000, None)  # fmt: skip
            assert d.producer_id == job.producer_id and d.partitions == []
            p.begin_transaction()
            p.send("orders", b"open", partition=0).result(10)
            d = admin.describe_transactions(["app"])["app"]
            assert d.state == "Ongoing" and d.start_time_ms is not None
            assert [str(tp) for tp in d.partitions] == [str(TopicPartition("orders", 0))]
            listed = admin.list_transactions()
            assert [(t.transactional_id, t.state) for t in listed] == [("app", "Ongoing")]
            assert admin.list_transactions(states=["CompleteCommit"]) == []
            assert admin.list_transactions(producer_ids=[d.producer_id + 1]) == []
            with pytest.raises(TransactionalIdNotFoundError, match="nobody"):
                admin.describe_transactions(["nobody"])
            p.abort_transaction()
            _wait_state(tc, "app", TxnState.COMPLETE_ABORT)  # (its markers follow the answer)

        # an empty transaction sends no EndTxn; the producer goes on
        p.begin_transaction()
        p.commit_transaction()
        assert len(markers.jobs) == 3


def test_a_new_producer_fences_the_old_one(txn_broker) -> None:
    tc = txn_broker.server.node.txn_coordinator
    old = Producer(bootstrap_servers=txn_broker.bootstrap, transactional_id="fenced")
    new = Producer(bootstrap_servers=txn_broker.bootstrap, transactional_id="fenced")
    try:
        old.init_transactions()
        old.begin_transaction()
        old.send("orders", b"from the old one", partition=0).result(10)
        new.init_transactions()  # aborts the old one's open transaction, bumps the epoch
        assert tc.describe("fenced").producer_epoch == 2
        assert tc.describe("fenced").state == TxnState.EMPTY
        with pytest.raises(ProducerFencedError):
            old.commit_transaction()
        for call in (old.begin_transaction, old.abort_transaction, old.commit_transaction):
            with pytest.raises(ProducerFencedError):
                call()
        with pytest.raises(ProducerFencedError):
            old.send("orders", b"x")
        new.begin_transaction()
        new.send("orders", b"from the new one", partition=0).result(10)
        new.commit_transaction()
        _wait_state(tc, "fenced", TxnState.COMPLETE_COMMIT)
    finally:
        old.close()
        new.close()


def test_close_in_a_transaction_fails_what_was_not_sent(txn_broker) -> None:
    p = Producer(bootstrap_servers=txn_broker.bootstrap, transactional_id="closing",
                 linger_ms=60_000)  # fmt: skip
    p.init_transactions()
    p.begin_transaction()
    fut = p.send("orders", b"lingering", partition=0)
    p.close()
    assert isinstance(fut.exception(10), ClientClosedError)


def test_asyncio_producer(txn_broker) -> None:
    tc = txn_broker.server.node.txn_coordinator

    async def run() -> None:
        async with aio.Producer(
            bootstrap_servers=txn_broker.bootstrap,
            transactional_id="aio",
            transaction_timeout_ms=20_000,
        ) as p:
            await p.init_transactions()
            p.begin_transaction()
            fut = await p.send("orders", b"a", key=b"k")
            await p.commit_transaction()
            assert (await fut).offset >= 0

    asyncio.run(run())
    _wait_state(tc, "aio", TxnState.COMPLETE_COMMIT)
    assert tc.describe("aio").timeout_ms == 20_000


@pytest.mark.skipif(
    not hasattr(ApiKey, "WRITE_TXN_MARKERS"), reason="needs the partition side (WriteTxnMarkers)"
)
def test_read_committed_sees_only_committed(broker_factory) -> None:
    from client import Consumer

    handle = broker_factory(**OVERRIDES)
    with Admin(bootstrap_servers=handle.bootstrap) as admin:
        admin.create_topic("rc", 1, 1)
    with Producer(bootstrap_servers=handle.bootstrap, transactional_id="rc") as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("rc", b"committed-1")
        p.commit_transaction()
        p.begin_transaction()
        p.send("rc", b"aborted").result(10)
        p.abort_transaction()
        p.begin_transaction()
        p.send("rc", b"committed-2")
        p.commit_transaction()
    with Consumer(
        bootstrap_servers=handle.bootstrap, isolation_level="read_committed"
    ) as c:  # fmt: skip
        from client import TopicPartition

        c.assign([TopicPartition("rc", 0)])
        got: list[bytes] = []

        def read() -> bool:
            got.extend(r.value for r in c.poll(200))
            return len(got) >= 2

        wait_until(read, 20, "the committed records")
        assert got == [b"committed-1", b"committed-2"]


def _kafka_request(port: int, entity, resp_cls):
    """One flexible Kafka request (header v2) over a fresh socket; the decoded response."""
    import io
    import socket
    import struct

    from kio.schema.request_header.v2.header import RequestHeader
    from kio.serial import entity_reader, entity_writer
    from kio.static.primitive import i32

    cls = type(entity)
    buf = io.BytesIO()
    entity_writer(RequestHeader)(buf, RequestHeader(
        request_api_key=cls.__api_key__, request_api_version=cls.__version__,
        correlation_id=i32(9), client_id="raw"))  # fmt: skip
    entity_writer(cls)(buf, entity)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(struct.pack(">i", len(buf.getvalue())) + buf.getvalue())
        f = s.makefile("rb")
        answer = f.read(struct.unpack(">i", f.read(4))[0])
    return entity_reader(resp_cls)(memoryview(answer), 5)[0]  # (correlation id, no tags)


def test_kafka_listener_describes_and_lists(broker_factory) -> None:
    from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
    from kio.schema.describe_transactions.v0.response import DescribeTransactionsResponse
    from kio.schema.list_transactions.v1.request import ListTransactionsRequest
    from kio.schema.list_transactions.v1.response import ListTransactionsResponse
    from kio.static.primitive import i64

    handle = broker_factory(
        listeners="GREGOR://127.0.0.1:0,KAFKA://127.0.0.1:0",
        **{"listener.protocol.map": "KAFKA:KAFKA",
           "listener.security.protocol.map": "GREGOR:PLAINTEXT,KAFKA:PLAINTEXT",
           "inter.broker.listener.name": "GREGOR", **OVERRIDES},
    )  # fmt: skip
    kport = next(e.port for e in handle.server.listeners.bind if e.name == "KAFKA")
    tc = handle.server.node.txn_coordinator
    tc.markers.shutdown()
    tc.markers = CompletingMarkers()
    with Admin(bootstrap_servers=handle.bootstrap) as admin:
        admin.create_topic("orders", 1, 1)
    with Producer(bootstrap_servers=handle.bootstrap, transactional_id="k1") as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("orders", b"v").result(10)
        # (only an open transaction: kio's reader refuses the -1 start time Kafka sends
        # outside one, as Gregor does)
        d = _kafka_request(kport, DescribeTransactionsRequest(transactional_ids=("k1",)),
                           DescribeTransactionsResponse)  # fmt: skip
        (k1,) = d.transaction_states
        assert (k1.error_code, k1.transaction_state, k1.producer_epoch) == (0, "Ongoing", 0)
        assert [(t.topic, list(t.partitions)) for t in k1.topics] == [("orders", [0])]
        assert int(k1.transaction_timeout.total_seconds()) == 60
        listed = _kafka_request(kport, ListTransactionsRequest(
            state_filters=("Ongoing", "Nope"), producer_id_filters=(), duration_filter=i64(-1)),
            ListTransactionsResponse)  # fmt: skip
        assert listed.error_code == 0 and listed.unknown_state_filters == ("Nope",)
        assert [(t.transactional_id, t.transaction_state) for t in listed.transaction_states] == [
            ("k1", "Ongoing")
        ]
        p.abort_transaction()


def test_cli_list_describe_and_abort(txn_broker, capsys) -> None:
    from broker.cli import main

    tc = txn_broker.server.node.txn_coordinator
    boot = ["--bootstrap-server", txn_broker.bootstrap]
    stuck = Producer(bootstrap_servers=txn_broker.bootstrap, transactional_id="stuck")
    try:
        stuck.init_transactions()
        stuck.begin_transaction()
        stuck.send("orders", b"never committed", partition=1).result(10)
        capsys.readouterr()
        assert main(["transactions", "list", "--state", "Ongoing", *boot]) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[0].split() == ["TRANSACTIONAL-ID", "PRODUCER-ID", "STATE", "COORDINATOR"]
        assert [r.split()[0::2] for r in out[1:]] == [["stuck", "Ongoing"]]
        assert main(["transactions", "describe", "--transactional-id", "stuck", *boot]) == 0
        out = capsys.readouterr().out
        assert "state Ongoing" in out and "partitions orders-1" in out and "epoch 0" in out
        assert main(["transactions", "abort", "--transactional-id", "stuck", *boot]) == 0
        out = capsys.readouterr().out
        assert "fenced (now epoch 2); aborted its open transaction over 1 partition(s)" in out
        aborted = [j for j in tc.markers.jobs if j.transactional_id == "stuck"]
        assert [(j.commit, j.partitions) for j in aborted] == [(False, {("orders", 1)})]
        with pytest.raises(ProducerFencedError):
            stuck.commit_transaction()
        assert main(["transactions", "describe", "--transactional-id", "nobody", *boot]) == 1
        assert "TRANSACTIONAL_ID_NOT_FOUND" in capsys.readouterr().err
    finally:
        stuck.close()
