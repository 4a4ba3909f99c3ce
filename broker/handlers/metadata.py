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

import base64
import logging
from typing import Any

from broker.handlers.base import RequestContext, handler
from broker.handlers.create_topics import topic_name_error
from broker.security.access import allowed, enabled, may_create_topic, quietly_allowed
from client.errors import ErrorCode
from client.protocol import ApiKey
from client.protocol.body import Body
from client.security.acl import AclOperation, ResourceType

log = logging.getLogger(__name__)


def topic_id_text(raw: Any) -> str | None:
    """A topic id as Kafka prints one (URL-safe base64 of its 16 bytes, no padding)."""
    if isinstance(raw, bytes) and len(raw) == 16:
        return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")
    return None


def _brokers(ctx: RequestContext, image: Any) -> list[Body]:
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


class _TopicAnswers:
    """The answer for each topic, kept per TopicImage object: images share the TopicImages of
    unchanged topics, so a topic's partition list is built once per change of that topic, not
    once per request (producers starting up ask for thousands of partitions, topic by topic).
    Any I/O thread; a race builds an answer twice, and both are the same. The answers are
    shared between responses and never changed. At most ~2x the image's topics are kept."""

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[Any, Body]] = {}  # id(TopicImage) -> (it, answer)

    def get(self, image: Any, name: str, missing_code: int) -> Body:
        t = image.topics.get(name)
        if t is None:
            return {
                "error_code": missing_code, "name": name, "topic_id": None, "is_internal": False,
                "partitions": [],
            }  # fmt: skip
        hit = self._by_id.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
        answer = _topic(t)
        by_id = self._by_id
        if len(by_id) >= 2 * len(image.topics) + 64:  # drop the answers of replaced topics
            self._by_id = by_id = {
                k: v for k, v in by_id.items() if image.topics.get(v[0].name) is v[0]
            }
        by_id[id(t)] = (t, answer)
        return answer


_ANSWERS = _TopicAnswers()


def _topic(t: Any) -> Body:
    name = t.name
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
        "topic_id": topic_id_text(t.topic_id),
        "is_internal": name.startswith("__"),
        "partitions": parts,
    }


def _denied(name: str) -> Body:
    return {
        "error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        "name": name,
        "topic_id": None,  # not told to who may not DESCRIBE it (as Kafka)
        "is_internal": False,
        "partitions": [],
    }


def build_response(ctx: RequestContext, names: list[str] | None, missing_code: int) -> Body:
    """With an authorizer: all topics means those the principal may DESCRIBE; a topic named
    without DESCRIBE gets TOPIC_AUTHORIZATION_FAILED (Kafka's answers)."""
    services = ctx.services
    image = services.metadata
    if not enabled(ctx):
        every = sorted(image.topics) if names is None else names
        answers = [_ANSWERS.get(image, n, missing_code) for n in every]
    elif names is None:
        answers = [
            _ANSWERS.get(image, n, missing_code)
            for n in sorted(image.topics)
            if quietly_allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, n)
        ]
    else:
        answers = [
            _ANSWERS.get(image, n, missing_code)
            if allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, n)
            else _denied(n)
            for n in names
        ]
    return {
        "brokers": _brokers(ctx, image),
        "cluster_id": services.cluster_id,
        "controller_id": services.controller_id,
        "topics": answers,
        "throttle_time_ms": 0,
    }


@handler(ApiKey.METADATA, access="DESCRIBE on TOPIC; auto-creation CREATE on CLUSTER or TOPIC")
def handle(ctx: RequestContext, body: Body) -> Body | None:
    services = ctx.services
    requested = body.get("topics")
    names = None if requested is None else list(dict.fromkeys(t["name"] for t in requested))
    image = services.metadata
    missing = [] if names is None else [n for n in names if n not in image.topics]
    # an illegal name is INVALID_TOPIC_EXCEPTION and never auto-created, as Kafka answers
    illegal = {n for n in missing if topic_name_error(n) is not None}
    missing = [n for n in missing if n not in illegal]
    if missing and enabled(ctx):  # auto-creation needs CREATE on the cluster or the topic
        missing = [n for n in missing if may_create_topic(ctx, n)]
    fut = None
    if missing and body.get("allow_auto_topic_creation"):
        fut = services.auto_create_topics(missing)
    # built whole, as the schema check would return it (a test holds it to the schema), so
    # sent without walking it: one struct per partition, most of the broker's CPU in a
    # producer's start-up over thousands of partitions
    if fut is None:
        ctx.respond_raw(
            _mark_illegal(
                build_response(ctx, names, int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)), illegal
            )
        )
        return None

    def done(f: Any) -> None:
        exc = f.exception()
        if exc is not None:
            log.warning("auto topic creation of %s failed: %s", missing, exc)
        ctx.respond_raw(
            _mark_illegal(build_response(ctx, names, int(ErrorCode.LEADER_NOT_AVAILABLE)), illegal)
        )

    fut.add_done_callback(done)
    return None


def _mark_illegal(response: Body, illegal: set[str]) -> Body:
    if illegal:
        code = int(ErrorCode.INVALID_TOPIC_EXCEPTION)
        response["topics"] = [
            {**t, "error_code": code} if t["name"] in illegal else t for t in response["topics"]
        ]
    return response
