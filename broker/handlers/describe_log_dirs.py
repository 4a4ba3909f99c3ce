"""DescribeLogDirs (35): this broker's log directories and the size of each replica in them
(Kafka's answer; reassignment progress reads it). Answered from the LogManager on the I/O
thread: a few stat-free sums of the segments' known sizes. An offline directory answers
KAFKA_STORAGE_ERROR with no replicas; total and usable bytes come from statvfs."""

from __future__ import annotations

import os
from pathlib import Path

from broker.handlers.base import RequestContext, handler
from broker.security.access import require
from client.errors import ErrorCode
from client.protocol import ApiKey
from client.protocol.body import Body
from client.security.acl import AclOperation, ResourceType


def _space(d: Path) -> tuple[int, int]:
    try:
        st = os.statvfs(d)
    except OSError:
        return -1, -1
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


@handler(ApiKey.DESCRIBE_LOG_DIRS, access="DESCRIBE on CLUSTER")
def handle(ctx: RequestContext, body: Body) -> Body:
    require(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER)
    services = ctx.services
    lm = services.log_manager
    wanted = None
    if body["topics"] is not None:
        wanted = {(t["topic"], p) for t in body["topics"] for p in t["partitions"]}
    offline = set(lm.offline_dirs())
    by_dir: dict[Path, dict[str, list[Body]]] = {d: {} for d in lm.log_dirs}
    for tp, log in sorted(lm.logs().items()):
        if (wanted is not None and tp not in wanted) or log.log_dir in offline:
            continue
        by_dir.setdefault(log.log_dir, {}).setdefault(tp[0], []).append(
            {
                "partition_index": tp[1],
                "partition_size": log.size_bytes,
                "offset_lag": 0,
                "is_future_key": False,
            }
        )
    results = []
    for d, topics in by_dir.items():
        total, usable = _space(d)
        results.append(
            {
                "error_code": int(ErrorCode.KAFKA_STORAGE_ERROR if d in offline else 0),
                "log_dir": str(d),
                "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()],
                "total_bytes": total,
                "usable_bytes": usable,
            }
        )
    return {"throttle_time_ms": 0, "error_code": 0, "results": results}
