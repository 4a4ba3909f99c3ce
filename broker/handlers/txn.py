"""Transaction coordinator APIs, answered by broker/txn/: AddPartitionsToTxn (24),
AddOffsetsToTxn (25), EndTxn (26),
DescribeTransactions (65) and ListTransactions (66). InitProducerId with a transactional id is in init_producer_id.py, FindCoordinator
key_type 1 in groups.py. Both answer later, once `__transaction_state` has the record.

ACLs, as Kafka: WRITE on the TRANSACTIONAL_ID for AddPartitionsToTxn and EndTxn;
AddPartitionsToTxn also WRITE on each TOPIC (a partition refused makes the others
OPERATION_NOT_ATTEMPTED, nothing is added). DESCRIBE on the TRANSACTIONAL_ID for
DescribeTransactions (per id) and ListTransactions (ids the principal may not describe are left
out, as Kafka's list).
"""

from __future__ import annotations

from broker.group.offsets_topic import OFFSETS_TOPIC, partition_for
from broker.handlers.base import RequestContext, handler
from broker.security.access import check, quietly_allowed
from broker.txn.coordinator import TxnError
from broker.txn.state import TxnMetadata, TxnState
from client.errors import ErrorCode
from client.protocol import ApiKey
from client.protocol.body import Body
from client.security.acl import AclOperation, ResourceType


def _per_partition(body: Body, codes: dict[tuple[str, int], int], default: int) -> Body:
    return {
        "topics": [
            {"name": t["name"],
             "partitions": [{"partition_index": p, "error_code": codes.get((t["name"], p), default)}
                            for p in t["partitions"]]}
            for t in body["topics"]
        ]
    }  # fmt: skip


@handler(ApiKey.ADD_PARTITIONS_TO_TXN, access="WRITE on TRANSACTIONAL_ID and WRITE on TOPIC")
def add_partitions_to_txn(ctx: RequestContext, body: Body) -> Body | None:
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


@handler(ApiKey.ADD_OFFSETS_TO_TXN, access="WRITE on TRANSACTIONAL_ID and READ on GROUP")
def add_offsets_to_txn(ctx: RequestContext, body: Body) -> Body | None:
    """AddOffsetsToTxn (25): the group's `__consumer_offsets` partition joins the transaction,
    as Kafka's (the partition number from the topic's partition count in the metadata)."""
    tid = body["transactional_id"]
    for op, rtype, name in (
        (AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid),
        (AclOperation.READ, ResourceType.GROUP, body["group_id"]),
    ):
        denied = check(ctx, op, rtype, name)
        if denied is not None:
            return {"error_code": denied[0]}
    if not body["group_id"]:
        return {"error_code": int(ErrorCode.INVALID_GROUP_ID)}
    n = ctx.services.group_coordinator.num_partitions()
    tp = (OFFSETS_TOPIC, partition_for(body["group_id"], n))

    def answer(code: int, _msg: str | None) -> None:
        ctx.respond({"error_code": code})

    ctx.services.txn_coordinator.add_partitions(
        tid, body["producer_id"], body["producer_epoch"], frozenset([tp]), answer
    )
    return None


@handler(ApiKey.END_TXN, access="WRITE on TRANSACTIONAL_ID")
def end_txn(ctx: RequestContext, body: Body) -> Body | None:
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


def describe_state(md: TxnMetadata) -> Body:
    """One DescribeTransactions row of the coordinator's metadata of an id."""
    topics: dict[str, list[int]] = {}
    for topic, p in sorted(md.partitions):
        topics.setdefault(topic, []).append(p)
    return {
        "error_code": 0,
        "transactional_id": md.transactional_id,
        "transaction_state": md.state.kafka_name,
        "transaction_timeout_ms": md.timeout_ms,
        "transaction_start_time_ms": md.start_ms if md.state == TxnState.ONGOING else -1,
        "producer_id": md.producer_id,
        "producer_epoch": md.producer_epoch,
        "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
    }


@handler(ApiKey.DESCRIBE_TRANSACTIONS, access="DESCRIBE on TRANSACTIONAL_ID")
def describe_transactions(ctx: RequestContext, body: Body) -> Body:
    rows = []
    for tid in body["transactional_ids"]:
        denied = check(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid)
        if denied is not None:
            rows.append({"error_code": denied[0], "transactional_id": tid})
            continue
        try:
            md = ctx.services.txn_coordinator.describe(tid)
        except TxnError as exc:
            rows.append({"error_code": exc.code, "transactional_id": tid})
            continue
        if md is None:
            code = int(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
            rows.append({"error_code": code, "transactional_id": tid})
        else:
            rows.append(describe_state(md))
    return {"transaction_states": rows}


_STATES = {s.kafka_name: s for s in TxnState}


@handler(ApiKey.LIST_TRANSACTIONS, access="DESCRIBE on TRANSACTIONAL_ID (filters)")
def list_transactions(ctx: RequestContext, body: Body) -> Body:
    wanted = {_STATES[s] for s in body["state_filters"] if s in _STATES}
    unknown = [s for s in body["state_filters"] if s not in _STATES]
    pids = set(body["producer_id_filters"])
    duration = body["duration_filter_ms"]
    code, found = ctx.services.txn_coordinator.list_transactions()
    now = ctx.services.txn_coordinator.now_ms()
    rows = [
        {
            "transactional_id": md.transactional_id,
            "producer_id": md.producer_id,
            "transaction_state": md.state.kafka_name,
        }
        for md in sorted(found, key=lambda md: md.transactional_id)
        if (not body["state_filters"] or md.state in wanted)
        and (not pids or md.producer_id in pids)
        and (duration < 0 or (md.state == TxnState.ONGOING and now - md.start_ms > duration))
        and quietly_allowed(
            ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, md.transactional_id
        )
    ]
    return {"error_code": code, "unknown_state_filters": unknown, "transaction_states": rows}
