"""DescribeClientQuotas (48) and AlterClientQuotas (49).

Describe answers from the latest metadata image (the ClientQuota records applied). Alter is
forwarded to the controller, which checks each entry and answers once its records are
committed (controller/quorum/quota_control.py).
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.handlers.base import RequestContext, handler
from broker.handlers.forward import respond_when_committed
from broker.security.access import require
from client.errors import ErrorCode
from client.protocol import ApiKey
from client.protocol.body import Body
from client.quotas import ENTITY_TYPES, Entity
from client.security.acl import AclOperation, ResourceType

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


def matching(
    quotas: Mapping[Entity, Mapping[str, float]], components: list[Body], strict: bool
) -> list[tuple[Entity, Mapping[str, float]]]:
    """The entities (and their quotas) matching every component (DescribeClientQuotas'
    filter), sorted. ValueError: a component that cannot match (unknown type or match type,
    a type filtered twice)."""
    wanted: dict[str, tuple[int, str | None]] = {}
    for c in components:
        t, mt = c["entity_type"], c["match_type"]
        if t not in ENTITY_TYPES:
            raise ValueError(f"unknown entity type {t!r}")
        if t in wanted:
            raise ValueError(f"entity type {t!r} filtered twice")
        if mt not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            raise ValueError(f"unknown match type {mt}")
        if mt == MATCH_EXACT and c["match"] is None:
            raise ValueError(f"an exact match of {t!r} needs a name")
        wanted[t] = (mt, c["match"])
    out = []
    for entity, values in quotas.items():
        names = dict(entity)
        if strict and set(names) != set(wanted):
            continue
        ok = True
        for t, (mt, match) in wanted.items():
            if t not in names:
                ok = False
            elif mt == MATCH_EXACT:
                ok = names[t] == match
            elif mt == MATCH_DEFAULT:
                ok = names[t] is None
            else:
                ok = names[t] is not None
            if not ok:
                break
        if ok and values:
            out.append((entity, values))
    return sorted(out, key=lambda ev: repr(ev[0]))


def _entity_wire(entity: Entity) -> list[Body]:
    return [{"entity_type": t, "entity_name": n} for t, n in entity]


@handler(ApiKey.DESCRIBE_CLIENT_QUOTAS, access="DESCRIBE_CONFIGS on CLUSTER")
def describe(ctx: RequestContext, body: Body) -> Body:
    require(ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER)  # Kafka's check
    try:
        found = matching(ctx.services.metadata.client_quotas, body["components"], body["strict"])
    except ValueError as exc:
        return {
            "throttle_time_ms": 0,
            "error_code": int(ErrorCode.INVALID_REQUEST),
            "error_message": str(exc),
            "entries": None,
        }
    entries = [
        {
            "entity": _entity_wire(entity),
            "values": [{"key": k, "value": float(v)} for k, v in sorted(values.items())],
        }
        for entity, values in found
    ]
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "entries": entries}


@handler(ApiKey.ALTER_CLIENT_QUOTAS, access="ALTER_CONFIGS on CLUSTER")
def alter(ctx: RequestContext, body: Body) -> Body | None:
    require(ctx, AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER)  # Kafka's check
    entries = [
        {
            "entity": [dict(e) for e in entry["entity"]],
            "ops": [dict(op) for op in entry["ops"]],
        }
        for entry in body["entries"]
    ]
    if not entries:
        return {"throttle_time_ms": 0, "entries": []}
    keys = [str(i) for i in range(len(entries))]

    def failed(key: str, code: int, message: str | None) -> Body:
        return {
            "error_code": int(code),
            "error_message": message,
            "entity": entries[int(key)]["entity"],
        }

    respond_when_committed(
        ctx,
        ctx.services.controller.alter_client_quotas(entries, body["validate_only"]),
        [None] * len(entries),
        keys,
        failed,
        lambda out: {"throttle_time_ms": 0, "entries": out},
        "alter_client_quotas",
    )
    return None
