"""Authorization of requests (docs/security.md, "Authorization"): what a handler calls to ask
whether the request's principal may do an operation on a resource.

    allowed(ctx, op, resource_type, name) -> bool      (a denial is logged, rate-limited)
    require(ctx, op, resource_type, name)              raises the resource type's
                                                       *_AUTHORIZATION_FAILED error
    cluster_action(ctx) -> bool                        a replica's request (CLUSTER_ACTION)

Without an authorizer (`authorizer.class.name` empty) everything is allowed. The error message
names the principal, the operation and the resource. Any thread.
"""

from __future__ import annotations

from typing import Any

from client.errors import (
    BrokerResponseError,
    ClusterAuthorizationFailedError,
    ErrorCode,
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)
from client.security.acl import CLUSTER_NAME, AclOperation, ResourceType

FAILED_CODE: dict[ResourceType, ErrorCode] = {
    ResourceType.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ResourceType.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ResourceType.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ResourceType.TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}
_ERRORS: dict[ResourceType, type[BrokerResponseError]] = {
    ResourceType.TOPIC: TopicAuthorizationFailedError,
    ResourceType.GROUP: GroupAuthorizationFailedError,
    ResourceType.CLUSTER: ClusterAuthorizationFailedError,
    ResourceType.TRANSACTIONAL_ID: TransactionalIdAuthorizationFailedError,
}


def principal_of(ctx: Any) -> str:
    return str(getattr(ctx.request.connection, "principal", "User:ANONYMOUS"))


def host_of(ctx: Any) -> str:
    return str(ctx.request.client_host).lstrip("/")


def enabled(ctx: Any) -> bool:
    return getattr(ctx.services, "authorizer", None) is not None


def allowed(ctx: Any, op: AclOperation, rtype: ResourceType, name: str = CLUSTER_NAME) -> bool:
    """May the request's principal do `op` on (`rtype`, `name`)? A denial is logged."""
    authorizer = getattr(ctx.services, "authorizer", None)
    if authorizer is None:
        return True
    principal, host = principal_of(ctx), host_of(ctx)
    if authorizer.authorize(principal, host, op, rtype, name):
        return True
    ctx.services.auth_log.denied(principal, host, op.name, f"{rtype.name}:{name}")
    return False


def quietly_allowed(
    ctx: Any, op: AclOperation, rtype: ResourceType, name: str = CLUSTER_NAME
) -> bool:
    """`allowed` without logging a denial (filters such as Metadata's topic list, where a
    resource the principal may not see is left out, as Kafka does)."""
    authorizer = getattr(ctx.services, "authorizer", None)
    return authorizer is None or authorizer.authorize(
        principal_of(ctx), host_of(ctx), op, rtype, name
    )


def denial(ctx: Any, op: AclOperation, rtype: ResourceType, name: str = CLUSTER_NAME) -> str:
    """The message of a refusal: who, what, on which resource."""
    return f"principal {principal_of(ctx)} is not authorized to {op.name} {rtype.name} {name!r}"


def require(ctx: Any, op: AclOperation, rtype: ResourceType, name: str = CLUSTER_NAME) -> None:
    """Raise the resource type's *_AUTHORIZATION_FAILED error unless `allowed`."""
    if not allowed(ctx, op, rtype, name):
        raise _ERRORS[rtype](denial(ctx, op, rtype, name))


def check(ctx: Any, op: AclOperation, rtype: ResourceType, name: str) -> tuple[int, str] | None:
    """None when allowed, else (error code, message) for a per-resource answer."""
    if allowed(ctx, op, rtype, name):
        return None
    return int(FAILED_CODE[rtype]), denial(ctx, op, rtype, name)


def init_producer_id(ctx: Any) -> None:
    """InitProducerId without a transactional id: IDEMPOTENT_WRITE on the cluster, or WRITE on
    some topic (Kafka's rule since KIP-679), else CLUSTER_AUTHORIZATION_FAILED."""
    authorizer = getattr(ctx.services, "authorizer", None)
    if authorizer is None:
        return
    principal, host = principal_of(ctx), host_of(ctx)
    if quietly_allowed(ctx, AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER):
        return
    if authorizer.authorize_any(principal, host, AclOperation.WRITE, ResourceType.TOPIC):
        return
    require(ctx, AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER)  # logs and raises


def may_create_topic(ctx: Any, topic: str) -> bool:
    """Auto-creation of `topic` (Metadata, Produce): CREATE on the cluster or on the topic."""
    return quietly_allowed(ctx, AclOperation.CREATE, ResourceType.CLUSTER) or allowed(
        ctx, AclOperation.CREATE, ResourceType.TOPIC, topic
    )


def cluster_action(ctx: Any) -> None:
    """A replica's request (follower Fetch, OffsetForLeaderEpoch): CLUSTER_ACTION on the
    cluster, else CLUSTER_AUTHORIZATION_FAILED."""
    require(ctx, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)


def split_partitions(
    ctx: Any,
    op: AclOperation,
    reqs: list[Any],
    topic_of: Any = lambda r: r[0],
    partition_of: Any = lambda r: r[1],
) -> tuple[list[Any], list[dict[str, Any]]]:
    """Per-partition requests `reqs` → (those on topics allowed `op`, the refused ones'
    results {topic, partition, error_code: TOPIC_AUTHORIZATION_FAILED}). One check per topic."""
    if not enabled(ctx):
        return reqs, []
    verdict: dict[str, bool] = {}
    keep, refused = [], []
    for r in reqs:
        t = topic_of(r)
        ok = verdict.get(t)
        if ok is None:
            ok = verdict[t] = allowed(ctx, op, ResourceType.TOPIC, t)
        if ok:
            keep.append(r)
        else:
            refused.append(
                {
                    "topic": t,
                    "partition": partition_of(r),
                    "error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                }
            )
    return keep, refused


def config_resource(resource_type: int, name: str) -> tuple[ResourceType, str]:
    """The ACL resource of a config resource (DescribeConfigs, IncrementalAlterConfigs): a
    topic (2) is the topic; a broker (4) and anything else is the cluster, as in Kafka."""
    if int(resource_type) == 2:
        return ResourceType.TOPIC, name
    return ResourceType.CLUSTER, CLUSTER_NAME
