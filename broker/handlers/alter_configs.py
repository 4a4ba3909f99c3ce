"""IncrementalAlterConfigs (44): set, delete, append to or subtract from topic (and broker)
configs; AlterConfigs (33, Kafka's legacy API): replace a resource's whole set of dynamic
configs (the controller deletes the keys not named). Forwarded to the
controller, which validates every change (unknown topic → UNKNOWN_TOPIC_OR_PARTITION, unknown
key or bad value → INVALID_CONFIG) and answers once the config records are committed. The
metadata publisher then hands the topic's new LogConfig to its open logs (BrokerNode's
subscriber), so retention, segment size and the rest apply without a restart.

A resource named twice in one request is refused with INVALID_REQUEST for each occurrence.
"""

from __future__ import annotations

import collections
import concurrent.futures
from collections.abc import Callable

from broker.handlers.base import RequestContext, handler
from broker.handlers.forward import respond_when_committed
from broker.security.access import check, config_resource, enabled
from client.errors import ErrorCode
from client.protocol import ApiKey
from client.protocol.body import Body
from client.security.acl import AclOperation
from controller.results import AlterConfigsResult

ACCESS = "ALTER_CONFIGS on TOPIC, or CLUSTER for a broker"


@handler(ApiKey.INCREMENTAL_ALTER_CONFIGS, access=ACCESS)
def handle(ctx: RequestContext, body: Body) -> Body | None:
    return _alter(ctx, body, ctx.services.controller.incremental_alter_configs)


@handler(ApiKey.ALTER_CONFIGS, access=ACCESS)
def handle_replace(ctx: RequestContext, body: Body) -> Body | None:
    return _alter(ctx, body, ctx.services.controller.alter_configs)


def _alter(
    ctx: RequestContext,
    body: Body,
    call: Callable[[list[Body], bool], concurrent.futures.Future[list[AlterConfigsResult]]],
) -> Body | None:
    def key(r: Body) -> tuple[int, str]:
        return int(r["resource_type"]), r["resource_name"]

    counts = collections.Counter(key(r) for r in body["resources"])
    types = {r["resource_name"]: int(r["resource_type"]) for r in body["resources"]}

    def entry(name: str, code: ErrorCode | int, message: str | None) -> Body:
        return {
            "resource_type": types.get(name, 0),
            "resource_name": name,
            "error_code": int(code),
            "error_message": message,
        }

    results: list[Body | None] = []
    forward: list[Body] = []
    authz = enabled(ctx)
    for r in body["resources"]:
        if counts[key(r)] > 1:
            results.append(
                entry(r["resource_name"], ErrorCode.INVALID_REQUEST, "resource named twice")
            )
            continue
        denied = (
            check(ctx, AclOperation.ALTER_CONFIGS, *config_resource(*key(r))) if authz else None
        )
        if denied is not None:  # ALTER_CONFIGS on the topic, or on the cluster for a broker
            results.append(entry(r["resource_name"], denied[0], denied[1]))
            continue
        results.append(None)
        forward.append(
            {
                "resource_type": int(r["resource_type"]),
                "resource_name": r["resource_name"],
                "configs": [dict(c) for c in r["configs"]],
            }
        )
    if not forward:
        return {"responses": results, "throttle_time_ms": 0}
    respond_when_committed(
        ctx,
        call(forward, bool(body["validate_only"])),
        results,
        [r["resource_name"] for r in forward],
        entry,
        lambda entries: {"responses": entries, "throttle_time_ms": 0},
        "alter_configs" if ctx.api_key == ApiKey.ALTER_CONFIGS else "incremental_alter_configs",
    )
    return None
