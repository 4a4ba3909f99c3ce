"""The sender's answer to a failed produce attempt (`Sender._retry_or_fail`), with the real
accumulator: a retriable error within delivery.timeout.ms puts the batch back for a retry; a
retriable error that arrives after the deadline ends the batch with the same timeout error as
a batch that expires in its queue (naming that last error, kept as its `__cause__`), whether the
deadline passed during the back-off or while the attempt was in flight; a non-retriable error,
or `retries` used up, ends it with the broker's error itself (Kafka's Sender.canRetry)."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

from client.aio.accumulator import ProducerBatch, RecordAccumulator
from client.aio.sender import Sender
from client.aio.types import TopicPartition
from client.errors import (
    GregorTimeoutError,
    InvalidRecordError,
    KafkaStorageError,
    NotEnoughReplicasError,
)

TP = TopicPartition("t", 0)


def _sender(retries: int = 2_147_483_647) -> tuple[Sender, RecordAccumulator]:
    acc = RecordAccumulator(
        batch_size=16384,
        linger_ms=0,
        buffer_memory=1 << 20,
        max_request_size=1 << 20,
        delivery_timeout_ms=3000,
        wake=lambda: None,
    )
    config = SimpleNamespace(
        acks=-1,
        compression_type="none",
        max_request_size=1 << 20,
        request_timeout_ms=30000,
        delivery_timeout_ms=3000,
        retries=retries,
        retry_backoff_ms=100,
    )
    cluster = SimpleNamespace(request_update=lambda **kw: None)
    return Sender(config, cluster, acc, idempotent=False), acc  # type: ignore[arg-type]


def _sent_batch(acc: RecordAccumulator, deadline_in: float) -> tuple[ProducerBatch, asyncio.Future]:
    """A batch of one record, taken off its queue as a request does, whose delivery deadline
    is `deadline_in` s from now (negative: already past)."""
    fut = asyncio.get_running_loop().create_future()
    assert acc.try_append(TP, 0, None, b"v", None, 1, fut) == (True, False)
    (b,) = acc.take_all()
    b.deadline = time.monotonic() + deadline_in
    return b, fut


async def test_retriable_error_within_the_deadline_is_retried() -> None:
    sender, acc = _sender()
    b, fut = _sent_batch(acc, 60)
    sender._retry_or_fail(TP, [b], NotEnoughReplicasError("t-0: isr [1]"), 1)
    assert not fut.done() and b.attempts == 1
    assert acc.queued() == [b] and b.retry_at > time.monotonic()


async def test_retriable_error_after_the_deadline_is_the_timeout_naming_it() -> None:
    """The attempt was in flight when delivery.timeout.ms ran out: the caller gets the
    timeout, with the broker's error as its last error, as for a batch expiring queued."""
    sender, acc = _sender()
    b, fut = _sent_batch(acc, -0.001)
    b.attempts = 29
    storage = KafkaStorageError("t-0: log of t-0 is offline")
    sender._retry_or_fail(TP, [b], storage, 1)
    assert fut.done() and not acc.queued()
    err = fut.exception()
    assert isinstance(err, GregorTimeoutError), repr(err)
    assert "1 records expired after delivery.timeout.ms=3000" in str(err)
    assert "30 attempt(s); last error: [KAFKA_STORAGE_ERROR] t-0: log of t-0 is offline" in str(err)
    assert err.__cause__ is storage


async def test_non_retriable_or_out_of_retries_is_the_error_itself() -> None:
    sender, acc = _sender()
    b, fut = _sent_batch(acc, -1)  # past the deadline too: the error is not a retriable one
    bad = InvalidRecordError("t-0: bad record")
    sender._retry_or_fail(TP, [b], bad, 1)
    assert fut.exception() is bad

    sender, acc = _sender(retries=0)
    b, fut = _sent_batch(acc, 60)
    storage = KafkaStorageError("t-0: log of t-0 is offline")
    sender._retry_or_fail(TP, [b], storage, 1)
    assert fut.exception() is storage and not acc.queued()
