"""ACLs as the ACL APIs carry them (client/protocol/apis/acls.py): dicts with Kafka's field
names in snake_case and Kafka's numbers, to and from `AclBinding` / `AclBindingFilter`. Shared
by the Admin client, the broker and the controller. Pure: any thread."""

from __future__ import annotations

from typing import Any

from client.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    parse_enum,
)


def binding_from_wire(c: dict[str, Any]) -> AclBinding:
    """A CreateAcls creation (Kafka's field names, snake_case) as a binding; ValueError."""
    return AclBinding(
        parse_enum(ResourceType, c["resource_type"], "resource type"),
        c["resource_name"],
        parse_enum(PatternType, c["resource_pattern_type"], "pattern type"),
        c["principal"],
        c["host"],
        parse_enum(AclOperation, c["operation"], "operation"),
        parse_enum(AclPermissionType, c["permission_type"], "permission type"),
    )


def filter_from_wire(f: dict[str, Any]) -> AclBindingFilter:
    """A DescribeAcls request or DeleteAcls filter as an AclBindingFilter; ValueError."""
    return AclBindingFilter(
        parse_enum(ResourceType, f["resource_type_filter"], "resource type"),
        f.get("resource_name_filter"),
        parse_enum(PatternType, f["pattern_type_filter"], "pattern type"),
        f.get("principal_filter"),
        f.get("host_filter"),
        parse_enum(AclOperation, f["operation"], "operation"),
        parse_enum(AclPermissionType, f["permission_type"], "permission type"),
    )


def binding_to_wire(b: AclBinding) -> dict[str, Any]:
    return {
        "resource_type": int(b.resource_type),
        "resource_name": b.resource_name,
        "pattern_type": int(b.pattern_type),
        "principal": b.principal,
        "host": b.host,
        "operation": int(b.operation),
        "permission_type": int(b.permission_type),
    }


def filter_to_wire(f: AclBindingFilter) -> dict[str, Any]:
    return {
        "resource_type_filter": int(f.resource_type),
        "resource_name_filter": f.resource_name,
        "pattern_type_filter": int(f.pattern_type),
        "principal_filter": f.principal,
        "host_filter": f.host,
        "operation": int(f.operation),
        "permission_type": int(f.permission_type),
    }


def binding_to_creation(b: AclBinding) -> dict[str, Any]:
    w = binding_to_wire(b)
    w["resource_pattern_type"] = w.pop("pattern_type")
    return w
