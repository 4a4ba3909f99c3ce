"""The transactional producer's state machine (Kafka's TransactionManager, KIP-98).

    UNINITIALIZED --init_transactions()--> READY --begin_transaction()--> IN_TRANSACTION
    IN_TRANSACTION --commit_transaction()--> COMMITTING --EndTxn(commit)--> READY
    IN_TRANSACTION / ABORTABLE_ERROR --abort_transaction()--> ABORTING --EndTxn(abort)--> READY
    IN_TRANSACTION --a batch or AddPartitionsToTxn failed--> ABORTABLE_ERROR
    any --PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
          INVALID_TXN_STATE--> FATAL_ERROR (every later call raises that error)

The coordinator is found with FindCoordinator key_type 1 and asked again after NOT_COORDINATOR
or COORDINATOR_NOT_AVAILABLE. InitProducerId with the transactional id gives the producer id
and epoch (the IdempotenceState the sender numbers batches with). Before the first batch of
a partition is sent in a transaction, the sender holds its batches and this object adds the
partition with AddPartitionsToTxn (`want`, then the batches go once `added` has it). Batches
are marked transactional (attribute bit 4). commit_transaction() flushes, then sends EndTxn;
abort_transaction() fails the batches not yet sent (TransactionAbortedError), waits for those
in flight, then sends EndTxn(abort); if a batch already numbered failed, its sequence may be
missing at the leader, so InitProducerId bumps the epoch (sequences from 0; KIP-360). CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS and
other retriable errors are retried with back-off (retry.backoff.ms doubling to 1 s) up to
max.block.ms (GregorTimeoutError; the call may be made again).

Loop-owned, except `check_send`, which the sync facade's fast path calls from any thread (it
only reads `state`).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from client.aio.cluster import ClusterClient
from client.aio.idempotence import IdempotenceState
from client.aio.types import ConsumerGroupMetadata, TopicPartition
from client.errors import (
    BrokerResponseError,
    ClientClosedError,
    ErrorCode,
    GregorError,
    GregorTimeoutError,
    ProducerFencedError,
    TransactionStateError,
    error_for_code,
)
from client.protocol import ApiKey
from client.protocol.body import Body

if TYPE_CHECKING:
    from client.aio.producer_settings import ProducerSettings

log = logging.getLogger(__name__)


class TxnState(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING = "COMMITTING"
    ABORTING = "ABORTING"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


# errors after which the producer can do nothing but close (Kafka's fatal errors)
FATAL = frozenset(
    {
        ErrorCode.PRODUCER_FENCED,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ErrorCode.INVALID_TXN_STATE,
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    }
)
# the coordinator moved: find it again
_MOVED = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})


def _fatal_error(exc: BaseException) -> BaseException:
    """INVALID_PRODUCER_EPOCH is reported as ProducerFencedError, as Kafka's client does."""
    if getattr(exc, "code", None) == ErrorCode.INVALID_PRODUCER_EPOCH:
        fenced = ProducerFencedError(f"producer fenced: {exc}")
        fenced.__cause__ = exc
        return fenced
    return exc


class TransactionManager:
    def __init__(
        self,
        transactional_id: str,
        timeout_ms: int,
        idem: IdempotenceState,
        cluster: ClusterClient,
        settings: ProducerSettings,
        wake: Callable[[], None],
    ) -> None:
        self.transactional_id = transactional_id
        self.timeout_ms = timeout_ms
        self.idem = idem
        self.cluster = cluster
        self.settings = settings
        self._wake = wake  # the sender's: batches held for AddPartitionsToTxn may go
        self.state = TxnState.UNINITIALIZED
        self.error: BaseException | None = None  # of ABORTABLE_ERROR / FATAL_ERROR
        self.coordinator: int | None = None
        self.added: set[TopicPartition] = set()  # in the coordinator's transaction
        self.offsets_added = False  # AddOffsetsToTxn: a group's offsets partition is in it
        self._group_coordinators: dict[str, int] = {}  # for TxnOffsetCommit
        self._wanted: set[TopicPartition] = set()  # batches wait for these to be added
        self._add_task: asyncio.Task[None] | None = None
        self._closed: ClientClosedError | None = None  # set by close()
        # a batch numbered under the current epoch failed: bump the epoch after the abort
        self.sequence_gap = False
        self._prefix = f"[transactional.id={transactional_id}]"

    # -- checks --------------------------------------------------------------------------------

    def check_send(self) -> None:
        """send() is allowed only inside a transaction. Any thread."""
        state = self.state
        if state is TxnState.IN_TRANSACTION:
            return
        if state is TxnState.FATAL_ERROR:
            assert self.error is not None
            raise self.error
        if state is TxnState.ABORTABLE_ERROR:
            raise TransactionStateError(
                f"{self._prefix} the transaction failed ({self.error}); "
                "call abort_transaction() before sending more"
            ) from self.error
        raise TransactionStateError(
            f"{self._prefix} send() outside a transaction (state {state.value}): a "
            "transactional producer sends only between begin_transaction() and "
            "commit_transaction()/abort_transaction()"
        )

    def _require(self, what: str, *states: TxnState) -> None:
        if self.state is TxnState.FATAL_ERROR:
            assert self.error is not None
            raise self.error
        if self.state not in states:
            raise TransactionStateError(
                f"{self._prefix} {what} in state {self.state.value} (allowed in: "
                f"{', '.join(s.value for s in states)})"
            ) from self.error

    def fail(self, exc: BaseException) -> None:
        """A batch, AddPartitionsToTxn or EndTxn failed: the transaction must be aborted
        (ABORTABLE_ERROR), or the producer is done (FATAL_ERROR). While aborting, a failed
        batch changes nothing (the transaction is being aborted anyway)."""
        if self.state is TxnState.FATAL_ERROR:
            return
        if getattr(exc, "code", None) in FATAL:
            self.error = _fatal_error(exc)
            self.state = TxnState.FATAL_ERROR
            log.error("%s fatal error, the producer can only be closed: %s", self._prefix, exc)
        elif self.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING):
            self.error = exc
            self.state = TxnState.ABORTABLE_ERROR
            log.warning("%s transaction failed, it must be aborted: %s", self._prefix, exc)

    @property
    def failed(self) -> BaseException | None:
        """The error batches not yet sent fail with (Kafka's abortUndrainedBatches); after
        close(), the closing error."""
        if self.state in (TxnState.ABORTABLE_ERROR, TxnState.FATAL_ERROR):
            return self.error
        return self._closed

    # -- the calls -----------------------------------------------------------------------------

    async def init(self) -> None:
        """InitProducerId with the transactional id: fences every earlier producer with this
        id (the coordinator aborts its open transaction first: CONCURRENT_TRANSACTIONS, retried)."""
        self._require("init_transactions()", TxnState.UNINITIALIZED)
        await self._init_producer_id()
        self.state = TxnState.READY
        log.info("%s producer id %d epoch %d", self._prefix, self.idem.producer_id, self.idem.epoch)

    def begin(self) -> None:
        self._require("begin_transaction()", TxnState.READY)
        self.state = TxnState.IN_TRANSACTION

    def begin_commit(self) -> None:
        if self.state is TxnState.ABORTABLE_ERROR:
            raise TransactionStateError(
                f"{self._prefix} cannot commit: the transaction failed ({self.error}); "
                "call abort_transaction()"
            ) from self.error
        self._require("commit_transaction()", TxnState.IN_TRANSACTION, TxnState.COMMITTING)
        self.state = TxnState.COMMITTING

    def begin_abort(self) -> None:
        self._require(
            "abort_transaction()",
            TxnState.IN_TRANSACTION,
            TxnState.ABORTABLE_ERROR,
            TxnState.ABORTING,
        )
        self.state = TxnState.ABORTING
        self._wanted.clear()  # (batches not yet sent are failed: nothing more to add)

    async def end(self, commit: bool) -> None:
        """After the flush: EndTxn, if the coordinator has a transaction (a partition was
        added), then READY. A commit whose batches failed during the flush raises instead."""
        if self._add_task is not None:
            await asyncio.wait([self._add_task])
        if self.state is TxnState.FATAL_ERROR:
            assert self.error is not None
            raise self.error
        if commit and self.state is not TxnState.COMMITTING:
            # a batch or AddPartitionsToTxn failed while flushing
            self.begin_commit()  # raises the abortable / fatal error
        if self.added or self.offsets_added:
            body = {
                "transactional_id": self.transactional_id,
                "producer_id": self.idem.producer_id,
                "producer_epoch": self.idem.epoch,
                "committed": commit,
            }
            try:
                await self._call(ApiKey.END_TXN, body, "EndTxn", lambda r: r["error_code"])
            except GregorTimeoutError:
                raise  # may be called again (COMMITTING / ABORTING)
            except GregorError as exc:
                self.fail(exc)
                raise self.error or exc from None
        self.added.clear()
        self.offsets_added = False
        self._wanted.clear()
        if self.sequence_gap:
            await self._bump_epoch()
        self.error = None
        self.state = TxnState.READY

    async def _bump_epoch(self) -> None:
        """After an abort in which a numbered batch failed (its sequence may never have
        reached the leader, which would refuse the next one as out of order): InitProducerId
        again, as Kafka's client does since KIP-360. The coordinator bumps the epoch and the
        sequences start over at 0. A failure leaves the producer ABORTING (call
        abort_transaction() again)."""
        await self._init_producer_id()
        self.sequence_gap = False
        log.info(
            "%s epoch bumped after the abort (producer id %d epoch %d)",
            self._prefix,
            self.idem.producer_id,
            self.idem.epoch,
        )

    async def _init_producer_id(self) -> None:
        """InitProducerId with the transactional id: a new epoch (or id), sequences from 0."""
        body = {
            "transactional_id": self.transactional_id,
            "transaction_timeout_ms": self.timeout_ms,
        }
        resp = await self._call(
            ApiKey.INIT_PRODUCER_ID, body, "InitProducerId", lambda r: r["error_code"]
        )
        self.idem.producer_id, self.idem.epoch = resp["producer_id"], resp["producer_epoch"]
        self.idem.clear_sequences()

    # -- offsets (send_offsets_to_transaction) -------------------------------------------------

    async def send_offsets(
        self, offsets: dict[TopicPartition, int], group: ConsumerGroupMetadata
    ) -> None:
        """AddOffsetsToTxn (the group's offsets partition joins the transaction), then
        TxnOffsetCommit to the group's coordinator (Kafka's TransactionManager
        sendOffsetsToTransaction). Retriable errors are retried up to max.block.ms; a member
        the group refuses, or another error, makes the transaction abortable; fatal errors
        (PRODUCER_FENCED, ...) end the producer."""
        self._require("send_offsets_to_transaction()", TxnState.IN_TRANSACTION)
        if not group.group_id:
            raise GregorError("send_offsets_to_transaction() needs a group id")
        try:
            await self._call(
                ApiKey.ADD_OFFSETS_TO_TXN,
                {
                    "transactional_id": self.transactional_id,
                    "producer_id": self.idem.producer_id,
                    "producer_epoch": self.idem.epoch,
                    "group_id": group.group_id,
                },
                "AddOffsetsToTxn",
                lambda r: r["error_code"],
            )
            self.offsets_added = True
            if not offsets:
                return
            by_topic: dict[str, list[Body]] = {}
            for tp, off in sorted(offsets.items()):
                by_topic.setdefault(tp.topic, []).append(
                    {"partition": tp.partition, "committed_offset": off}
                )
            body = {
                "transactional_id": self.transactional_id,
                "group_id": group.group_id,
                "producer_id": self.idem.producer_id,
                "producer_epoch": self.idem.epoch,
                "generation_id": group.generation_id,
                "member_id": group.member_id,
                "group_instance_id": group.group_instance_id,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
            }
            await self._call(
                ApiKey.TXN_OFFSET_COMMIT,
                body,
                "TxnOffsetCommit",
                _first_error,
                find=lambda: self._find_group_coordinator(group.group_id),
                moved=lambda: self._group_coordinators.pop(group.group_id, None),
            )
            log.debug("%s offsets of group %s sent: %s", self._prefix, group.group_id, offsets)
        except GregorTimeoutError:
            raise  # may be called again
        except GregorError as exc:
            self.fail(exc)
            raise self.error or exc from None

    async def _find_group_coordinator(self, group_id: str) -> int:
        node = self._group_coordinators.get(group_id)
        if node is not None:
            return node
        resp = await self.cluster.send_any(
            ApiKey.FIND_COORDINATOR, {"key_type": 0, "coordinator_keys": [group_id]}
        )
        c = resp["coordinators"][0]
        if c["error_code"]:
            raise error_for_code(c["error_code"])(
                c.get("error_message") or f"FindCoordinator group {group_id}"
            )
        if c["node_id"] not in self.cluster.metadata.brokers:
            self.cluster.request_update()
            await self.cluster.maybe_refresh()
        node = self._group_coordinators[group_id] = int(c["node_id"])
        return node

    # -- partitions ----------------------------------------------------------------------------

    def hold(self, tp: TopicPartition) -> bool:
        """Called by the sender for each partition with batches ready: True when they must
        wait for AddPartitionsToTxn (which this starts, if not yet running)."""
        if tp in self.added:
            return False
        self._wanted.add(tp)
        if self._add_task is None or self._add_task.done():
            self._add_task = asyncio.ensure_future(self._add_partitions())
        return True

    async def _add_partitions(self) -> None:
        try:
            while self._wanted - self.added and self.failed is None:
                tps = sorted(self._wanted - self.added)
                topics: dict[str, list[int]] = {}
                for tp in tps:
                    topics.setdefault(tp.topic, []).append(tp.partition)
                body = {
                    "transactional_id": self.transactional_id,
                    "producer_id": self.idem.producer_id,
                    "producer_epoch": self.idem.epoch,
                    "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                }
                await self._call(
                    ApiKey.ADD_PARTITIONS_TO_TXN,
                    body,
                    "AddPartitionsToTxn",
                    _add_partitions_error,
                    timeout_ms=self.settings.delivery_timeout_ms,
                    # the previous transaction still completing (its markers, then Complete*)
                    # answers CONCURRENT_TRANSACTIONS for a few ms: retry after 20 ms, not
                    # retry.backoff.ms (Kafka's KAFKA-5477 does the same)
                    first_backoff_ms=ADD_PARTITIONS_RETRY_BACKOFF_MS,
                )
                self.added.update(tps)
                log.debug("%s added %s", self._prefix, tps)
        except GregorError as exc:
            self.fail(exc)
        finally:
            self._wake()

    # -- requests to the coordinator -----------------------------------------------------------

    async def _call(
        self,
        api: int,
        body: Body,
        what: str,
        error_of: Callable[[Body], int],
        timeout_ms: int | None = None,
        find: Callable[[], Awaitable[int]] | None = None,
        moved: Callable[[], object] | None = None,
        first_backoff_ms: int | None = None,
    ) -> Body:
        """Send to the coordinator (`find`/`moved`: another one, the group's) until an answer
        without a retriable error, for up to `timeout_ms` (max.block.ms): the answer, or the
        error raised."""
        find = find or self._find_coordinator
        forget = moved or self._forget_coordinator
        settings = self.settings
        limit = settings.max_block_ms if timeout_ms is None else timeout_ms
        deadline = time.monotonic() + limit / 1000
        backoff = settings.retry_backoff_ms / 1000
        if first_backoff_ms is not None:
            backoff = min(backoff, first_backoff_ms / 1000)
        last: BaseException | None = None
        while True:
            exc: GregorError
            try:
                node = await find()
                resp = await self.cluster.send(node, api, body)
                assert resp is not None  # (a request with an answer)
                code = error_of(resp)
                if code == ErrorCode.NONE:
                    return resp
                if code in _MOVED:
                    forget()
                exc = error_for_code(code)(f"{what} {self._prefix}")
            except GregorError as exc2:
                exc = exc2
                if not isinstance(exc2, BrokerResponseError):  # (connection lost, ...)
                    forget()
            if not exc.retriable:
                raise exc
            last = exc
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise GregorTimeoutError(
                    f"{what} {self._prefix} did not succeed within {limit} ms (last error: {last})"
                ) from last
            log.debug("%s %s: %s, retrying", self._prefix, what, exc)
            await asyncio.sleep(min(backoff, remaining))
            backoff = min(backoff * 2, 1.0)

    def _forget_coordinator(self) -> None:
        self.coordinator = None

    async def _find_coordinator(self) -> int:
        if self.coordinator is not None:
            return self.coordinator
        resp = await self.cluster.send_any(
            ApiKey.FIND_COORDINATOR, {"key_type": 1, "coordinator_keys": [self.transactional_id]}
        )
        c = resp["coordinators"][0]
        if c["error_code"]:
            raise error_for_code(c["error_code"])(
                c.get("error_message") or f"FindCoordinator {self._prefix}"
            )
        if c["node_id"] not in self.cluster.metadata.brokers:
            self.cluster.request_update()
            await self.cluster.maybe_refresh()
        self.coordinator = int(c["node_id"])
        log.info("%s transaction coordinator is broker %d", self._prefix, self.coordinator)
        return self.coordinator

    async def close(self) -> None:
        """Producer.close(): the transaction will not be committed, so the batches not yet sent
        fail (ClientClosedError) instead of being added to it; the coordinator aborts it when
        it times out, or when the next producer with this id starts."""
        if self.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING, TxnState.ABORTING):
            log.warning(
                "%s closed with a transaction open (state %s): it is aborted when it times out"
                " or when the next producer with this id calls init_transactions()",
                self._prefix,
                self.state.value,
            )
        self._closed = ClientClosedError("producer closed before its transaction was committed")
        task = self._add_task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait([task])


def _first_error(resp: Body) -> int:
    """The first partition error of a TxnOffsetCommit answer (NONE if none)."""
    return next(
        (p["error_code"] for t in resp["topics"] for p in t["partitions"] if p["error_code"]),
        ErrorCode.NONE,
    )


ADD_PARTITIONS_RETRY_BACKOFF_MS = 20  # Kafka's TransactionManager's constant


def _add_partitions_error(resp: Body) -> int:
    """The error of an AddPartitionsToTxn answer: the first that is not NONE or
    OPERATION_NOT_ATTEMPTED (the others' error when one partition was refused)."""
    codes: list[int] = [p["error_code"] for t in resp["topics"] for p in t["partitions"]]
    for code in codes:
        if code not in (ErrorCode.NONE, ErrorCode.OPERATION_NOT_ATTEMPTED):
            return code
    return ErrorCode.OPERATION_NOT_ATTEMPTED if any(codes) else ErrorCode.NONE
