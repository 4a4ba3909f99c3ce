"""OffsetForLeaderEpoch (23): the end offset of a leader epoch in this leader's log (KIP-101/279).
Runs on an I/O thread."""

from __future__ import annotations

from broker.handlers.base import RequestContext, by_topic, handler
from broker.security.access import cluster_action, split_partitions
from client.protocol import ApiKey
from client.protocol.body import Body
from client.security.acl import AclOperation


@handler(
    ApiKey.OFFSET_FOR_LEADER_EPOCH,
    access="consumer DESCRIBE on TOPIC; follower CLUSTER_ACTION on CLUSTER",
)
def handle(ctx: RequestContext, body: Body) -> Body:
    services = ctx.services
    reqs = [
        (t["name"], int(p["partition"]), int(p["current_leader_epoch"]), int(p["leader_epoch"]))
        for t in body["topics"]
        for p in t["partitions"]
    ]
    refused: list[Body] = []
    if int(body.get("replica_id", -1)) >= 0:  # a follower: CLUSTER_ACTION, as Kafka
        cluster_action(ctx)
    else:  # a consumer validating its position: DESCRIBE on the topic
        reqs, refused = split_partitions(ctx, AclOperation.DESCRIBE, reqs)
    results = services.replica_manager.offsets.offsets_for_leader_epoch(reqs)
    return {"topics": by_topic(results + refused), "throttle_time_ms": 0}
