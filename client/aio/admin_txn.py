"""Admin's transaction calls (Kafka's Admin.listTransactions / describeTransactions, what
`kafka-transactions.sh list|describe` shows): `list_transactions()` asks every broker
(ListTransactions, 66: each lists the ids it coordinates) and merges; `describe_transactions`
asks each id's coordinator (FindCoordinator key_type 1, then DescribeTransactions, 65),
following it through moves and loads until the admin's timeout. `describe_producers` asks
each partition's leader (DescribeProducers, 61) for the producers its producer state holds,
following leader moves until the admin's timeout (Kafka's Admin.describeProducers).
`abort_transaction` writes an ABORT marker for one producer to one partition through its
leader (WriteTxnMarkers, 27: CLUSTER_ACTION on the CLUSTER), Kafka's Admin.abortTransaction
for a hanging transaction the coordinator no longer knows.

Loop-owned: every function runs on the admin's event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from client.aio.cluster import ClusterClient
from client.aio.types import TopicPartition
from client.errors import (
    ErrorCode,
    GregorError,
    GregorTimeoutError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from client.protocol import ApiKey
from client.protocol.body import Body


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str  # Kafka's names: Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, ...
    coordinator: int


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    transactional_id: str
    coordinator: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int | None  # when the open transaction began; None outside one
    partitions: list[TopicPartition] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ProducerState:
    """One active producer of a partition (Kafka's ProducerState): -1 where not known."""

    producer_id: int
    producer_epoch: int
    last_sequence: int  # of its latest batch; -1: none since its epoch began
    last_timestamp: int  # max timestamp (ms) of its latest batch or marker
    coordinator_epoch: int  # of its latest marker
    current_txn_start_offset: int  # first offset of its open transaction; -1: none


async def list_transactions(
    cluster: ClusterClient,
    states: Iterable[str] = (),
    producer_ids: Iterable[int] = (),
    duration_ms: int = -1,
) -> list[TransactionListing]:
    """Every transactional id of the cluster matching the filters (a state in `states`, a
    producer id in `producer_ids`, open longer than `duration_ms`; empty / -1: any)."""
    body = {
        "state_filters": list(states),
        "producer_id_filters": list(producer_ids),
        "duration_filter_ms": duration_ms,
    }
    md = await cluster.refresh()
    out: list[TransactionListing] = []
    for node in sorted(md.brokers):
        resp = await cluster.send(node, ApiKey.LIST_TRANSACTIONS, body)
        assert resp is not None  # (a request with an answer)
        if resp["error_code"]:
            raise error_for_code(resp["error_code"])(f"ListTransactions at broker {node}")
        if resp["unknown_state_filters"]:
            raise ValueError(
                f"unknown transaction states {resp['unknown_state_filters']} (known: Empty, "
                "Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, Dead, "
                "PrepareEpochFence)"
            )
        out.extend(
            TransactionListing(
                t["transactional_id"], t["producer_id"], t["transaction_state"], node
            )
            for t in resp["transaction_states"]
        )
    return sorted(out, key=lambda t: t.transactional_id)


async def describe_transactions(
    cluster: ClusterClient, ids: Iterable[str], timeout_ms: int, backoff_ms: int
) -> dict[str, TransactionDescription]:
    """The coordinator's state of each id; TransactionalIdNotFoundError (and any other
    per-id error) raised naming the id."""
    return {tid: await _describe_one(cluster, tid, timeout_ms, backoff_ms) for tid in ids}


async def _describe_one(
    cluster: ClusterClient, tid: str, timeout_ms: int, backoff_ms: int
) -> TransactionDescription:
    deadline = time.monotonic() + timeout_ms / 1000
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            found = await cluster.send_any(
                ApiKey.FIND_COORDINATOR, {"key_type": 1, "coordinator_keys": [tid]}
            )
            c = found["coordinators"][0]
            if c["error_code"]:
                raise error_for_code(c["error_code"])(c["error_message"] or "FindCoordinator")
            node = c["node_id"]
            if node not in cluster.metadata.brokers:
                await cluster.refresh()
            resp = await cluster.send(
                node, ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": [tid]}
            )
            assert resp is not None  # (a request with an answer)
            s = resp["transaction_states"][0]
            if s["error_code"]:
                raise error_for_code(s["error_code"])(f"transactional id {tid!r}")
            start = s["transaction_start_time_ms"]
            return TransactionDescription(
                tid,
                node,
                s["transaction_state"],
                s["producer_id"],
                s["producer_epoch"],
                s["transaction_timeout_ms"],
                None if start < 0 else start,
                sorted(TopicPartition(t["topic"], p) for t in s["topics"] for p in t["partitions"]),
            )
        except GregorError as exc:
            if not exc.retriable:
                raise
            last = exc
            await asyncio.sleep(backoff_ms / 1000)
    raise GregorTimeoutError(
        f"transactional id {tid!r}: no answer from its coordinator" + (f" ({last})" if last else "")
    )


# per-partition codes that mean "ask the (new) leader again"
_RETRY = {
    int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),  # a leader that has not applied the topic yet
    int(ErrorCode.NOT_LEADER_OR_FOLLOWER),
    int(ErrorCode.LEADER_NOT_AVAILABLE),
    int(ErrorCode.KAFKA_STORAGE_ERROR),
}


async def describe_producers(
    cluster: ClusterClient, tps: Iterable[TopicPartition], timeout_ms: int, backoff_ms: int
) -> dict[TopicPartition, list[ProducerState]]:
    """{tp: its active producers (by producer id)} from each partition's leader. A partition
    the metadata does not know raises UnknownTopicOrPartitionError; any other per-partition
    error (TopicAuthorizationFailedError: READ on the TOPIC) raises naming the partition;
    leader moves are retried until `timeout_ms` (GregorTimeoutError)."""
    pending = {TopicPartition(*tp) for tp in tps}
    out: dict[TopicPartition, list[ProducerState]] = {}
    deadline = time.monotonic() + timeout_ms / 1000
    last: BaseException | None = None
    while pending:
        md = await cluster.fetch_topics({tp.topic for tp in pending})
        by_node: dict[int, dict[str, list[int]]] = {}
        for tp in sorted(pending):
            parts = md.partitions_for(tp.topic)
            if parts is None or tp.partition not in parts:
                raise UnknownTopicOrPartitionError(
                    f"DescribeProducers: unknown partition {tp.topic}-{tp.partition}"
                )
            leader = md.leader_for(tp)
            if leader >= 0:
                by_node.setdefault(leader, {}).setdefault(tp.topic, []).append(tp.partition)
        for node, topics in by_node.items():
            body: Body = {
                "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]
            }
            try:
                resp = await cluster.send(node, ApiKey.DESCRIBE_PRODUCERS, body)
            except GregorError as exc:
                if not exc.retriable:
                    raise
                last = exc
                continue
            assert resp is not None  # (a request with an answer)
            for t in resp["topics"]:
                for p in t["partitions"]:
                    tp = TopicPartition(t["name"], p["partition_index"])
                    code = int(p["error_code"])
                    what = p["error_message"] or "DescribeProducers"
                    if code in _RETRY:
                        last = error_for_code(code)(f"{tp.topic}-{tp.partition}: {what}")
                        continue
                    if code:
                        raise error_for_code(code)(f"{tp.topic}-{tp.partition}: {what}")
                    out[tp] = [ProducerState(**s) for s in p["active_producers"]]
                    pending.discard(tp)
        if pending:
            if time.monotonic() > deadline:
                raise GregorTimeoutError(
                    f"DescribeProducers for {sorted(pending)} timed out"
                    + (f" (last error: {last})" if last else "")
                )
            await asyncio.sleep(backoff_ms / 1000)
    return out


async def abort_transaction(
    cluster: ClusterClient,
    tp: TopicPartition,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timeout_ms: int,
    backoff_ms: int,
) -> None:
    """An ABORT marker for `producer_id` at `producer_epoch` written to `tp` by its leader,
    answered once replicated (acks=all). Raises the partition's error
    (ClusterAuthorizationFailedError, InvalidProducerEpochError,
    TransactionCoordinatorFencedError, ...); leader moves are retried until `timeout_ms`."""
    tp = TopicPartition(*tp)
    deadline = time.monotonic() + timeout_ms / 1000
    last: BaseException | None = None
    body: Body = {
        "markers": [
            {
                "producer_id": producer_id,
                "producer_epoch": producer_epoch,
                "transaction_result": False,
                "topics": [{"name": tp.topic, "partition_indexes": [tp.partition]}],
                "coordinator_epoch": coordinator_epoch,
            }
        ]
    }
    while time.monotonic() < deadline:
        md = await cluster.fetch_topics({tp.topic})
        parts = md.partitions_for(tp.topic)
        if parts is None or tp.partition not in parts:
            raise UnknownTopicOrPartitionError(
                f"abort: unknown partition {tp.topic}-{tp.partition}"
            )
        leader = md.leader_for(tp)
        if leader >= 0:
            try:
                wait_ms = max(1, int((deadline - time.monotonic()) * 1000))
                resp = await cluster.send(
                    leader, ApiKey.WRITE_TXN_MARKERS, body, timeout_ms=wait_ms + 5000
                )
            except GregorError as exc:
                if not exc.retriable:
                    raise
                last = exc
            else:
                assert resp is not None  # (a request with an answer)
                code = int(resp["markers"][0]["topics"][0]["partitions"][0]["error_code"])
                if not code:
                    return
                err = error_for_code(code)(
                    f"ABORT marker for producer {producer_id} to {tp.topic}-{tp.partition}"
                )
                if code not in _RETRY:
                    raise err
                last = err
        await asyncio.sleep(backoff_ms / 1000)
    raise GregorTimeoutError(
        f"ABORT marker to {tp.topic}-{tp.partition} not written in time"
        + (f" (last error: {last})" if last else "")
    )
