"""DeleteRecords (21): move partitions' log start offset as their leader (broker/replica/
records_deletion.py does the work) and answer once every in-sync replica followed, or at
`timeout_ms` (REQUEST_TIMED_OUT). Per partition: unknown → UNKNOWN_TOPIC_OR_PARTITION; not
leader → NOT_LEADER_OR_FOLLOWER; offset above the high watermark → OFFSET_OUT_OF_RANGE;
cleanup.policy=compact alone → POLICY_VIOLATION; a partition named twice → INVALID_REQUEST.
The other partitions of the request go on. Runs on an I/O thread; the late answer on whichever
thread saw the last follower move (or the purgatory's reaper).
"""

from __future__ import annotations

from broker.handlers.base import RequestContext, by_topic, handler
from broker.replica.delayed import DeleteRecordsStatus
from broker.security.access import check, enabled
from client.errors import ErrorCode
from client.protocol import ApiKey
from client.protocol.body import Body
from client.security.acl import AclOperation, ResourceType


@handler(ApiKey.DELETE_RECORDS, access="DELETE on TOPIC")
def handle(ctx: RequestContext, body: Body) -> Body | None:
    from broker.replica.delayed import DeleteRecordsStatus

    services = ctx.services
    order: list[tuple[str, int]] = []
    offsets: dict[tuple[str, int], int] = {}
    refused: dict[tuple[str, int], DeleteRecordsStatus] = {}
    authz = enabled(ctx)
    for t in body["topics"]:
        for p in t["partitions"]:
            tp = (t["name"], int(p["partition"]))
            if tp in offsets or tp in refused:
                offsets.pop(tp, None)
                refused[tp] = DeleteRecordsStatus(
                    int(ErrorCode.INVALID_REQUEST), error_message="partition named twice"
                )
                continue
            order.append(tp)
            denied = check(ctx, AclOperation.DELETE, ResourceType.TOPIC, tp[0]) if authz else None
            if denied is not None:  # DELETE on the topic; nothing is deleted
                refused[tp] = DeleteRecordsStatus(denied[0], error_message=denied[1])
                continue
            offsets[tp] = int(p["offset"])

    def finish(results: dict[tuple[str, int], DeleteRecordsStatus]) -> None:
        statuses = {**results, **refused}
        ctx.respond(
            {
                "topics": by_topic([statuses[tp].as_response(*tp) for tp in order]),
                "throttle_time_ms": 0,
            }
        )

    results = services.replica_manager.records_deletion.delete_records(
        int(body["timeout_ms"]), offsets, finish
    )
    if results is not None:
        finish(results)
    return None  # answered above, or the DelayedDeleteRecords answers
