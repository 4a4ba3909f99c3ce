"""ACL records ↔ bindings: an AccessControlEntry record holds Kafka's numbers; the image keeps
each as an `AclBinding` (client/security/acl.py) by its 16-byte id. Pure: any thread."""

from __future__ import annotations

from client.security.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    validate_binding,
)
from controller.metadata.records import AccessControlEntry


def binding_from_record(r: AccessControlEntry) -> AclBinding:
    """The binding `r` stores; ValueError when it is not a valid ACL."""
    if not isinstance(r.acl_id, bytes) or len(r.acl_id) != 16:
        raise ValueError(f"ACL id {r.acl_id!r} is not 16 bytes")
    b = AclBinding(
        ResourceType(r.resource_type),
        r.resource_name,
        PatternType(r.pattern_type),
        r.principal,
        r.host,
        AclOperation(r.operation),
        AclPermissionType(r.permission_type),
    )
    reason = validate_binding(b)
    if reason is not None:
        raise ValueError(f"ACL {b}: {reason}")
    return b


def record_from_binding(acl_id: bytes, b: AclBinding) -> AccessControlEntry:
    return AccessControlEntry(
        acl_id,
        int(b.resource_type),
        b.resource_name,
        int(b.pattern_type),
        b.principal,
        b.host,
        int(b.operation),
        int(b.permission_type),
    )
