"""The authorizer (docs/security.md, "Authorization"): Kafka's StandardAuthorizer rules over the
ACLs of the metadata image.

    authorize(principal, host, operation, resource_type, resource_name) -> bool

1. A super user (`super.users`) may do everything.
2. The ACLs that apply are those on the resource: LITERAL with its name or `*`, and PREFIXED
   with a prefix of its name; for the principal or `User:*`, and the host or `*`.
3. A DENY of the operation (or ALL) wins over any ALLOW.
4. An ALLOW of the operation, of ALL, or of an operation that implies it (READ, WRITE, DELETE
   and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS) allows it.
5. Otherwise denied, unless no ACL at all is on the resource and
   `allow.everyone.if.no.acl.found` is set.

`AclIndex` is pure and immutable (a dict per resource type for literal names and one for
prefixes, looked up by the prefix lengths present): built once per metadata image that changes
the ACLs. `Authorizer` reads the latest image's ACLs at each call and rebuilds its index
only when they changed (the image keeps the same mapping while no ACL record applies). Any
thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from client.security.acl import (
    IMPLIED_BY,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

_NONE: tuple[AclBinding, ...] = ()


class AclIndex:
    """The ACLs, indexed by resource. Immutable once built."""

    def __init__(self, bindings: Iterable[AclBinding]) -> None:
        literal: dict[tuple[int, str], list[AclBinding]] = {}
        prefixed: dict[int, dict[str, list[AclBinding]]] = {}
        for b in bindings:
            if b.pattern_type == PatternType.LITERAL:
                literal.setdefault((b.resource_type, b.resource_name), []).append(b)
            elif b.pattern_type == PatternType.PREFIXED:
                prefixed.setdefault(b.resource_type, {}).setdefault(b.resource_name, []).append(b)
        self._literal = {k: tuple(v) for k, v in literal.items()}
        self._prefixed = {t: {p: tuple(v) for p, v in m.items()} for t, m in prefixed.items()}
        self._lengths = {t: sorted({len(p) for p in m}) for t, m in prefixed.items()}
        by_type: dict[int, list[AclBinding]] = {}
        for (t, _), v in literal.items():
            by_type.setdefault(t, []).extend(v)
        for t, m in prefixed.items():
            for v in m.values():
                by_type.setdefault(t, []).extend(v)
        self._by_type = {t: tuple(v) for t, v in by_type.items()}
        self.size = sum(len(v) for v in literal.values()) + sum(
            len(v) for m in prefixed.values() for v in m.values()
        )

    def of_type(self, resource_type: int) -> tuple[AclBinding, ...]:
        return self._by_type.get(resource_type, _NONE)

    def on_resource(self, resource_type: int, name: str) -> list[AclBinding]:
        """Every ACL whose resource pattern covers (resource_type, name)."""
        out = list(self._literal.get((resource_type, name), _NONE))
        if name != WILDCARD:
            out += self._literal.get((resource_type, WILDCARD), _NONE)
        by_prefix = self._prefixed.get(resource_type)
        if by_prefix:
            for n in self._lengths[resource_type]:
                if n > len(name):
                    break
                out += by_prefix.get(name[:n], _NONE)
        return out


def decide(
    acls: Iterable[AclBinding], principal: str, host: str, operation: AclOperation
) -> AclPermissionType | None:
    """DENY, ALLOW, or None (no ACL of `acls` applies) for `principal` at `host` doing
    `operation`, by rules 3 and 4 of the module docstring."""
    allowed_by = IMPLIED_BY.get(operation, frozenset({operation}))
    allow = False
    for b in acls:
        if b.principal != principal and b.principal != WILDCARD_PRINCIPAL:
            continue
        if b.host != host and b.host != WILDCARD:
            continue
        if b.permission_type == AclPermissionType.DENY:
            if b.operation == operation or b.operation == AclOperation.ALL:
                return AclPermissionType.DENY
        elif b.operation == AclOperation.ALL or b.operation in allowed_by:
            allow = True
    return AclPermissionType.ALLOW if allow else None


class Authorizer:
    """The broker's authorizer: the rules above over the latest ACLs. Any thread."""

    def __init__(
        self,
        super_users: Iterable[str],
        allow_if_no_acl: bool,
        acls: Callable[[], Mapping[Any, AclBinding]],
    ) -> None:
        """`acls`: the latest metadata image's ACLs (`lambda: publisher.image.acls`)."""
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._acls = acls
        self._index = AclIndex(())
        self._source: object = None
        self._lock = threading.Lock()

    def index(self) -> AclIndex:
        acls = self._acls()
        if acls is self._source:
            return self._index
        with self._lock:
            if acls is not self._source:
                self._index, self._source = AclIndex(acls.values()), acls
            return self._index

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        resource_name: str,
    ) -> bool:
        if principal in self.super_users:
            return True
        acls = self.index().on_resource(resource_type, resource_name)
        if not acls:
            return self.allow_if_no_acl
        return decide(acls, principal, host, operation) == AclPermissionType.ALLOW

    def authorize_any(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """May `principal` do `operation` on some resource of `resource_type` (`allows_any`)?"""
        if principal in self.super_users:
            return True
        return allows_any(
            self.index(), principal, host, operation, resource_type, self.allow_if_no_acl
        )


def allows_any(
    index: AclIndex,
    principal: str,
    host: str,
    operation: AclOperation,
    resource_type: ResourceType,
    allow_if_no_acl: bool,
) -> bool:
    """Kafka's authorizeByResourceType: may `principal` do `operation` on some resource of
    `resource_type`? True when an ALLOW of it (or ALL) applies to the principal on some
    pattern not denied by a DENY on the same or a wider pattern (LITERAL `*`)."""
    bindings = index.of_type(resource_type)
    if not bindings:
        return allow_if_no_acl

    def applies(b: AclBinding) -> bool:
        return (
            (b.principal == principal or b.principal == WILDCARD_PRINCIPAL)
            and (b.host == host or b.host == WILDCARD)
            and (b.operation == operation or b.operation == AclOperation.ALL)
        )

    denied = {
        (b.pattern_type, b.resource_name)
        for b in bindings
        if b.permission_type == AclPermissionType.DENY and applies(b)
    }
    if (PatternType.LITERAL, WILDCARD) in denied:
        return False
    for b in bindings:
        if b.permission_type != AclPermissionType.ALLOW or not applies(b):
            continue
        if (b.pattern_type, b.resource_name) in denied:
            continue
        if b.pattern_type == PatternType.PREFIXED and any(
            p == PatternType.PREFIXED and b.resource_name.startswith(n) for p, n in denied
        ):
            continue
        return True
    return False


def parse_super_users(value: str) -> list[str]:
    """`super.users`: principals separated by `;` (Kafka's form, `User:admin;User:CN=broker`)."""
    return [p.strip() for p in value.split(";") if p.strip()]
