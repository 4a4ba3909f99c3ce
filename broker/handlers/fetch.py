"""Fetch (1): read whole batches for consumers (never above the high watermark) and, with
replication, followers (replica_id >= 0). Long poll: when less than min_bytes is available the
request waits in the fetch purgatory (DelayedFetch) up to max_wait_ms, and is answered as soon
as enough data is acknowledged. Runs on an I/O thread; the late answer on a flusher/timer thread.
"""

from __future__ import annotations

from typing import Any

from broker.handlers.base import RequestContext, by_topic, handler
from client.protocol import ApiKey


def _response(order: list[tuple[str, int]], results: list[dict]) -> dict:
    return {"error_code": 0, "session_id": 0, "topics": by_topic(results), "throttle_time_ms": 0}


@handler(ApiKey.FETCH)
def handle(ctx: RequestContext, body: dict) -> dict | None:
    from broker.replica import FetchParams, FetchPartitionSpec

    services: Any = ctx.services
    params = FetchParams(
        replica_id=int(body["replica_id"]),
        max_wait_ms=max(0, int(body["max_wait_ms"])),
        min_bytes=max(0, int(body["min_bytes"])),
        max_bytes=max(1, int(body["max_bytes"])),
    )
    specs = [
        FetchPartitionSpec(
            t["name"],
            int(p["partition"]),
            int(p["fetch_offset"]),
            max(1, int(p["partition_max_bytes"])),
            int(p["current_leader_epoch"]),
            int(p["last_fetched_epoch"]),
        )
        for t in body["topics"]
        for p in t["partitions"]
    ]
    order = [(s.topic, s.partition) for s in specs]

    def finish(results: list[dict]) -> None:
        ctx.respond(_response(order, results))

    results = services.replica_manager.fetch_records(params, specs, finish)
    if results is None:
        return None
    return _response(order, results)
