"""Transactions through the Kafka listener: AddPartitionsToTxn and EndTxn, each translated to
the native handler (broker/handlers/txn.py); InitProducerId (apis.py) and FindCoordinator
key_type 1 (apis_groups.py) reach the same coordinator.

    API                 versions  notes
    AddPartitionsToTxn  0-3       one transaction per request (v4+ batches them for brokers:
                                  not served)
    EndTxn              0-3

PRODUCER_FENCED reaches clients older than KIP-588 (AddPartitionsToTxn and EndTxn v0-1) as
INVALID_PRODUCER_EPOCH, as Kafka answers them. AddOffsetsToTxn (25) and TxnOffsetCommit (28)
are not served: not advertised in ApiVersions, so a client's send_offsets_to_transaction fails
at once with UNSUPPORTED_VERSION (docs/transactions.md).

Threads: I/O threads; answers from the thread the native handler answers on.
"""

from __future__ import annotations

from kio.schema.add_partitions_to_txn.v0 import request as add_v0
from kio.schema.add_partitions_to_txn.v1 import request as add_v1
from kio.schema.add_partitions_to_txn.v2 import request as add_v2
from kio.schema.add_partitions_to_txn.v3 import request as add_v3
from kio.schema.end_txn.v0 import request as end_v0
from kio.schema.end_txn.v1 import request as end_v1
from kio.schema.end_txn.v2 import request as end_v2
from kio.schema.end_txn.v3 import request as end_v3

from broker.kafka.apis import api
from broker.kafka.request import KafkaContext, whole_error
from client.errors import ErrorCode
from client.protocol import ApiKey

AddPartitionsRequest = (
    add_v0.AddPartitionsToTxnRequest
    | add_v1.AddPartitionsToTxnRequest
    | add_v2.AddPartitionsToTxnRequest
    | add_v3.AddPartitionsToTxnRequest
)
EndTxnRequest = (
    end_v0.EndTxnRequest | end_v1.EndTxnRequest | end_v2.EndTxnRequest | end_v3.EndTxnRequest
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

    def answer(a: dict) -> None:
        code = whole_error(a)
        rows: list[dict] = (
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

    def answer(a: dict) -> None:
        code = int(a.get("error_code", 0))
        ctx.respond({"throttle_time": 0, "error_code": _fenced(code, ctx.api_version)})

    ctx.call_native(ApiKey.END_TXN, native, answer)
