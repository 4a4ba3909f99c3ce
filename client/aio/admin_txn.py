"""Admin's transaction calls (Kafka's Admin.listTransactions / describeTransactions, what
`kafka-transactions.sh list|describe` shows): `list_transactions()` asks every broker
(ListTransactions, 66: each lists the ids it coordinates) and merges; `describe_transactions`
asks each id's coordinator (FindCoordinator key_type 1, then DescribeTransactions, 65),
following it through moves and loads until the admin's timeout.

Loop-owned: every function runs on the admin's event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from client.aio.cluster import ClusterClient
from client.aio.types import TopicPartition
from client.errors import GregorError, GregorTimeoutError, error_for_code
from client.protocol import ApiKey


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
