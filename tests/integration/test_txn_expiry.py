"""Expiry against one in-process broker (issue 29), with the real client and coordinator:
transactional.id.expiration.ms (an idle id gets its tombstone, DescribeTransactions answers
TRANSACTIONAL_ID_NOT_FOUND, the next init_transactions starts afresh, an open transaction's id
stays) and producer.id.expiration.ms (DescribeProducers stops listing an idle producer but
keeps one whose transaction is open; the idle idempotent producer sends again)."""

from __future__ import annotations

from helpers import wait_until

from client import Admin, Producer, TopicPartition
from client.errors import TransactionalIdNotFoundError

TOPIC = "exp"
TP = TopicPartition(TOPIC, 0)


def _gone(admin: Admin, tid: str) -> bool:
    try:
        admin.describe_transactions([tid])
    except TransactionalIdNotFoundError:
        return True
    return False


def test_idle_transactional_ids_expire(broker_factory) -> None:
    handle = broker_factory(**{
        "transaction.state.log.num.partitions": 2,
        "transactional.id.expiration.ms": 5000,
        "transaction.remove.expired.transaction.cleanup.interval.ms": 200,
    })  # fmt: skip
    tc = handle.server.node.txn_coordinator
    bs = handle.bootstrap
    with Admin(bootstrap_servers=bs) as admin:
        admin.create_topic(TOPIC)
        with (
            Producer(bootstrap_servers=bs, transactional_id="exp-done") as done,
            Producer(bootstrap_servers=bs, transactional_id="exp-open") as still_open,
        ):
            done.init_transactions()
            done.begin_transaction()
            done.send(TOPIC, b"a", partition=0)
            done.commit_transaction()
            wait_until(  # (the markers go after EndTxn's answer, then CompleteCommit)
                lambda: (
                    admin.describe_transactions(["exp-done"])["exp-done"].state == "CompleteCommit"
                ),
                15,
                "exp-done completes",
            )
            first = admin.describe_transactions(["exp-done"])["exp-done"]
            still_open.init_transactions()
            still_open.begin_transaction()
            still_open.send(TOPIC, b"b", partition=0).result(15)
            wait_until(lambda: _gone(admin, "exp-done"), 30, "exp-done expires")
            # the open transaction's id stays, however long idle
            assert admin.describe_transactions(["exp-open"])["exp-open"].state == "Ongoing"
            assert "exp-done" not in {t.transactional_id for t in admin.list_transactions()}
            still_open.commit_transaction()
        with Producer(bootstrap_servers=bs, transactional_id="exp-done") as again:
            again.init_transactions()  # afresh: a new producer id at epoch 0
            md = tc.describe("exp-done")
            assert md is not None and md.producer_epoch == 0
            assert md.producer_id != first.producer_id


def test_idle_producer_state_expires_but_not_an_open_transactions(broker_factory) -> None:
    handle = broker_factory(**{
        "transaction.state.log.num.partitions": 2,
        "producer.id.expiration.ms": 3000,
        "producer.id.expiration.check.interval.ms": 200,
    })  # fmt: skip
    bs = handle.bootstrap
    with Admin(bootstrap_servers=bs) as admin:
        admin.create_topic(TOPIC)
        with (
            Producer(bootstrap_servers=bs, linger_ms=0) as idem,
            Producer(bootstrap_servers=bs, transactional_id="exp-p") as txn,
        ):
            idem.send(TOPIC, b"i0", partition=0).result(15)
            idem.send(TOPIC, b"i1", partition=0).result(15)
            txn.init_transactions()
            txn.begin_transaction()
            txn.send(TOPIC, b"t0", partition=0).result(15)

            def producers() -> dict[int, int]:
                got = admin.describe_producers([TP])[TP]
                return {p.producer_id: p.current_txn_start_offset for p in got}

            listed = producers()
            assert len(listed) == 2 and sorted(listed.values()) == [-1, 2]
            (open_pid,) = [pid for pid, start in listed.items() if start == 2]
            wait_until(lambda: list(producers()) == [open_pid], 30, "the idle producer expires")
            # the idle idempotent producer goes on (its next batch: UNKNOWN_PRODUCER_ID, then
            # renumbered under a new producer id)
            md = idem.send(TOPIC, b"i2", partition=0).result(15)
            assert md.offset == 3
            txn.commit_transaction()
            wait_until(lambda: producers() == {}, 30, "every producer expires once idle")
