"""ListOffsets (2): -2 earliest (log start), -1 latest (the high watermark for consumers, the
last stable offset for read_committed ones), or
the first offset whose batch timestamp >= the given ms (time index). Runs on an I/O thread."""

from __future__ import annotations

from broker.handlers.base import RequestContext, by_topic, handler
from broker.security.access import split_partitions
from client.protocol import ApiKey
from client.protocol.body import Body
from client.security.acl import AclOperation


@handler(ApiKey.LIST_OFFSETS, access="DESCRIBE on TOPIC")
def handle(ctx: RequestContext, body: Body) -> Body:
    services = ctx.services
    reqs = [
        (t["name"], int(p["partition"]), int(p["timestamp"]), int(p["current_leader_epoch"]))
        for t in body["topics"]
        for p in t["partitions"]
    ]
    reqs, refused = split_partitions(ctx, AclOperation.DESCRIBE, reqs)
    results = services.replica_manager.offsets.list_offsets(
        int(body["replica_id"]), reqs, int(body.get("isolation_level", 0))
    )
    return {"topics": by_topic(results + refused), "throttle_time_ms": 0}
