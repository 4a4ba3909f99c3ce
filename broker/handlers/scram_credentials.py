"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51).

Describe answers from the latest metadata image: each user's mechanisms and iteration counts,
never a salt or key. Alter is forwarded to the controller, which turns the salted passwords into
StoredKey/ServerKey records and answers once they are committed (controller/quorum/
scram_control.py).
"""

from __future__ import annotations

import collections
from typing import Any

from broker.handlers.base import RequestContext, handler
from broker.handlers.forward import respond_when_committed
from broker.security.access import require
from client.errors import ErrorCode
from client.protocol import ApiKey
from client.protocol.body import Body
from client.security.acl import AclOperation, ResourceType


@handler(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, access="DESCRIBE on CLUSTER")
def describe(ctx: RequestContext, body: Body) -> Body | None:
    require(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER)
    creds = ctx.services.metadata.scram_credentials
    wanted = body["users"]
    names = sorted(creds) if not wanted else [u["name"] for u in wanted]
    counts = collections.Counter(names)
    results = []
    for name in names:
        entry: dict[str, Any] = {"user": name, "error_code": 0, "error_message": None}
        if counts[name] > 1:
            entry.update(
                error_code=int(ErrorCode.DUPLICATE_RESOURCE),
                error_message=f"user {name!r} named twice",
            )
        elif name not in creds:
            entry.update(
                error_code=int(ErrorCode.RESOURCE_NOT_FOUND),
                error_message=f"attempt to describe a user credential that does not exist: {name}",
            )
        else:
            entry["credential_infos"] = [
                {"mechanism": m, "iterations": creds[name][m].iterations}
                for m in sorted(creds[name])
            ]
        results.append(entry)
    return {"throttle_time_ms": 0, "error_code": 0, "results": results}


@handler(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, access="ALTER on CLUSTER")
def alter(ctx: RequestContext, body: Body) -> Body | None:
    require(ctx, AclOperation.ALTER, ResourceType.CLUSTER)
    deletions = [{"name": d["name"], "mechanism": d["mechanism"]} for d in body["deletions"]]
    upsertions = [dict(u) for u in body["upsertions"]]
    users: list[str] = []
    for item in deletions + upsertions:
        if item["name"] not in users:
            users.append(item["name"])
    if not users:
        return {"throttle_time_ms": 0, "results": []}

    def entry(name: str, code: int, message: str | None) -> Body:
        return {"user": name, "error_code": int(code), "error_message": message}

    respond_when_committed(
        ctx,
        ctx.services.controller.alter_user_scram_credentials(deletions, upsertions),
        [None] * len(users),
        users,
        entry,
        lambda entries: {"throttle_time_ms": 0, "results": entries},
        "alter_user_scram_credentials",
    )
    return None
