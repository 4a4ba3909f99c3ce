"""DescribeCluster (60): cluster id, controller id and the live brokers of the image (with
`include_fenced_brokers`, the fenced ones too, marked), each by its address on the listener the
request came in on (as Metadata)."""

from __future__ import annotations

from broker.handlers.base import RequestContext, handler
from broker.security.access import require
from client.protocol import ApiKey
from client.protocol.body import Body
from client.security.acl import AclOperation, ResourceType


@handler(ApiKey.DESCRIBE_CLUSTER, access="DESCRIBE on CLUSTER")
def handle(ctx: RequestContext, body: Body) -> Body:
    require(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER)
    services = ctx.services
    image = services.metadata
    fenced_too = bool(body.get("include_fenced_brokers"))
    brokers = []
    for b in sorted(image.brokers.values(), key=lambda b: b.broker_id):
        endpoint = b.endpoint(ctx.listener)  # on the request's listener, as Metadata
        if endpoint is None or not (fenced_too or not b.fenced):
            continue
        host, port = endpoint
        brokers.append(
            {
                "broker_id": b.broker_id,
                "host": host,
                "port": port,
                "rack": b.rack,
                "is_fenced": b.fenced,
            }
        )
    if not brokers:
        host, port = ctx.advertised()
        brokers = [{"broker_id": services.node_id, "host": host, "port": port, "rack": None}]
    return {
        "error_code": 0,
        "error_message": None,
        "cluster_id": services.cluster_id,
        "controller_id": services.controller_id,
        "brokers": brokers,
        "throttle_time_ms": 0,
    }
