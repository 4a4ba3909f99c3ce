"""Transactions on a 3-controller, 3-broker cluster of real processes (issue 29, "Tests"): a
confluent-kafka (librdkafka) transactional producer over the KAFKA listeners writes
transactions spanning partitions led by different brokers, so the coordinator's
WriteTxnMarkers go to other brokers over the network; the coordinator (the leader of the
id's `__transaction_state` partition) is SIGKILLed mid-transaction and right after a commit;
a confluent-kafka read_committed consumer must see each committed transaction whole and
nothing of an aborted one (docs/transactions.md, "Tested under failure")."""

from __future__ import annotations

import signal

import pytest
from helpers import wait_until

from broker.txn.log_format import partition_for
from client import Admin
from client.errors import GregorError

ck = pytest.importorskip("confluent_kafka")

TOPIC, PARTITIONS = "txc", 3
TXN_PARTITIONS = 5  # transaction.state.log.num.partitions: a small topic loads fast
CONFIG = {"transaction_state_log_num_partitions": TXN_PARTITIONS}


def _cluster(broker_cluster):
    _, brokers = broker_cluster(kafka=True, min_insync_replicas=2, **CONFIG)
    with Admin(bootstrap_servers=brokers.bootstrap_all()) as admin:
        admin.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        leaders = {p.leader for p in admin.describe_topic(TOPIC).partitions}
    assert len(leaders) >= 2, f"the partitions' leaders should differ: {leaders}"
    return brokers


def _producer(bootstrap: str, tid: str):
    p = ck.Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 2,
         "transaction.timeout.ms": 60_000, "message.timeout.ms": 60_000,
         "topic.metadata.refresh.interval.ms": 1000}
    )  # fmt: skip
    p.init_transactions(60)
    return p


def _txn(p, name: str, n: int) -> list[bytes]:
    """Produces n records of transaction `name`, spread over every partition."""
    values = [f"{name}-{i}".encode() for i in range(n)]
    for i, v in enumerate(values):
        p.produce(TOPIC, v, partition=i % PARTITIONS)
    return values


def _read(bootstrap: str, isolation: str, expected: int) -> list[bytes]:
    """Every record of the topic under `isolation`: waits for `expected`, then for nothing
    more (a further 1 s)."""
    c = ck.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"txc-{isolation}",
         "enable.auto.commit": False, "isolation.level": isolation,
         "topic.metadata.refresh.interval.ms": 1000}
    )  # fmt: skip
    got: list[bytes] = []
    try:
        c.assign([ck.TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])

        def more() -> bool:
            for m in c.consume(100, 0.2):
                if m.error() is None:
                    got.append(m.value())
            return len(got) >= expected

        wait_until(more, 60, f"{expected} records under {isolation}")
        for _ in range(5):
            more()
        return got
    finally:
        c.close()


def _coordinator(bootstrap: str, tid: str) -> int | None:
    """The leader of the id's __transaction_state partition; None while nobody leads it."""
    try:
        with Admin(bootstrap_servers=bootstrap, request_timeout_ms=2000) as admin:
            parts = admin.describe_topic("__transaction_state").partitions
    except GregorError:
        return None
    leader = parts[partition_for(tid, TXN_PARTITIONS)].leader
    return leader if leader is not None and leader >= 0 else None


def test_commit_and_abort_across_partitions_led_by_different_brokers(broker_cluster) -> None:
    brokers = _cluster(broker_cluster)
    p = _producer(brokers.kafka_bootstrap(), "txc-1")
    committed: list[bytes] = []
    aborted: list[bytes] = []
    for t in range(4):
        p.begin_transaction()
        values = _txn(p, f"t{t}", 9)
        if t % 2:
            assert p.flush(30) == 0  # else librdkafka's abort purges what it has not sent
            p.abort_transaction(30)
            aborted += values
        else:
            p.commit_transaction(30)
            committed += values
    got = _read(brokers.kafka_bootstrap(), "read_committed", len(committed))
    assert sorted(got) == sorted(committed)
    everything = _read(brokers.kafka_bootstrap(), "read_uncommitted", len(committed + aborted))
    assert sorted(everything) == sorted(committed + aborted)  # the aborted ones were written


@pytest.mark.long  # CI time (~20 s); the default run kills the coordinator in the test below
def test_coordinator_killed_mid_transaction_and_right_after_commit(broker_cluster) -> None:
    brokers = _cluster(broker_cluster)
    tid = "txc-2"
    p = _producer(brokers.kafka_bootstrap(), tid)
    committed: list[bytes] = []
    # 1. mid-transaction: the transaction's state (Ongoing, its partitions) was replicated
    # before AddPartitionsToTxn was answered, so the new coordinator commits it
    p.begin_transaction()
    values = _txn(p, "mid", 9)
    p.flush(30)
    first = _coordinator(brokers.bootstrap_all(), tid)
    assert first is not None
    brokers.stop(first, signal.SIGKILL)
    values += _txn(p, "mid-after", 6)
    p.commit_transaction(60)
    committed += values
    # 2. right after EndTxn's answer: PrepareCommit is replicated, the markers may not have
    # landed; the next coordinator sends them and writes CompleteCommit
    brokers.start(first)
    p.begin_transaction()
    committed += _txn(p, "after", 9)
    p.commit_transaction(60)
    alive = ",".join(brokers.bootstrap(n) for n in brokers.procs)
    second = _coordinator(alive, tid)
    assert second is not None
    brokers.stop(second, signal.SIGKILL)
    got = _read(brokers.kafka_bootstrap(), "read_committed", len(committed))
    assert sorted(got) == sorted(committed)
    # the producer goes on with the third coordinator
    p.begin_transaction()
    aborted = _txn(p, "aborted", 6)
    assert p.flush(30) == 0
    p.abort_transaction(60)
    p.begin_transaction()
    committed += _txn(p, "last", 6)
    p.commit_transaction(60)
    got = _read(brokers.kafka_bootstrap(), "read_committed", len(committed))
    assert sorted(got) == sorted(committed)
    assert not set(got) & set(aborted)


def test_coordinator_killed_between_end_txn_answer_and_the_markers(broker_cluster) -> None:
    """Arranged: the leader B of one of the transaction's partitions is paused (SIGSTOP)
    before the commit, so its marker cannot land; EndTxn is answered once PrepareCommit is
    replicated (to the coordinator and the third broker, after B leaves the ISR); while B
    still leads its partition (its session is long) the coordinator C is SIGKILLed, then B
    resumed and C restarted. The next coordinator must load PrepareCommit and send the
    markers: the read_committed consumer sees the transaction whole."""
    _, brokers = broker_cluster(
        kafka=True, session_ms=8000, min_insync_replicas=2, replica_lag_time_max_ms=1000,
        **CONFIG,
    )  # fmt: skip
    with Admin(bootstrap_servers=brokers.bootstrap_all()) as admin:
        admin.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
    tid = "txc-3"
    p = _producer(brokers.kafka_bootstrap(), tid)
    p.begin_transaction()
    committed = _txn(p, "first", 6)
    p.commit_transaction(30)  # (the id's coordinator is now loaded and known)
    coord = _coordinator(brokers.bootstrap_all(), tid)
    with Admin(bootstrap_servers=brokers.bootstrap_all()) as admin:
        leaders = {q.partition: q.leader for q in admin.describe_topic(TOPIC).partitions}
    paused = next((b for b in leaders.values() if b != coord), None)
    assert coord is not None and paused is not None, (coord, leaders)
    blocked = [q for q, b in leaders.items() if b == paused]
    p.begin_transaction()
    values = _txn(p, "prepared", 9)
    assert p.flush(30) == 0
    brokers.pause(paused)
    p.commit_transaction(60)  # answered: PrepareCommit is written
    others = ",".join(f"127.0.0.1:{port}" for n, port in brokers.kafka_ports.items() if n != paused)
    from confluent_kafka.admin import AdminClient  # metadata only (no ListOffsets to B)

    md = AdminClient({"bootstrap.servers": others}).list_topics(TOPIC, timeout=10)
    now = {q: part.leader for q, part in md.topics[TOPIC].partitions.items()}
    # the paused broker still leads its partitions: their markers have not landed
    assert all(now[q] == paused for q in blocked), (now, blocked)
    brokers.stop(coord, signal.SIGKILL)
    brokers.resume(paused)
    brokers.start(coord)
    committed += values
    got = _read(brokers.kafka_bootstrap(), "read_committed", len(committed))
    assert sorted(got) == sorted(committed)
    p.begin_transaction()  # the producer goes on with the new coordinator
    committed += _txn(p, "next", 6)
    p.commit_transaction(60)
    got = _read(brokers.kafka_bootstrap(), "read_committed", len(committed))
    assert sorted(got) == sorted(committed)


@pytest.mark.long  # CI time (~15 s)
def test_a_hung_producers_transaction_is_aborted_by_the_next_coordinator(broker_cluster) -> None:
    """A producer opens a transaction, writes to every partition and goes quiet; its
    coordinator is SIGKILLed. The next coordinator loads the Ongoing transaction and aborts it
    once `transaction.timeout.ms` passed (bumping the epoch): the last stable offset moves on,
    so a read_committed consumer gets the records written after it, never the open ones, and
    the hung producer's late commit is refused (fenced)."""
    _, brokers = broker_cluster(
        kafka=True, min_insync_replicas=2,
        transaction_abort_timed_out_transaction_cleanup_interval_ms=500, **CONFIG,
    )  # fmt: skip
    with Admin(bootstrap_servers=brokers.bootstrap_all()) as admin:
        admin.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
    tid = "txc-4"
    hung = ck.Producer(
        {"bootstrap.servers": brokers.kafka_bootstrap(), "transactional.id": tid,
         "transaction.timeout.ms": 3000, "linger.ms": 2}
    )  # fmt: skip
    hung.init_transactions(60)
    hung.begin_transaction()
    open_values = _txn(hung, "open", 6)
    assert hung.flush(30) == 0
    coord = _coordinator(brokers.bootstrap_all(), tid)
    assert coord is not None
    brokers.stop(coord, signal.SIGKILL)
    plain = ck.Producer({"bootstrap.servers": brokers.kafka_bootstrap(), "acks": "all"})
    after = [f"after-{i}".encode() for i in range(6)]
    for i, v in enumerate(after):
        plain.produce(TOPIC, v, partition=i % PARTITIONS)
    assert plain.flush(60) == 0
    got = _read(brokers.kafka_bootstrap(), "read_committed", len(after))
    assert sorted(got) == sorted(after) and not set(got) & set(open_values)
    with pytest.raises(ck.KafkaException):
        hung.commit_transaction(30)
