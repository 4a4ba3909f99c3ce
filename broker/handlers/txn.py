"""Transaction coordinator APIs, answered by broker/txn/: AddPartitionsToTxn (24) and EndTxn
(26). InitProducerId with a transactional id is in init_producer_id.py, FindCoordinator
key_type 1 in groups.py. Both answer later, once `__transaction_state` has the record.

ACLs, as Kafka: WRITE on the TRANSACTIONAL_ID for both; AddPartitionsToTxn also WRITE on each
TOPIC (a partition refused makes the others OPERATION_NOT_ATTEMPTED, nothing is added).
"""

from __future__ import annotations

from broker.handlers.base import RequestContext, handler
from broker.security.access import check
from client.errors import ErrorCode
from client.protocol import ApiKey
from client.security.acl import AclOperation, ResourceType


def _per_partition(body: dict, codes: dict[tuple[str, int], int], default: int) -> dict:
    return {
        "topics": [
            {"name": t["name"],
             "partitions": [{"partition_index": p, "error_code": codes.get((t["name"], p), default)}
                            for p in t["partitions"]]}
            for t in body["topics"]
        ]
    }  # fmt: skip


@handler(ApiKey.ADD_PARTITIONS_TO_TXN, access="WRITE on TRANSACTIONAL_ID and WRITE on TOPIC")
def add_partitions_to_txn(ctx: RequestContext, body: dict) -> dict | None:
    tid = body["transactional_id"]
    denied = check(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid)
    if denied is not None:
        return _per_partition(body, {}, denied[0])
    topics = ctx.services.metadata.topics
    refused: dict[tuple[str, int], int] = {}
    for t in body["topics"]:
        if check(ctx, AclOperation.WRITE, ResourceType.TOPIC, t["name"]) is not None:
            refused.update(dict.fromkeys(((t["name"], p) for p in t["partitions"]),
                                         int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)))  # fmt: skip
            continue
        known = topics.get(t["name"])
        for p in t["partitions"]:
            if known is None or p not in known.partitions:
                refused[(t["name"], p)] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if refused:
        return _per_partition(body, refused, int(ErrorCode.OPERATION_NOT_ATTEMPTED))
    tps = frozenset((t["name"], p) for t in body["topics"] for p in t["partitions"])

    def answer(code: int, _msg: str | None) -> None:
        ctx.respond(_per_partition(body, {}, code))

    ctx.services.txn_coordinator.add_partitions(
        tid, body["producer_id"], body["producer_epoch"], tps, answer
    )
    return None


@handler(ApiKey.END_TXN, access="WRITE on TRANSACTIONAL_ID")
def end_txn(ctx: RequestContext, body: dict) -> dict | None:
    tid = body["transactional_id"]
    denied = check(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid)
    if denied is not None:
        return {"error_code": denied[0], "error_message": denied[1]}

    def answer(code: int, msg: str | None) -> None:
        ctx.respond({"error_code": code, "error_message": msg})

    ctx.services.txn_coordinator.end_txn(
        tid, body["producer_id"], body["producer_epoch"], body["committed"], answer
    )
    return None
