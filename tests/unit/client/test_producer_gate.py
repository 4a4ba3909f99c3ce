"""ProducerGate (client/aio/producer_gate.py), the sender's idempotence and transaction gate,
with the real IdempotenceState and TransactionManager over a scripted broker: nothing goes
until InitProducerId answered; batches are numbered once, in order; a numbered batch failing
for good, or a leader's UNKNOWN_PRODUCER_ID, starts over with a new producer id (unsent batches
numbered again) but a close does not; in a transaction a partition waits for
AddPartitionsToTxn, a failed transaction fails every batch, and a failed numbered batch asks
for an epoch bump; a producer without idempotence passes everything."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace
from typing import Any

from client.aio.accumulator import ProducerBatch
from client.aio.producer_gate import ProducerGate
from client.aio.retry_log import RetryLog
from client.aio.transactions import TransactionManager, TxnState
from client.aio.types import TopicPartition
from client.errors import ClientClosedError, ErrorCode, KafkaStorageError, error_for_code
from client.protocol import ApiKey

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


class Broker:
    """Answers InitProducerId with producer ids 42, 43, ... (epoch 0), the first
    `init_failures` times with COORDINATOR_NOT_AVAILABLE; AddPartitionsToTxn with NONE."""

    def __init__(self, init_failures: int = 0) -> None:
        self.metadata = SimpleNamespace(brokers={1: None})
        self.next_pid = 42
        self.init_failures = init_failures
        self.sent: list[int] = []

    async def send_any(self, api: int, body: dict[str, Any]) -> dict[str, Any]:
        if api == ApiKey.FIND_COORDINATOR:
            return {"coordinators": [{"error_code": 0, "node_id": 1}]}
        assert api == ApiKey.INIT_PRODUCER_ID
        self.sent.append(api)
        if self.init_failures:
            self.init_failures -= 1
            return {"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
        self.next_pid += 1
        return {"error_code": 0, "producer_id": self.next_pid - 1, "producer_epoch": 0}

    async def send(self, node: int, api: int, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
        self.sent.append(api)
        assert api == ApiKey.ADD_PARTITIONS_TO_TXN
        return {"topics": [{"name": t["name"], "partitions": [
            {"partition_index": p, "error_code": 0} for p in t["partitions"]]}
            for t in body["topics"]]}  # fmt: skip


def _batch(tp: TopicPartition, records: int = 2) -> ProducerBatch:
    b = ProducerBatch(tp, 0.0, 60.0)
    b.entries = [(None, b"v", None, 0)] * records
    return b


def _gate(
    idempotent: bool, broker: Broker, queued: list[ProducerBatch]
) -> tuple[ProducerGate, list[int]]:
    woken: list[int] = []
    gate = ProducerGate(idempotent, broker, lambda: queued, RetryLog(logging.getLogger("test")),
                        1, lambda: woken.append(1))  # fmt: skip
    return gate, woken


async def _producer_id(gate: ProducerGate) -> None:
    while gate.blocked:
        gate.ask_producer_id()
        await asyncio.gather(*gate.pending())


def test_nothing_goes_before_the_producer_id_and_batches_are_numbered_once_in_order() -> None:
    async def run() -> None:
        broker = Broker(init_failures=1)
        gate, woken = _gate(True, broker, [])
        assert gate.blocked and gate.number is not None
        await _producer_id(gate)  # the first InitProducerId fails and is asked again
        assert not gate.blocked and woken and broker.sent == [ApiKey.INIT_PRODUCER_ID] * 2
        a, b, c = _batch(TP0, 3), _batch(TP0, 2), _batch(TP1)
        assert [gate.numbers(x) for x in (a, b, c)] == [(42, 0, 0), (42, 0, 3), (42, 0, 0)]
        assert gate.numbers(a) == (42, 0, 0)  # kept for its retries
        assert gate.admit({TP0: [a, b]}) == ({TP0: [a, b]}, [], [])
        assert not gate.transactional

    asyncio.run(run())


def test_a_failed_numbered_batch_starts_over_with_a_new_producer_id() -> None:
    async def run() -> None:
        broker = Broker()
        queued: list[ProducerBatch] = []
        gate, _ = _gate(True, broker, queued)
        await _producer_id(gate)
        sent, unsent = _batch(TP0), _batch(TP0)
        gate.numbers(sent)
        gate.numbers(unsent)
        queued.append(unsent)
        gate.batch_failed(sent, ClientClosedError("closing"))  # a close: no new producer id
        assert not gate.blocked
        gate.batch_failed(sent, KafkaStorageError("t-0"))
        assert gate.blocked and unsent.producer is None  # numbered again under the next id
        await _producer_id(gate)
        assert gate.numbers(unsent) == (43, 0, 0)

    asyncio.run(run())


def test_unknown_producer_id_renumbers_the_batches_under_a_new_one() -> None:
    async def run() -> None:
        gate, _ = _gate(True, Broker(), [])
        await _producer_id(gate)
        b = _batch(TP0)
        gate.numbers(b)
        b.payload = b"encoded"
        assert not gate.producer_id_unknown(KafkaStorageError("t-0"), [b])
        assert b.producer == (42, 0, 0)
        unknown = error_for_code(ErrorCode.UNKNOWN_PRODUCER_ID)("t-0")
        assert gate.producer_id_unknown(unknown, [b])
        assert gate.blocked and b.producer is None and b.payload is None

    asyncio.run(run())


def test_in_a_transaction_partitions_wait_to_be_added_and_a_failure_fails_every_batch() -> None:
    async def run() -> None:
        broker = Broker()
        gate, woken = _gate(True, broker, [])
        assert gate.idem is not None
        config = SimpleNamespace(max_block_ms=2000, retry_backoff_ms=1, delivery_timeout_ms=2000)
        txn = gate.txn = TransactionManager("tid", 30_000, gate.idem, broker, config,
                                            lambda: woken.append(1))  # fmt: skip
        gate.ask_producer_id()
        assert gate.pending() == []  # a transactional producer's id comes from init_transactions
        txn.idem.producer_id, txn.idem.epoch = 42, 0
        txn.state = TxnState.READY
        txn.begin()
        a, b = _batch(TP0), _batch(TP1)
        go, held, failed = gate.admit({TP0: [a], TP1: [b]})
        assert (go, held, failed) == ({}, [[a], [b]], [])  # AddPartitionsToTxn first
        assert txn._add_task is not None
        await asyncio.wait([txn._add_task])
        assert txn.added == {TP0, TP1} and ApiKey.ADD_PARTITIONS_TO_TXN in broker.sent
        assert gate.admit({TP0: [a], TP1: [b]}) == ({TP0: [a], TP1: [b]}, [], [])
        assert gate.transactional and gate.numbers(a) == (42, 0, 0)
        error = KafkaStorageError("t-0")
        gate.batch_failed(a, error)  # numbered under the current epoch: bump it after the abort
        assert txn.sequence_gap and txn.failed is error
        go, held, failed = gate.admit({TP1: [b]})
        assert (go, held, failed) == ({}, [], [(b, error)])

    asyncio.run(run())


def test_without_idempotence_everything_passes() -> None:
    gate, _ = _gate(False, Broker(), [])
    b = _batch(TP0)
    assert not gate.blocked and gate.number is None and gate.numbers(b) == (-1, -1, -1)
    assert gate.admit({TP0: [b]}) == ({TP0: [b]}, [], [])
    gate.batch_failed(b, KafkaStorageError("t-0"))
    assert not gate.producer_id_unknown(error_for_code(ErrorCode.UNKNOWN_PRODUCER_ID)("x"), [b])
    assert gate.pending() == []
