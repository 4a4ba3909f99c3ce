"""The transactional producer's state machine (client/aio/transactions.py) against a fake
coordinator: retries of CONCURRENT_TRANSACTIONS and a moved coordinator, fatal and abortable
errors, AddPartitionsToTxn before a partition's batches, EndTxn only for a started
transaction, and the config rules (a transactional.id implies idempotence)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from client.aio.config import resolve_config
from client.aio.idempotence import IdempotenceState, idempotence_enabled
from client.aio.producer_settings import ProducerSettings
from client.aio.transactions import TransactionManager, TxnState
from client.aio.types import TopicPartition
from client.errors import (
    ConfigError,
    ErrorCode,
    GregorTimeoutError,
    ProducerFencedError,
    TopicAuthorizationFailedError,
    TransactionStateError,
)
from client.protocol import ApiKey

E = ErrorCode


class FakeCoordinator:
    """A cluster whose brokers 1 and 2 answer from scripted error codes (NONE when the script
    is empty); FindCoordinator names `coordinator`."""

    def __init__(self) -> None:
        self.metadata = SimpleNamespace(brokers={1: None, 2: None})
        self.coordinator = 1
        self.errors: dict[int, list[int]] = {}  # api key -> codes to answer, in order
        self.sent: list[tuple[int, int, dict]] = []  # (node, api, body)

    async def send_any(self, api: int, body: dict) -> dict:
        assert api == ApiKey.FIND_COORDINATOR and body["key_type"] == 1
        return {"coordinators": [{"error_code": 0, "node_id": self.coordinator}]}

    async def send(self, node: int, api: int, body: dict) -> dict:
        self.sent.append((node, api, body))
        script = self.errors.get(api) or []
        code = script.pop(0) if script else 0
        if code == 0 and node != self.coordinator:
            code = E.NOT_COORDINATOR
        if api == ApiKey.INIT_PRODUCER_ID:
            return {"error_code": code, "producer_id": 7, "producer_epoch": 3}
        if api == ApiKey.ADD_PARTITIONS_TO_TXN:
            return {"topics": [{"name": t["name"], "partitions": [
                {"partition_index": p, "error_code": code} for p in t["partitions"]]}
                for t in body["topics"]]}  # fmt: skip
        return {"error_code": code}

    def apis(self) -> list[int]:
        return [api for _, api, _ in self.sent]


async def _adding(txn: TransactionManager) -> None:
    """Wait for the AddPartitionsToTxn task that hold() started."""
    assert txn._add_task is not None
    await asyncio.wait([txn._add_task])


def _config(**kw: object) -> ProducerSettings:
    base = {"max_block_ms": 2000, "retry_backoff_ms": 1, "delivery_timeout_ms": 2000}
    return ProducerSettings.from_config(resolve_config("producer", None, {**base, **kw}))


def _manager(cluster: FakeCoordinator, **kw: object) -> tuple[TransactionManager, list[int]]:
    woken: list[int] = []
    txn = TransactionManager(
        "tid", 30_000, IdempotenceState(), cluster, _config(**kw), lambda: woken.append(1)
    )
    return txn, woken


def test_init_retries_and_follows_the_coordinator() -> None:
    async def run() -> None:
        cluster = FakeCoordinator()
        txn, _ = _manager(cluster)
        with pytest.raises(TransactionStateError, match="begin_transaction"):
            txn.begin()
        cluster.errors[ApiKey.INIT_PRODUCER_ID] = [E.CONCURRENT_TRANSACTIONS, E.NOT_COORDINATOR]
        await txn.init()
        assert (txn.state, txn.idem.producer_id, txn.idem.epoch) == (TxnState.READY, 7, 3)
        assert cluster.apis() == [ApiKey.INIT_PRODUCER_ID] * 3
        assert cluster.sent[0][1:] == (
            ApiKey.INIT_PRODUCER_ID,
            {"transactional_id": "tid", "transaction_timeout_ms": 30_000},
        )
        with pytest.raises(TransactionStateError, match="init_transactions"):
            await txn.init()  # once only

    asyncio.run(run())


def test_init_gives_up_after_max_block_ms() -> None:
    async def run() -> None:
        cluster = FakeCoordinator()
        txn, _ = _manager(cluster, max_block_ms=30)
        cluster.errors[ApiKey.INIT_PRODUCER_ID] = [E.COORDINATOR_LOAD_IN_PROGRESS] * 10_000
        with pytest.raises(GregorTimeoutError, match="InitProducerId.*COORDINATOR_LOAD"):
            await txn.init()
        assert txn.state is TxnState.UNINITIALIZED

    asyncio.run(run())


def test_send_commit_and_empty_transactions() -> None:
    async def run() -> None:
        cluster = FakeCoordinator()
        txn, woken = _manager(cluster)
        await txn.init()
        with pytest.raises(TransactionStateError, match="outside a transaction"):
            txn.check_send()
        txn.begin()
        txn.check_send()
        tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
        cluster.errors[ApiKey.ADD_PARTITIONS_TO_TXN] = [E.CONCURRENT_TRANSACTIONS]
        assert txn.hold(tp0) and txn.hold(tp1)  # batches wait; one request adds both
        await _adding(txn)
        assert txn.added == {tp0, tp1} and woken
        assert not txn.hold(tp0)
        adds = [b for _, api, b in cluster.sent if api == ApiKey.ADD_PARTITIONS_TO_TXN]
        assert len(adds) == 2 and adds[-1]["topics"] == [{"name": "t", "partitions": [0, 1]}]
        txn.begin_commit()
        await txn.end(commit=True)
        assert txn.state is TxnState.READY and not txn.added
        assert cluster.sent[-1][1:] == (ApiKey.END_TXN, {"transactional_id": "tid",
            "producer_id": 7, "producer_epoch": 3, "committed": True})  # fmt: skip
        n = len(cluster.sent)
        txn.begin()
        txn.begin_commit()
        await txn.end(commit=True)  # nothing was added: no EndTxn
        assert len(cluster.sent) == n and txn.state is TxnState.READY

    asyncio.run(run())


def test_abortable_error_needs_an_abort() -> None:
    async def run() -> None:
        cluster = FakeCoordinator()
        txn, _ = _manager(cluster)
        await txn.init()
        txn.begin()
        cluster.errors[ApiKey.ADD_PARTITIONS_TO_TXN] = [E.TOPIC_AUTHORIZATION_FAILED]
        txn.hold(TopicPartition("secret", 0))
        await _adding(txn)
        assert txn.state is TxnState.ABORTABLE_ERROR
        assert isinstance(txn.failed, TopicAuthorizationFailedError)
        with pytest.raises(TransactionStateError, match="abort_transaction") as info:
            txn.check_send()
        assert isinstance(info.value.__cause__, TopicAuthorizationFailedError)
        with pytest.raises(TransactionStateError, match="cannot commit"):
            txn.begin_commit()
        txn.begin_abort()
        await txn.end(commit=False)  # nothing was added: no EndTxn
        assert txn.state is TxnState.READY and txn.error is None
        assert cluster.apis()[-1] == ApiKey.ADD_PARTITIONS_TO_TXN
        txn.begin()  # the producer goes on

    asyncio.run(run())


def test_a_failed_batch_fails_the_commit() -> None:
    async def run() -> None:
        cluster = FakeCoordinator()
        txn, _ = _manager(cluster)
        await txn.init()
        txn.begin()
        txn.begin_commit()
        txn.fail(TopicAuthorizationFailedError("produce"))  # (during the flush)
        with pytest.raises(TransactionStateError, match="cannot commit"):
            await txn.end(commit=True)
        assert txn.state is TxnState.ABORTABLE_ERROR
        assert ApiKey.END_TXN not in cluster.apis()

    asyncio.run(run())


def test_an_abort_after_a_failed_numbered_batch_bumps_the_epoch() -> None:
    async def run() -> None:
        cluster = FakeCoordinator()
        txn, _ = _manager(cluster)
        await txn.init()
        txn.begin()
        txn.hold(TopicPartition("t", 0))
        await _adding(txn)
        txn.fail(TopicAuthorizationFailedError("produce"))
        txn.sequence_gap = True  # (the sender: the failed batch was numbered)
        txn.begin_abort()
        cluster.errors[ApiKey.INIT_PRODUCER_ID] = [E.CONCURRENT_TRANSACTIONS]  # (abort ending)
        await txn.end(commit=False)
        assert cluster.apis()[-3:] == [ApiKey.END_TXN] + [ApiKey.INIT_PRODUCER_ID] * 2
        assert cluster.sent[-3][2]["committed"] is False
        assert txn.state is TxnState.READY and not txn.sequence_gap
        n = len(cluster.sent)
        txn.begin()
        txn.begin_abort()
        await txn.end(commit=False)  # no gap, nothing added: no request at all
        assert len(cluster.sent) == n

    asyncio.run(run())


@pytest.mark.parametrize("code", [E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH])
def test_fencing_is_fatal(code: int) -> None:
    async def run() -> None:
        cluster = FakeCoordinator()
        txn, _ = _manager(cluster)
        await txn.init()
        txn.begin()
        txn.hold(TopicPartition("t", 0))
        await _adding(txn)
        txn.begin_commit()
        cluster.errors[ApiKey.END_TXN] = [code]
        with pytest.raises(ProducerFencedError):
            await txn.end(commit=True)
        assert txn.state is TxnState.FATAL_ERROR
        for call in (txn.check_send, txn.begin, txn.begin_abort, txn.begin_commit):
            with pytest.raises(ProducerFencedError):
                call()
        txn.fail(TopicAuthorizationFailedError("later"))  # stays fatal
        assert isinstance(txn.failed, ProducerFencedError)

    asyncio.run(run())


def test_transactional_id_implies_idempotence() -> None:
    cfg = resolve_config("producer", {"transactional.id": "t"}, {})
    assert idempotence_enabled(cfg, cfg.idempotence_explicit)
    assert cfg.transaction_timeout_ms == 60_000
    with pytest.raises(ConfigError, match="needs enable.idempotence=true"):
        cfg = resolve_config("producer", {"transactional.id": "t", "enable.idempotence": False}, {})
        idempotence_enabled(cfg, cfg.idempotence_explicit)
    cfg = resolve_config("producer", {"transactional.id": "t", "acks": 1}, {})
    with pytest.raises(ConfigError, match="transactional.id conflicts with acks=1"):
        idempotence_enabled(cfg, cfg.idempotence_explicit)


def test_add_partitions_retries_concurrent_transactions_after_20_ms(monkeypatch) -> None:
    """The previous transaction still completing answers CONCURRENT_TRANSACTIONS for a few ms:
    AddPartitionsToTxn retries after 20 ms (Kafka's KAFKA-5477), not retry.backoff.ms, which
    cost every transaction ~100 ms (txn_bench.py); InitProducerId keeps retry.backoff.ms."""
    import client.aio.transactions as transactions

    delays: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(delay: float) -> None:
        delays.append(delay)
        await real_sleep(0)

    monkeypatch.setattr(transactions.asyncio, "sleep", sleep)

    async def run() -> None:
        cluster = FakeCoordinator()
        txn, _ = _manager(cluster, retry_backoff_ms=100)
        cluster.errors[ApiKey.INIT_PRODUCER_ID] = [E.CONCURRENT_TRANSACTIONS]
        await txn.init()
        assert delays == [0.1]
        txn.begin()
        cluster.errors[ApiKey.ADD_PARTITIONS_TO_TXN] = [E.CONCURRENT_TRANSACTIONS] * 2
        assert txn.hold(TopicPartition("t", 0))
        await _adding(txn)
        assert delays[1:] == [0.02, 0.04]  # then doubling, as every retry here

    asyncio.run(run())
