"""Fetch (1): read whole batches for consumers (never above the high watermark) and, with
replication, followers (replica_id >= 0). Long poll: when less than min_bytes is available the
request waits in the fetch purgatory (DelayedFetch) up to max_wait_ms, and is answered as soon
as enough data is acknowledged. Runs on an I/O thread; the late answer on a flusher/timer thread.

Incremental fetch sessions (KIP-227, broker/replica/session_fetch.py) serve followers that ask
for them (session_epoch >= 0); consumers send session_epoch -1 and fetch without one. A
follower's session_epoch -1 with a session id closes that session.
"""

from __future__ import annotations

from typing import Any

from broker.handlers.base import RequestContext, by_topic, handler
from broker.security.access import cluster_action, split_partitions
from client.protocol import ApiKey
from client.protocol.body import Body
from client.security.acl import AclOperation


def _response(results: list[Body], session_id: int = 0, error_code: int = 0) -> Body:
    return {
        "error_code": error_code,
        "session_id": session_id,
        "topics": by_topic(results),
        "throttle_time_ms": 0,
    }


@handler(ApiKey.FETCH, access="consumer READ on TOPIC; follower CLUSTER_ACTION on CLUSTER")
def handle(ctx: RequestContext, body: Body) -> Body | None:
    from broker.replica import FetchParams, FetchPartitionSpec

    services = ctx.services
    rm = services.replica_manager
    params = FetchParams(
        replica_id=int(body["replica_id"]),
        max_wait_ms=max(0, int(body["max_wait_ms"])),
        min_bytes=max(0, int(body["min_bytes"])),
        max_bytes=max(1, int(body["max_bytes"])),
        isolation_level=int(body.get("isolation_level", 0)),
    )
    specs = [
        FetchPartitionSpec(
            t["name"],
            int(p["partition"]),
            int(p["fetch_offset"]),
            max(1, int(p["partition_max_bytes"])),
            int(p["current_leader_epoch"]),
            int(p["last_fetched_epoch"]),
            int(p["log_start_offset"]),
        )
        for t in body["topics"]
        for p in t["partitions"]
    ]
    refused: list[Body] = []
    if params.is_follower:  # replication: CLUSTER_ACTION on the cluster, as Kafka
        cluster_action(ctx)
    else:  # a consumer: READ on each topic; the refused partitions are not read
        specs, refused = split_partitions(
            ctx, AclOperation.READ, specs, lambda s: s.topic, lambda s: s.partition
        )
    session_id = int(body.get("session_id", 0))
    session_epoch = int(body.get("session_epoch", -1))

    if params.is_follower and session_epoch >= 0:
        forgotten = [
            (t["name"], int(p)) for t in body.get("forgotten_topics") or () for p in t["partitions"]
        ]

        def finish_session(res: Any) -> None:
            ctx.respond(_response(res.results, res.session_id, res.error_code))

        res = rm.session_fetches.fetch_with_session(
            params, session_id, session_epoch, specs, forgotten, finish_session
        )
        if res is None:
            return None
        return _response(res.results, res.session_id, res.error_code)

    if params.is_follower and session_id > 0:  # epoch -1: the follower closes its session
        rm.session_fetches.close(session_id, params.replica_id)

    def finish(results: list[Body]) -> None:
        ctx.respond(_response(results + refused))

    results = rm.fetch_records(params, specs, finish)
    if results is None:
        return None
    return _response(results + refused)
