"""The transaction coordinator of an in-process broker over real sockets (issue 29): FindCoordinator
key_type 1 creates `__transaction_state`; InitProducerId / AddPartitionsToTxn / EndTxn on the
wire; a second InitProducerId fences the first producer and aborts its open transaction; a
transaction left open past its timeout is aborted with the epoch bumped; after a restart the
coordinator reloads the ids from the log; only the coordinator writes `__transaction_state`. The markers go through a recording channel here
(the seam; the partition side's WriteTxnMarkers is tested with it). A confluent-kafka
transactional producer on the Kafka listener: init_transactions now; begin, produce, commit and
abort once WriteTxnMarkers (27) is in client.protocol (the partition side's branch)."""

from __future__ import annotations

import pytest
from helpers import RawClient, wait_until

from broker.txn import MarkerJob, TxnError
from broker.txn.state import TxnState
from client import Admin, TopicPartition
from client.errors import ErrorCode
from client.protocol import ApiKey
from client.records import build_batch

E = ErrorCode
OVERRIDES = {
    "transaction.state.log.num.partitions": 2,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 100,
    "transaction.max.timeout.ms": 60_000,
}


class CompletingMarkers:
    """Every job's markers count as written at once; the jobs are kept."""

    def __init__(self) -> None:
        self.jobs: list[MarkerJob] = []

    def send(self, job, done, still_valid) -> None:
        self.jobs.append(job)
        done(True)

    def start(self) -> None:
        pass

    def shutdown(self) -> None:
        pass


def _use_recording_markers(handle) -> CompletingMarkers:
    tc = handle.server.node.txn_coordinator
    tc.markers.shutdown()
    tc.markers = CompletingMarkers()
    return tc.markers


def _find(c: RawClient, tid: str) -> dict:
    got: dict = {}

    def ready() -> bool:
        got.update(c.request(ApiKey.FIND_COORDINATOR, 0,
                             {"key_type": 1, "coordinator_keys": [tid]})["coordinators"][0])  # fmt: skip
        return got["error_code"] == 0

    wait_until(ready, 30, f"coordinator of {tid}")
    return got


def _init(c: RawClient, tid: str, timeout_ms: int = 10_000) -> dict:
    body = {"transactional_id": tid, "transaction_timeout_ms": timeout_ms}
    got: dict = {}

    def done() -> bool:
        got.update(c.request(ApiKey.INIT_PRODUCER_ID, 0, body))
        return got["error_code"] not in (E.COORDINATOR_LOAD_IN_PROGRESS, E.NOT_COORDINATOR)

    wait_until(done, 30, f"InitProducerId of {tid}")
    return got


def _add(c: RawClient, tid: str, pid: int, epoch: int, tps: dict[str, list[int]]) -> set[int]:
    resp = c.request(ApiKey.ADD_PARTITIONS_TO_TXN, 0, {
        "transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
        "topics": [{"name": t, "partitions": ps} for t, ps in tps.items()]})  # fmt: skip
    return {p["error_code"] for t in resp["topics"] for p in t["partitions"]}


def _end(c: RawClient, tid: str, pid: int, epoch: int, commit: bool) -> int:
    return c.request(ApiKey.END_TXN, 0, {"transactional_id": tid, "producer_id": pid,
                                        "producer_epoch": epoch, "committed": commit})["error_code"]  # fmt: skip


def test_init_add_end_fence_timeout_and_reload(broker_factory, tmp_path) -> None:
    data = tmp_path / "data"
    server = broker_factory(data_dir=data, **OVERRIDES)
    markers = _use_recording_markers(server)
    tc = server.server.node.txn_coordinator
    with Admin(bootstrap_servers=server.bootstrap) as admin:
        admin.create_topic("orders", 2, 1)
    with RawClient(server.address) as c:
        found = _find(c, "app-1")
        assert (found["node_id"], found["port"]) == (1, server.port)
        produce = c.request(ApiKey.PRODUCE, 0, {"acks": 1, "timeout_ms": 5000, "topics": [
            {"name": "__transaction_state", "partitions": [
                {"partition": 0, "records": build_batch([(b"k", b"v")])}]}]})  # fmt: skip
        assert produce["topics"][0]["partitions"][0]["error_code"] == E.INVALID_TOPIC_EXCEPTION
        first = _init(c, "app-1")
        assert first["error_code"] == 0 and first["producer_epoch"] == 0, first
        pid = first["producer_id"]
        assert _add(c, "app-1", pid, 0, {"orders": [0, 1]}) == {0}
        assert _add(c, "app-1", pid, 0, {"nope": [0]}) == {E.UNKNOWN_TOPIC_OR_PARTITION}
        assert _end(c, "app-1", pid, 0, commit=True) == 0
        wait_until(lambda: tc.describe("app-1").state == TxnState.COMPLETE_COMMIT, 10, "commit")
        assert markers.jobs[-1].commit and markers.jobs[-1].partitions == {("orders", 0),
                                                                          ("orders", 1)}  # fmt: skip

        # a second producer with the same id: epoch 1; the first is fenced
        second = _init(c, "app-1")
        assert (second["error_code"], second["producer_id"], second["producer_epoch"]) == (
            0,
            pid,
            1,
        )
        assert _add(c, "app-1", pid, 0, {"orders": [0]}) == {E.PRODUCER_FENCED}
        assert _end(c, "app-1", pid, 0, commit=False) == E.PRODUCER_FENCED
        # its open transaction is aborted by the next init, which is told to retry
        assert _add(c, "app-1", pid, 1, {"orders": [1]}) == {0}
        assert _init(c, "app-1")["error_code"] == E.CONCURRENT_TRANSACTIONS
        # (the markers are sent after the answer, from the write's callback)
        wait_until(lambda: len(markers.jobs) == 2, 10, "the abort's markers")
        aborted = markers.jobs[-1]
        assert (aborted.commit, aborted.producer_epoch, aborted.partitions) == (
            False, 2, {("orders", 1)})  # fmt: skip
        wait_until(lambda: _init(c, "app-1")["error_code"] == 0, 10, "init after the abort")
        assert tc.describe("app-1").producer_epoch == 3

        # a transaction left open past its timeout is aborted, the producer fenced
        t = _init(c, "slow", timeout_ms=300)
        assert t["error_code"] == 0
        assert _add(c, "slow", t["producer_id"], 0, {"orders": [0]}) == {0}
        wait_until(lambda: tc.describe("slow").state == TxnState.COMPLETE_ABORT, 10, "timeout")
        assert [(j.transactional_id, j.commit, j.producer_epoch) for j in markers.jobs][-1] == (
            "slow", False, 1)  # fmt: skip
        assert _end(c, "slow", t["producer_id"], 0, commit=True) == E.PRODUCER_FENCED
        assert _init(c, "slow", timeout_ms=60_001)["error_code"] == E.INVALID_TRANSACTION_TIMEOUT

    server.server.shutdown()
    server = broker_factory(data_dir=data, **OVERRIDES)
    _use_recording_markers(server)
    with RawClient(server.address) as c:
        _find(c, "app-1")
        again = _init(c, "app-1")  # the state came back from __transaction_state
        assert (again["error_code"], again["producer_id"], again["producer_epoch"]) == (0, pid, 4)
        assert _init(c, "slow")["producer_epoch"] == 2


class HeldMarkers(CompletingMarkers):
    """Markers that never arrive: the transaction stays Prepare* (a coordinator that dies
    between PrepareCommit and CompleteCommit)."""

    def send(self, job, done, still_valid) -> None:
        self.jobs.append(job)


def test_restarted_coordinator_completes_a_prepared_commit(broker_factory, tmp_path) -> None:
    data = tmp_path / "data"
    server = broker_factory(data_dir=data, **OVERRIDES)
    tc = server.server.node.txn_coordinator
    tc.markers.shutdown()
    tc.markers = held = HeldMarkers()
    with Admin(bootstrap_servers=server.bootstrap) as admin:
        admin.create_topic("orders", 2, 1)
    with RawClient(server.address) as c:
        _find(c, "ha")
        pid = _init(c, "ha")["producer_id"]
        assert _add(c, "ha", pid, 0, {"orders": [0, 1]}) == {0}
        assert _end(c, "ha", pid, 0, commit=True) == 0
        wait_until(lambda: len(held.jobs) == 1, 10, "the commit's markers")
        assert tc.describe("ha").state == TxnState.PREPARE_COMMIT
        assert _init(c, "ha")["error_code"] == E.CONCURRENT_TRANSACTIONS
    server.server.shutdown()

    server = broker_factory(data_dir=data, **OVERRIDES)
    tc = server.server.node.txn_coordinator

    def completed() -> bool:
        try:
            md = tc.describe("ha")
        except TxnError:  # not loaded yet
            return False
        return md is not None and md.state == TxnState.COMPLETE_COMMIT

    # the new coordinator loads PrepareCommit, writes the COMMIT markers itself (WriteTxnMarkers
    # to the partitions' leader, here itself) and completes the transaction
    wait_until(completed, 30, "the commit completed by the restarted coordinator")
    with Admin(bootstrap_servers=server.bootstrap) as admin:
        ends = admin.list_offsets({TopicPartition("orders", p): -1 for p in (0, 1)})
    assert sorted(ends.values()) == [1, 1]  # one COMMIT marker on each partition, nothing else
    with RawClient(server.address) as c:
        assert _init(c, "ha")["producer_epoch"] == 1


@pytest.fixture(scope="module")
def kafka_txn_broker(tmp_path_factory):
    """One broker with a GREGOR and a KAFKA listener for the confluent-kafka tests, its
    `__transaction_state` made and loaded before librdkafka asks (no client retry back-off)."""
    from helpers import BrokerHandle, broker_config

    from broker.server import BrokerServer

    d = tmp_path_factory.mktemp("txn-kafka")
    cfg = broker_config(
        d / "data",
        listeners="GREGOR://127.0.0.1:0,KAFKA://127.0.0.1:0",
        **{"listener.protocol.map": "KAFKA:KAFKA",
           "listener.security.protocol.map": "GREGOR:PLAINTEXT,KAFKA:PLAINTEXT",
           "inter.broker.listener.name": "GREGOR", **OVERRIDES},
    )  # fmt: skip
    server = BrokerServer(cfg)
    host, port = server.start()
    try:
        handle = BrokerHandle(server=server, host=host, port=port, data_dir=d / "data")
        with RawClient(handle.address) as c:
            _find(c, "warm-up")
            _init(c, "warm-up")  # every partition of the topic is led and loaded here
        yield handle
    finally:
        server.shutdown(timeout=10.0)


def _kafka_address(handle) -> str:
    port = next(e.port for e in handle.server.listeners.bind if e.name == "KAFKA")
    return f"127.0.0.1:{port}"


def test_confluent_kafka_init_transactions_fences_the_previous_producer(kafka_txn_broker) -> None:
    ck = pytest.importorskip("confluent_kafka")
    server = kafka_txn_broker
    conf = {"bootstrap.servers": _kafka_address(server), "transactional.id": "ck-app",
            "transaction.timeout.ms": 30_000}  # fmt: skip
    first = ck.Producer(conf)
    first.init_transactions(30)
    tc = server.server.node.txn_coordinator
    md = tc.describe("ck-app")
    assert md is not None and (md.producer_epoch, md.timeout_ms) == (0, 30_000)
    second = ck.Producer(conf)
    second.init_transactions(30)
    md2 = tc.describe("ck-app")
    assert md2 is not None and (md2.producer_id, md2.producer_epoch) == (md.producer_id, 1)
    first.flush(1)
    second.flush(1)


@pytest.mark.skipif(
    not hasattr(ApiKey, "WRITE_TXN_MARKERS"),
    reason="needs WriteTxnMarkers (27) and transactional produce: the partition side of issue 29",
)
def test_confluent_kafka_commit_and_abort(kafka_txn_broker) -> None:
    ck = pytest.importorskip("confluent_kafka")
    server = kafka_txn_broker
    address = _kafka_address(server)
    with Admin(bootstrap_servers=server.bootstrap) as admin:
        admin.create_topic("ck-txn", 2, 1)
    p = ck.Producer({"bootstrap.servers": address, "transactional.id": "ck-txn-app"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(10):
        p.produce("ck-txn", b"committed-%d" % i, partition=i % 2)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(5):
        p.produce("ck-txn", b"aborted-%d" % i, partition=i % 2)
    p.flush(30)
    p.abort_transaction(30)
    tc = server.server.node.txn_coordinator
    wait_until(lambda: tc.describe("ck-txn-app").state == TxnState.COMPLETE_ABORT, 30, "abort")
    c = ck.Consumer({"bootstrap.servers": address, "group.id": "ck-txn-reader",
                     "isolation.level": "read_committed", "enable.auto.commit": False})  # fmt: skip
    try:
        tps = [ck.TopicPartition("ck-txn", p, ck.OFFSET_BEGINNING) for p in (0, 1)]
        c.assign(tps)
        ends = [c.get_watermark_offsets(tp, timeout=30)[1] for tp in tps]  # markers included
        got: list[bytes] = []

        def read_to_end() -> bool:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append(m.value())
            return [p.offset for p in c.position(tps)] == ends

        wait_until(read_to_end, 60, "read_committed to the end of both partitions")
        assert sorted(got) == sorted(b"committed-%d" % i for i in range(10)), got
    finally:
        c.close()
