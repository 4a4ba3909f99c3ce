"""Transactions through the Kafka listener: AddPartitionsToTxn and EndTxn, each translated to
the native handler (broker/handlers/txn.py); InitProducerId (apis.py) and FindCoordinator
key_type 1 (apis_groups.py) reach the same coordinator.

    API                 versions  notes
    AddPartitionsToTxn  0-3       one transaction per request (v4+ batches them for brokers:
                                  not served)
    AddOffsetsToTxn     0-3       v4 (KIP-890's verification) not served
    EndTxn              0-3
    TxnOffsetCommit     0-3       to the group coordinator; v3 carries the member (KIP-447): a
                              classic group's member is checked against its generation here
    DescribeTransactions 0
    ListTransactions    0-1       v2's transactional_id_pattern (KIP-1152) is not served
    DescribeProducers   0         answered by each partition's leader (READ on the TOPIC)

PRODUCER_FENCED reaches clients older than KIP-588 (AddPartitionsToTxn and EndTxn v0-1) as
INVALID_PRODUCER_EPOCH, as Kafka answers them (AddOffsetsToTxn and TxnOffsetCommit v0-1 too).

Threads: I/O threads; answers from the thread the native handler answers on.
"""

from __future__ import annotations

import datetime

from kio.schema.add_offsets_to_txn.v0 import request as offsets_v0
from kio.schema.add_offsets_to_txn.v1 import request as offsets_v1
from kio.schema.add_offsets_to_txn.v2 import request as offsets_v2
from kio.schema.add_offsets_to_txn.v3 import request as offsets_v3
from kio.schema.add_partitions_to_txn.v0 import request as add_v0
from kio.schema.add_partitions_to_txn.v1 import request as add_v1
from kio.schema.add_partitions_to_txn.v2 import request as add_v2
from kio.schema.add_partitions_to_txn.v3 import request as add_v3
from kio.schema.describe_producers.v0 import request as producers_v0
from kio.schema.describe_transactions.v0 import request as describe_v0
from kio.schema.end_txn.v0 import request as end_v0
from kio.schema.end_txn.v1 import request as end_v1
from kio.schema.end_txn.v2 import request as end_v2
from kio.schema.end_txn.v3 import request as end_v3
from kio.schema.list_transactions.v0 import request as list_v0
from kio.schema.list_transactions.v1 import request as list_v1
from kio.schema.txn_offset_commit.v0 import request as commit_v0
from kio.schema.txn_offset_commit.v1 import request as commit_v1
from kio.schema.txn_offset_commit.v2 import request as commit_v2
from kio.schema.txn_offset_commit.v3 import request as commit_v3

from broker.kafka.apis import api
from broker.kafka.request import KafkaContext, whole_error
from client.errors import ErrorCode
from client.protocol import ApiKey
from client.protocol.body import Body

AddPartitionsRequest = (
    add_v0.AddPartitionsToTxnRequest
    | add_v1.AddPartitionsToTxnRequest
    | add_v2.AddPartitionsToTxnRequest
    | add_v3.AddPartitionsToTxnRequest
)
EndTxnRequest = (
    end_v0.EndTxnRequest | end_v1.EndTxnRequest | end_v2.EndTxnRequest | end_v3.EndTxnRequest
)
AddOffsetsRequest = (
    offsets_v0.AddOffsetsToTxnRequest
    | offsets_v1.AddOffsetsToTxnRequest
    | offsets_v2.AddOffsetsToTxnRequest
    | offsets_v3.AddOffsetsToTxnRequest
)
TxnOffsetCommitRequest = (
    commit_v0.TxnOffsetCommitRequest
    | commit_v1.TxnOffsetCommitRequest
    | commit_v2.TxnOffsetCommitRequest
    | commit_v3.TxnOffsetCommitRequest
)
KIP_588_VERSION = 2  # from this version on a client understands PRODUCER_FENCED


def _fenced(code: int, version: int) -> int:
    if code == ErrorCode.PRODUCER_FENCED and version < KIP_588_VERSION:
        return int(ErrorCode.INVALID_PRODUCER_EPOCH)
    return code


@api(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 3)
def add_partitions_to_txn(ctx: KafkaContext, body: AddPartitionsRequest) -> None:
    topics = [
        {"name": t.name, "partitions": [int(p) for p in t.partitions]}
        for t in body.v3_and_below_topics
    ]
    native = {
        "transactional_id": body.v3_and_below_transactional_id,
        "producer_id": int(body.v3_and_below_producer_id),
        "producer_epoch": int(body.v3_and_below_producer_epoch),
        "topics": topics,
    }

    def answer(a: Body) -> None:
        code = whole_error(a)
        rows: list[Body] = (
            [{"name": t["name"], "partitions": [{"partition_index": p, "error_code": code}
                                                for p in t["partitions"]]} for t in topics]
            if code else a["topics"]
        )  # fmt: skip
        ctx.respond(
            {
                "throttle_time": 0,
                "results_by_topic_v3_and_below": [
                    {
                        "name": t["name"],
                        "results_by_partition": [
                            {
                                "partition_index": p["partition_index"],
                                "partition_error_code": _fenced(p["error_code"], ctx.api_version),
                            }
                            for p in t["partitions"]
                        ],
                    }
                    for t in rows
                ],
            }
        )

    ctx.call_native(ApiKey.ADD_PARTITIONS_TO_TXN, native, answer)


@api(ApiKey.END_TXN, 0, 3)
def end_txn(ctx: KafkaContext, body: EndTxnRequest) -> None:
    native = {
        "transactional_id": body.transactional_id,
        "producer_id": int(body.producer_id),
        "producer_epoch": int(body.producer_epoch),
        "committed": bool(body.committed),
    }

    def answer(a: Body) -> None:
        code = int(a.get("error_code", 0))
        ctx.respond({"throttle_time": 0, "error_code": _fenced(code, ctx.api_version)})

    ctx.call_native(ApiKey.END_TXN, native, answer)


@api(ApiKey.ADD_OFFSETS_TO_TXN, 0, 3)
def add_offsets_to_txn(ctx: KafkaContext, body: AddOffsetsRequest) -> None:
    native = {
        "transactional_id": body.transactional_id,
        "producer_id": int(body.producer_id),
        "producer_epoch": int(body.producer_epoch),
        "group_id": body.group_id,
    }

    def answer(a: Body) -> None:
        code = int(a.get("error_code", 0))
        ctx.respond({"throttle_time": 0, "error_code": _fenced(code, ctx.api_version)})

    ctx.call_native(ApiKey.ADD_OFFSETS_TO_TXN, native, answer)


@api(ApiKey.TXN_OFFSET_COMMIT, 0, 3)
def txn_offset_commit(ctx: KafkaContext, body: TxnOffsetCommitRequest) -> None:
    topics: list[Body] = [
        {
            "name": t.name,
            "partitions": [
                {
                    "partition": int(p.partition_index),
                    "committed_offset": int(p.committed_offset),
                    "committed_leader_epoch": int(getattr(p, "committed_leader_epoch", -1)),
                    "committed_metadata": p.committed_metadata,
                }
                for p in t.partitions
            ],
        }
        for t in body.topics
    ]
    native = {
        "transactional_id": body.transactional_id,
        "group_id": body.group_id,
        "producer_id": int(body.producer_id),
        "producer_epoch": int(body.producer_epoch),
        "generation_id": int(getattr(body, "generation_id", -1)),
        "member_id": getattr(body, "member_id", ""),
        "group_instance_id": getattr(body, "group_instance_id", None),
        "topics": topics,
    }

    def answer(a: Body) -> None:
        code = whole_error(a)
        rows: list[Body] = a.get("topics", []) if not code else [
            {"name": t["name"], "partitions": [{"partition": p["partition"], "error_code": code}
                                               for p in t["partitions"]]}
            for t in topics
        ]  # fmt: skip
        ctx.respond(
            {
                "throttle_time": 0,
                "topics": [
                    {
                        "name": t["name"],
                        "partitions": [
                            {
                                "partition_index": p["partition"],
                                "error_code": _fenced(p["error_code"], ctx.api_version),
                            }
                            for p in t["partitions"]
                        ],
                    }
                    for t in rows
                ],
            }
        )

    # a classic group's member (KIP-447's group metadata, v3) is checked against its
    # generation here, then stored as a commit from outside a group, as OffsetCommit does
    # (Gregor's own groups, broker/group/, know no classic members or generations)
    classic = ctx.state.classic_groups(ctx.services)
    if classic.is_classic(body.group_id):
        member, generation = (
            str(getattr(body, "member_id", "")),
            int(getattr(body, "generation_id", -1)),
        )
        refused = classic.check_commit(body.group_id, member, generation, txn=True)
        if refused:
            answer({"error_code": refused})
            return
        native.update(member_id="", generation_id=-1, group_instance_id=None)
    ctx.call_native(ApiKey.TXN_OFFSET_COMMIT, native, answer)


_NO_START = datetime.datetime.fromtimestamp(-0.001, datetime.UTC)  # written as -1, as Kafka


def _start_time(row: Body) -> datetime.datetime | int:
    """The field is not nullable in kio: -1 (no transaction open) goes as the datetime that
    encodes to -1 ms."""
    ms = int(row.get("transaction_start_time_ms", -1))
    return _NO_START if ms < 0 else ms


@api(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0)
def describe_transactions(ctx: KafkaContext, body: describe_v0.DescribeTransactionsRequest) -> None:
    ids = list(body.transactional_ids)

    def answer(a: Body) -> None:
        code = whole_error(a)
        rows = (
            [{"error_code": code, "transactional_id": tid} for tid in ids]
            if code
            else a["transaction_states"]
        )
        ctx.respond(
            {
                "throttle_time": 0,
                "transaction_states": [
                    {
                        "error_code": r["error_code"],
                        "transactional_id": r["transactional_id"],
                        "transaction_state": r.get("transaction_state", ""),
                        "transaction_timeout": r.get("transaction_timeout_ms", 0),
                        "transaction_start_time": _start_time(r),
                        "producer_id": r.get("producer_id", -1),
                        "producer_epoch": r.get("producer_epoch", -1),
                        "topics": r.get("topics", []),
                    }
                    for r in rows
                ],
            }
        )

    ctx.call_native(ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": ids}, answer)


@api(ApiKey.LIST_TRANSACTIONS, 0, 1)
def list_transactions(
    ctx: KafkaContext, body: list_v0.ListTransactionsRequest | list_v1.ListTransactionsRequest
) -> None:
    native = {
        "state_filters": list(body.state_filters),
        "producer_id_filters": [int(p) for p in body.producer_id_filters],
        "duration_filter_ms": int(getattr(body, "duration_filter", -1)),
    }

    def answer(a: Body) -> None:
        ctx.respond(
            {
                "throttle_time": 0,
                "error_code": int(a.get("error_code", 0)),
                "unknown_state_filters": a.get("unknown_state_filters", []),
                "transaction_states": a.get("transaction_states", []),
            }
        )

    ctx.call_native(ApiKey.LIST_TRANSACTIONS, native, answer)


@api(ApiKey.DESCRIBE_PRODUCERS, 0, 0)
def describe_producers(ctx: KafkaContext, body: producers_v0.DescribeProducersRequest) -> None:
    topics = [
        {"name": str(t.name), "partition_indexes": [int(p) for p in t.partition_indexes]}
        for t in body.topics
    ]

    def answer(a: Body) -> None:
        code = whole_error(a)
        rows: list[Body] = (
            [{"name": t["name"], "partitions": [{"partition_index": p, "error_code": code}
                                                for p in t["partition_indexes"]]} for t in topics]
            if code else a["topics"]
        )  # fmt: skip
        ctx.respond(
            {
                "throttle_time": 0,
                "topics": [
                    {
                        "name": t["name"],
                        "partitions": [
                            {
                                "partition_index": p["partition_index"],
                                "error_code": p["error_code"],
                                "error_message": p.get("error_message"),
                                "active_producers": p.get("active_producers", []),
                            }
                            for p in t["partitions"]
                        ],
                    }
                    for t in rows
                ],
            }
        )

    ctx.call_native(ApiKey.DESCRIBE_PRODUCERS, {"topics": topics}, answer)
