"""DescribeCluster (60): cluster id, controller id and the live brokers of the image (with
`include_fenced_brokers`, the fenced ones too, marked)."""

from __future__ import annotations

from typing import Any

from broker.handlers.base import RequestContext, handler
from client.protocol import ApiKey


@handler(ApiKey.DESCRIBE_CLUSTER)
def handle(ctx: RequestContext, body: dict) -> dict:
    services: Any = ctx.services
    image = services.metadata
    fenced_too = bool(body.get("include_fenced_brokers"))
    brokers = [
        {
            "broker_id": b.broker_id,
            "host": b.host,
            "port": b.port,
            "rack": b.rack,
            "is_fenced": b.fenced,
        }
        for b in sorted(image.brokers.values(), key=lambda b: b.broker_id)
        if fenced_too or not b.fenced
    ]
    if not brokers:
        host, port = services.advertised
        brokers = [{"broker_id": services.node_id, "host": host, "port": port, "rack": None}]
    return {
        "error_code": 0,
        "error_message": None,
        "cluster_id": services.cluster_id,
        "controller_id": services.controller_id,
        "brokers": brokers,
        "throttle_time_ms": 0,
    }
