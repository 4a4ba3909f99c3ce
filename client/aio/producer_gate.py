"""ProducerGate: what an idempotent or transactional producer's sender asks before it sends
batches, and tells it when one fails (client/aio/sender.py owns the sending itself).

- The producer id and epoch (`idem`, client/aio/idempotence.py) and the batches' sequence
  numbers. Until the producer has an id nothing is sent (`blocked`); an idempotent producer's
  gate asks InitProducerId itself (one task at a time, retried after retry.backoff.ms), a
  transactional one's TransactionManager asks it in init_transactions.
- In a transaction (`txn`, client/aio/transactions.py, attached by Producer.start): a
  partition's batches wait until AddPartitionsToTxn added it, and once the transaction failed
  nothing more goes (`admit`); a batch that fails fails the transaction, and the epoch is
  bumped after the abort if the batch was numbered under the current one (`batch_failed`).
- Without a transaction, a batch that fails for good leaves a gap in its partition's
  sequence: the producer starts over with a new producer id (`batch_failed`), as it does when
  a leader does not know the producer id (`producer_id_unknown`).

A producer without idempotence has a gate with neither, which lets everything through.
Loop-owned.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from client.aio.accumulator import ProducerBatch
from client.aio.cluster import ClusterClient
from client.aio.idempotence import IdempotenceState
from client.aio.retry_log import RetryLog
from client.aio.transactions import TransactionManager
from client.aio.types import TopicPartition
from client.errors import ClientClosedError, ErrorCode, GregorError, TransactionAbortedError

log = logging.getLogger(__name__)

_NOT_NUMBERED = (-1, -1, -1)

Ready = dict[TopicPartition, list[ProducerBatch]]


class ProducerGate:
    def __init__(
        self,
        idempotent: bool,
        cluster: ClusterClient,
        queued: Callable[[], list[ProducerBatch]],
        retry_log: RetryLog,
        retry_backoff_ms: int,
        wake: Callable[[], None],
    ) -> None:
        """`queued`: the accumulator's batches not yet sent (renumbered after a reset);
        `retry_log`, `wake`: the sender's (InitProducerId failures; a producer id came)."""
        self.idem = IdempotenceState() if idempotent else None
        # a transactional producer's (set by Producer.start): partitions are added to the
        # transaction before their first batch, and a failed batch fails the transaction
        self.txn: TransactionManager | None = None
        self._cluster = cluster
        self._queued = queued
        self._retry_log = retry_log
        self._retry_backoff_ms = retry_backoff_ms
        self._wake = wake
        self._init_task: asyncio.Task[None] | None = None

    # -- before sending ----------------------------------------------------------------------------

    @property
    def blocked(self) -> bool:
        """No producer id yet (or a new one is wanted after a reset): nothing may be sent."""
        idem = self.idem
        return idem is not None and not idem.ready

    def ask_producer_id(self) -> None:
        """While blocked: an idempotent producer asks InitProducerId (unless it is asking
        already); a transactional one waits for init_transactions or the epoch bump."""
        if self.txn is None and (self._init_task is None or self._init_task.done()):
            self._init_task = asyncio.ensure_future(self._init_producer_id())

    async def _init_producer_id(self) -> None:
        assert self.idem is not None
        try:
            await self.idem.init(self._cluster)
            self._retry_log.succeeded("init_producer_id")
        except GregorError as exc:
            self._retry_log.failed("init_producer_id", "InitProducerId (the producer id)", exc)
            await asyncio.sleep(self._retry_backoff_ms / 1000)
        finally:
            self._wake()

    def admit(
        self, ready: Ready
    ) -> tuple[Ready, list[list[ProducerBatch]], list[tuple[ProducerBatch, BaseException]]]:
        """Of the partitions with batches ready: those that may go now, the batches that wait
        (in a transaction, for AddPartitionsToTxn of their partition, which this starts; it
        wakes the sender when done), and the batches to fail (their transaction failed: it
        must be aborted)."""
        txn = self.txn
        if txn is None:
            return ready, [], []
        go: Ready = {}
        held: list[list[ProducerBatch]] = []
        failed: list[tuple[ProducerBatch, BaseException]] = []
        for tp, batches in ready.items():
            error = txn.failed
            if error is not None:  # nothing more goes
                failed += [(b, error) for b in batches]
            elif txn.hold(tp):
                held.append(batches)
            else:
                go[tp] = batches
        return go, held, failed

    @property
    def number(self) -> Callable[[ProducerBatch], tuple[int, int, int]] | None:
        """Gives a batch its (producer id, epoch, base sequence) once; None without
        idempotence. The sender numbers a partition's batches in queue order when it drains
        them, before any of them is encoded."""
        return self.idem.number if self.idem is not None else None

    def numbers(self, b: ProducerBatch) -> tuple[int, int, int]:
        """The numbers to encode `b` with (numbered now if it was not)."""
        if b.producer is not None:
            return b.producer
        return _NOT_NUMBERED if self.idem is None else self.idem.number(b)

    @property
    def transactional(self) -> bool:
        return self.txn is not None

    @staticmethod
    def unnumber_unsent(batches: list[ProducerBatch]) -> None:
        """Batches drained before the producer id was reset: those never sent are numbered
        (and encoded) again under the next one."""
        for b in batches:
            if b.attempts == 0:
                b.producer = b.payload = None

    # -- after a failure ---------------------------------------------------------------------------

    def producer_id_unknown(self, exc: BaseException, batches: list[ProducerBatch]) -> bool:
        """Whether `exc` is a leader's UNKNOWN_PRODUCER_ID for an idempotent producer outside a
        transaction (in one, the transaction fails and is aborted): the leader has no state
        for this producer id and stored nothing, so `batches` are numbered again under a new
        producer id and sent again."""
        if (
            self.idem is None
            or self.txn is not None
            or getattr(exc, "code", None) != ErrorCode.UNKNOWN_PRODUCER_ID
        ):
            return False
        self.idem.reset(str(exc), self._queued())
        for b in batches:
            b.producer = b.payload = None
        return True

    def batch_failed(self, b: ProducerBatch, error: BaseException) -> None:
        """`b` failed for good with `error` (about to be failed to its callers)."""
        idem = self.idem
        if self.txn is not None:
            if not isinstance(error, (ClientClosedError, TransactionAbortedError)):
                self.txn.fail(error)  # the transaction must be aborted (or is fenced)
            numbers = b.producer
            if (
                idem is not None
                and numbers is not None
                and numbers[:2] == (idem.producer_id, idem.epoch)
            ):
                self.txn.sequence_gap = True  # (its sequence may not have reached the leader)
        elif (
            idem is not None
            and not isinstance(error, ClientClosedError)  # (closing: no new producer id)
            and b.producer is not None
            and b.producer[0] == idem.producer_id
        ):  # its partition's sequence now has a gap the leader would refuse
            idem.reset(f"a batch of {b.tp.topic}-{b.tp.partition} failed: {error}", self._queued())

    # -- closing -----------------------------------------------------------------------------------

    def pending(self) -> list[asyncio.Task[None]]:
        """Its InitProducerId task while it runs or backs off (the sender cancels and awaits
        it on stop: asked again after a failed batch, it may outlive the sending loop)."""
        t = self._init_task
        return [t] if t is not None and not t.done() else []
