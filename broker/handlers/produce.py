"""Produce (0): append record batches as partition leader (broker/replica does the work).

Per partition: unknown → UNKNOWN_TOPIC_OR_PARTITION (and, with auto.create.topics.enable, the
topic is created in the background so the producer's retry finds it); not leader →
NOT_LEADER_OR_FOLLOWER; bad batch → CORRUPT_MESSAGE; too large → MESSAGE_TOO_LARGE; a control
batch (only WriteTxnMarkers writes those) → INVALID_RECORD; transactional batches are appended
as idempotent ones and open their producer's transaction (docs/storage.md); the other
partitions of the request are appended all the same. acks=0 gets no response at all; acks=1/all
are answered when the write is acknowledged (after the group-commit fsync by default), possibly
later from a DelayedProduce. Runs on an I/O thread; the late answer on a flusher/timer thread.
"""

from __future__ import annotations

import logging
from typing import Any

from broker.group import OFFSETS_TOPIC
from broker.handlers.base import RequestContext, handler
from broker.replica.delayed import ProducePartitionStatus
from broker.security.access import check, enabled, may_create_topic
from broker.txn.log_format import TRANSACTION_STATE_TOPIC
from client.errors import ErrorCode
from client.protocol import ApiKey
from client.protocol.body import Body
from client.security.acl import AclOperation, ResourceType

log = logging.getLogger(__name__)
# topics only their coordinator writes (Kafka refuses appends to internal topics too)
_INTERNAL = {OFFSETS_TOPIC: "group coordinator", TRANSACTION_STATE_TOPIC: "transaction coordinator"}


def _response(
    order: list[tuple[str, list[int]]], statuses: dict[tuple[str, int], ProducePartitionStatus]
) -> Body:
    topics = []
    for name, parts in order:
        topics.append(
            {"name": name, "partitions": [statuses[(name, p)].as_response(p) for p in parts]}
        )
    return {"topics": topics, "throttle_time_ms": 0}


@handler(
    ApiKey.PRODUCE,
    access="WRITE on TOPIC; with a transactional_id WRITE on TRANSACTIONAL_ID; "
    "auto-creation CREATE on CLUSTER or TOPIC",
)
def handle(ctx: RequestContext, body: Body) -> Body | None:
    from broker.replica.delayed import ProducePartitionStatus

    services = ctx.services
    image = services.metadata
    acks = int(body["acks"])
    order: list[tuple[str, list[int]]] = []
    entries: dict[tuple[str, int], bytes] = {}
    statuses: dict[tuple[str, int], ProducePartitionStatus] = {}
    unknown: list[str] = []
    authz = enabled(ctx)
    txn_id = body.get("transactional_id")
    # a transactional producer's request: WRITE on its transactional id too (Kafka's)
    txn_refused = (
        check(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id)
        if authz and txn_id is not None
        else None
    )
    for t in body["topics"]:
        name = t["name"]
        refused = txn_refused or (
            check(ctx, AclOperation.WRITE, ResourceType.TOPIC, name) if authz else None
        )
        parts = []
        for p in t["partitions"]:
            tp = (name, int(p["partition"]))
            parts.append(tp[1])
            if tp in entries or tp in statuses:
                statuses[tp] = ProducePartitionStatus(
                    int(ErrorCode.INVALID_REQUEST), error_message="partition named twice"
                )
                entries.pop(tp, None)
            elif name in _INTERNAL:
                statuses[tp] = ProducePartitionStatus(
                    int(ErrorCode.INVALID_TOPIC_EXCEPTION),
                    error_message=f"{name} is internal: the {_INTERNAL[name]} writes it",
                )
            elif refused is not None:  # WRITE on the topic (nothing is appended)
                statuses[tp] = ProducePartitionStatus(refused[0], error_message=refused[1])
            elif name not in image.topics:
                statuses[tp] = ProducePartitionStatus(
                    int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), error_message=f"unknown topic {name}"
                )
                if name not in unknown and (not authz or may_create_topic(ctx, name)):
                    unknown.append(name)  # auto-created: CREATE on the cluster or the topic
            else:
                entries[tp] = p["records"]
        order.append((name, parts))
    if unknown:
        fut = services.auto_create_topics(unknown)
        if fut is not None:
            fut.add_done_callback(_log_failure)

    def finish(results: dict[tuple[str, int], ProducePartitionStatus]) -> None:
        if acks != 0:
            # built whole by _response from typed statuses (a test checks it against the
            # schema), so not walked again by the generic check: ~0.8 us per partition, which
            # a request spreading one-record batches over thousands of partitions paid each
            ctx.respond_raw(_response(order, {**statuses, **results}))

    results = services.replica_manager.append_records(
        acks, int(body["timeout_ms"]), entries, finish
    )
    if acks == 0:
        ctx.no_response()
        return None
    if results is not None:
        finish(results)
    return None  # answered above, or a DelayedProduce answers


def _log_failure(fut: Any) -> None:
    exc = fut.exception()
    if exc is not None:
        log.warning("auto topic creation failed: %s", exc)
