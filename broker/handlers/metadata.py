"""Metadata (3): brokers, controller and topics/partitions from the published MetadataImage.

Each broker is given by its advertised address on the listener the request came in on
(broker/listeners.py), as Kafka does: a client that bootstrapped through an external listener
is told external addresses, one inside the cluster's network internal ones.

Requested topics that do not exist are created (with num.partitions / default.replication.factor)
when the request allows it and auto.create.topics.enable is set; the answer is sent once the
controller committed them (from the controller thread, no I/O thread waits). A topic whose
creation is not visible yet answers LEADER_NOT_AVAILABLE (retriable), as Kafka does.
"""

from __future__ import annotations

import logging
from typing import Any

from broker.handlers.base import RequestContext, handler
from client.errors import ErrorCode
from client.protocol import ApiKey

log = logging.getLogger(__name__)


def _brokers(ctx: RequestContext, image: Any) -> list[dict]:
    brokers = []
    for b in sorted(image.brokers.values(), key=lambda b: b.broker_id):
        endpoint = None if b.fenced else b.endpoint(ctx.listener)
        if endpoint is not None:  # (a broker without the client's listener is left out)
            host, port = endpoint
            brokers.append({"node_id": b.broker_id, "host": host, "port": port, "rack": b.rack})
    if not brokers:  # not registered yet: at least tell the client where this broker is
        host, port = ctx.advertised()
        brokers = [{"node_id": ctx.services.node_id, "host": host, "port": port, "rack": None}]
    return brokers


def _topic(image: Any, name: str, missing_code: int) -> dict:
    t = image.topics.get(name)
    if t is None:
        return {"error_code": missing_code, "name": name, "is_internal": False, "partitions": []}
    parts = []
    for p in sorted(t.partitions):
        reg = t.partitions[p]
        parts.append(
            {
                "error_code": 0 if reg.leader >= 0 else int(ErrorCode.LEADER_NOT_AVAILABLE),
                "partition": p,
                "leader_id": reg.leader,
                "leader_epoch": reg.leader_epoch,
                "replica_nodes": list(reg.replicas),
                "isr_nodes": list(reg.isr),
                "offline_replicas": [],
            }
        )
    return {
        "error_code": 0,
        "name": name,
        "is_internal": name.startswith("__"),
        "partitions": parts,
    }


def build_response(ctx: RequestContext, names: list[str] | None, missing_code: int) -> dict:
    services: Any = ctx.services
    image = services.metadata
    if names is None:
        names = sorted(image.topics)
    return {
        "brokers": _brokers(ctx, image),
        "cluster_id": services.cluster_id,
        "controller_id": services.controller_id,
        "topics": [_topic(image, n, missing_code) for n in names],
    }


@handler(ApiKey.METADATA)
def handle(ctx: RequestContext, body: dict) -> dict | None:
    services: Any = ctx.services
    requested = body.get("topics")
    names = None if requested is None else list(dict.fromkeys(t["name"] for t in requested))
    image = services.metadata
    missing = [] if names is None else [n for n in names if n not in image.topics]
    fut = None
    if missing and body.get("allow_auto_topic_creation"):
        fut = services.auto_create_topics(missing)
    if fut is None:
        return build_response(ctx, names, int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))

    def done(f: Any) -> None:
        exc = f.exception()
        if exc is not None:
            log.warning("auto topic creation of %s failed: %s", missing, exc)
        ctx.respond(build_response(ctx, names, int(ErrorCode.LEADER_NOT_AVAILABLE)))

    fut.add_done_callback(done)
    return None
