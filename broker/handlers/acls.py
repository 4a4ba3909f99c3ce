"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31) (docs/security.md, "Authorization").

Describe answers from the latest metadata image; create and delete are forwarded to the
controller (controller/quorum/acl_control.py), answered once the records are committed. Each
needs the authorizer on (else SECURITY_DISABLED, as Kafka answers without one) and DESCRIBE
(describe) or ALTER (create, delete) on the cluster.
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Callable
from typing import TypeVar

from broker.handlers.base import RequestContext, handler
from broker.security.access import enabled, require
from client.errors import ErrorCode, SecurityDisabledError
from client.protocol import ApiKey
from client.protocol.body import Body
from client.security.acl import AclOperation, ResourceType
from client.security.acl_wire import binding_to_wire, filter_from_wire

log = logging.getLogger(__name__)
R = TypeVar("R")  # the controller's typed result per entry


def _security_enabled(ctx: RequestContext) -> None:
    if not enabled(ctx):
        raise SecurityDisabledError("no authorizer is configured (authorizer.class.name)")


@handler(ApiKey.DESCRIBE_ACLS, access="DESCRIBE on CLUSTER")
def describe(ctx: RequestContext, body: Body) -> Body:
    _security_enabled(ctx)
    require(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER)
    try:
        flt = filter_from_wire(body)
        reason = flt.validate()
    except ValueError as exc:
        reason = str(exc)
    if reason is not None:
        return {
            "throttle_time_ms": 0,
            "error_code": int(ErrorCode.INVALID_REQUEST),
            "error_message": reason,
            "resources": [],
        }
    grouped: dict[tuple[int, str, int], list[Body]] = {}
    for b in ctx.services.metadata.acls.values():
        if flt.matches(b):
            w = binding_to_wire(b)
            key = (w.pop("resource_type"), w.pop("resource_name"), w.pop("pattern_type"))
            grouped.setdefault(key, []).append(w)
    resources = [
        {
            "resource_type": t,
            "resource_name": n,
            "pattern_type": p,
            "acls": sorted(
                acls,
                key=lambda a: (a["principal"], a["host"], a["operation"], a["permission_type"]),
            ),
        }
        for (t, n, p), acls in sorted(grouped.items())
    ]
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "resources": resources}


def _forward(
    ctx: RequestContext,
    fut: concurrent.futures.Future[list[R]],
    n: int,
    key: str,
    failed: Callable[[int, str], Body],
) -> None:
    def done(f: concurrent.futures.Future[list[R]]) -> None:
        exc = f.exception()
        if exc is None:
            ctx.respond({"throttle_time_ms": 0, key: f.result()})
            return
        code = int(getattr(exc, "code", ErrorCode.UNKNOWN_SERVER_ERROR))
        log.warning("%s failed in the controller: %s", key, exc)
        ctx.respond({"throttle_time_ms": 0, key: [failed(code, str(exc))] * n})

    fut.add_done_callback(done)


@handler(ApiKey.CREATE_ACLS, access="ALTER on CLUSTER")
def create(ctx: RequestContext, body: Body) -> Body | None:
    _security_enabled(ctx)
    require(ctx, AclOperation.ALTER, ResourceType.CLUSTER)
    creations = [dict(c) for c in body["creations"]]
    if not creations:
        return {"throttle_time_ms": 0, "results": []}
    _forward(
        ctx,
        ctx.services.controller.create_acls(creations),
        len(creations),
        "results",
        lambda code, msg: {"error_code": code, "error_message": msg},
    )
    return None


@handler(ApiKey.DELETE_ACLS, access="ALTER on CLUSTER")
def delete(ctx: RequestContext, body: Body) -> Body | None:
    _security_enabled(ctx)
    require(ctx, AclOperation.ALTER, ResourceType.CLUSTER)
    filters = [dict(f) for f in body["filters"]]
    if not filters:
        return {"throttle_time_ms": 0, "filter_results": []}
    _forward(
        ctx,
        ctx.services.controller.delete_acls(filters),
        len(filters),
        "filter_results",
        lambda code, msg: {"error_code": code, "error_message": msg, "matching_acls": []},
    )
    return None
