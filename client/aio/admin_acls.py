"""Admin's ACL calls (docs/security.md, "Authorization"): Kafka's createAcls, describeAcls and
deleteAcls over CreateAcls (30), DescribeAcls (29) and DeleteAcls (31), with the bindings and
filters of client/security/acl.py.

Loop-owned: every function runs on the admin's event loop.
"""

from __future__ import annotations

from typing import Any

from client.errors import GregorError, error_for_code
from client.protocol import ApiKey
from client.protocol.body import Body
from client.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from client.security.acl_wire import binding_to_creation, filter_to_wire


def _whole(resp: Body, what: str) -> None:
    """Raise the whole-request error of `resp` (authorization, SECURITY_DISABLED, ...)."""
    if resp.get("error_code"):
        raise error_for_code(resp["error_code"])(resp.get("error_message") or what)


def _binding(r: Body, rtype: int, name: str, pattern: int) -> AclBinding:
    return AclBinding(
        ResourceType(rtype),
        name,
        PatternType(pattern),
        r["principal"],
        r["host"],
        AclOperation(r["operation"]),
        AclPermissionType(r["permission_type"]),
    )


async def create(cluster: Any, bindings: list[AclBinding]) -> dict[AclBinding, GregorError | None]:
    """{binding: None (created, or it existed) or the error refusing it}."""
    if not bindings:
        return {}
    resp = await cluster.send_any(
        ApiKey.CREATE_ACLS, {"creations": [binding_to_creation(b) for b in bindings]}
    )
    _whole(resp, "CreateAcls")
    out: dict[AclBinding, GregorError | None] = {}
    for b, r in zip(bindings, resp["results"], strict=True):
        out[b] = (
            error_for_code(r["error_code"])(r["error_message"] or str(b))
            if r["error_code"]
            else None
        )
    return out


async def describe(cluster: Any, flt: AclBindingFilter) -> list[AclBinding]:
    """The ACLs `flt` matches."""
    resp = await cluster.send_any(ApiKey.DESCRIBE_ACLS, filter_to_wire(flt))
    _whole(resp, "DescribeAcls")
    return [
        _binding(a, r["resource_type"], r["resource_name"], r["pattern_type"])
        for r in resp["resources"]
        for a in r["acls"]
    ]


async def delete(cluster: Any, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
    """The ACLs deleted, per filter in order; the first refused filter's error is raised."""
    if not filters:
        return []
    resp = await cluster.send_any(
        ApiKey.DELETE_ACLS, {"filters": [filter_to_wire(f) for f in filters]}
    )
    _whole(resp, "DeleteAcls")
    out = []
    for f, r in zip(filters, resp["filter_results"], strict=True):
        if r["error_code"]:
            raise error_for_code(r["error_code"])(r["error_message"] or str(f))
        out.append(
            [
                _binding(m, m["resource_type"], m["resource_name"], m["pattern_type"])
                for m in r["matching_acls"]
            ]
        )
    return out
