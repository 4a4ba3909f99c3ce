"""OffsetForLeaderEpoch (23): the end offset of a leader epoch in this leader's log (KIP-101/279).
Runs on an I/O thread."""

from __future__ import annotations

from broker.handlers.base import RequestContext, by_topic, handler
from client.protocol import ApiKey


@handler(ApiKey.OFFSET_FOR_LEADER_EPOCH)
def handle(ctx: RequestContext, body: dict) -> dict:
    services = ctx.services
    reqs = [
        (t["name"], int(p["partition"]), int(p["current_leader_epoch"]), int(p["leader_epoch"]))
        for t in body["topics"]
        for p in t["partitions"]
    ]
    results = services.replica_manager.offsets.offsets_for_leader_epoch(reqs)
    return {"topics": by_topic(results), "throttle_time_ms": 0}
