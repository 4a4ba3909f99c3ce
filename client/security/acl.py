"""ACL vocabulary shared by the client, the controller and the broker (docs/security.md,
"Authorization"): Kafka's resource types, pattern types, operations and permission types with
Kafka's wire numbers, an `AclBinding` (a resource pattern and an access control entry) and an
`AclBindingFilter` (what DescribeAcls and DeleteAcls match).

Pure: no I/O. Any thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

CLUSTER_NAME = "kafka-cluster"  # the one cluster resource's name, as Kafka spells it
WILDCARD = "*"  # a LITERAL resource name, principal or host that matches every one
WILDCARD_PRINCIPAL = "User:*"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# Kafka's implied operations: an ALLOW of any of these also allows the key.
IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset(
        {
            AclOperation.DESCRIBE,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
        }
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset(
        {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
    ),
}

# Which operations make sense on which resource (Kafka's table); others are refused.
VALID_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset(
        {
            AclOperation.ALL,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.CREATE,
            AclOperation.DELETE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
        }
    ),
    ResourceType.GROUP: frozenset(
        {AclOperation.ALL, AclOperation.READ, AclOperation.DELETE, AclOperation.DESCRIBE}
    ),
    ResourceType.CLUSTER: frozenset(
        {
            AclOperation.ALL,
            AclOperation.CREATE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE,
            AclOperation.CLUSTER_ACTION,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
            AclOperation.IDEMPOTENT_WRITE,
        }
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset(
        {AclOperation.ALL, AclOperation.WRITE, AclOperation.DESCRIBE}
    ),
}


@dataclass(frozen=True)
class AclBinding:
    """ALLOW or DENY `principal` from `host` the `operation` on the resources that
    (`resource_type`, `resource_name`, `pattern_type`) names."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return (
            f"(principal={self.principal}, host={self.host}, operation={self.operation.name},"
            f" permission={self.permission_type.name}) on {self.resource_type.name}"
            f":{self.pattern_type.name}:{self.resource_name}"
        )


def validate_binding(b: AclBinding) -> str | None:
    """Why `b` cannot be stored (Kafka's InvalidRequest reasons), or None when it can."""
    if b.resource_type not in VALID_OPERATIONS:
        return f"resource type {b.resource_type.name} cannot hold ACLs"
    if b.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"pattern type {b.pattern_type.name}: expected LITERAL or PREFIXED"
    if b.operation not in VALID_OPERATIONS[b.resource_type]:
        return f"operation {b.operation.name} does not apply to {b.resource_type.name}"
    if b.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"permission type {b.permission_type.name}: expected ALLOW or DENY"
    if not b.resource_name:
        return "the resource name is empty"
    if b.resource_type == ResourceType.CLUSTER and b.resource_name != CLUSTER_NAME:
        return f"the cluster resource is named {CLUSTER_NAME!r}, not {b.resource_name!r}"
    if b.pattern_type == PatternType.PREFIXED and b.resource_name == WILDCARD:
        return "a PREFIXED pattern of '*' means nothing: use LITERAL '*'"
    kind, sep, name = b.principal.partition(":")
    if not sep or not kind or not name:
        return f"principal {b.principal!r}: expected TYPE:NAME, e.g. User:alice"
    if not b.host:
        return "the host is empty (use '*' for every host)"
    return None


@dataclass(frozen=True)
class AclBindingFilter:
    """Matches bindings: None (or ANY) in a field matches every value. `pattern_type` MATCH
    (DescribeAcls/DeleteAcls) matches the LITERAL and PREFIXED patterns that cover
    `resource_name`, the LITERAL `*` included."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def validate(self) -> str | None:
        for value, enum in (
            (self.resource_type, ResourceType),
            (self.pattern_type, PatternType),
            (self.operation, AclOperation),
            (self.permission_type, AclPermissionType),
        ):
            if value == enum.UNKNOWN:
                return f"{enum.__name__} UNKNOWN cannot be matched"
        if self.pattern_type == PatternType.MATCH and self.resource_name is None:
            return "pattern type MATCH needs a resource name"
        return None

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and b.resource_type != self.resource_type:
            return False
        if self.principal is not None and b.principal != self.principal:
            return False
        if self.host is not None and b.host != self.host:
            return False
        if self.operation != AclOperation.ANY and b.operation != self.operation:
            return False
        if (
            self.permission_type != AclPermissionType.ANY
            and b.permission_type != self.permission_type
        ):
            return False
        if self.pattern_type == PatternType.MATCH:
            name = self.resource_name or ""
            if b.pattern_type == PatternType.LITERAL:
                return b.resource_name in (name, WILDCARD)
            return b.pattern_type == PatternType.PREFIXED and name.startswith(b.resource_name)
        if self.pattern_type != PatternType.ANY and b.pattern_type != self.pattern_type:
            return False
        return self.resource_name is None or b.resource_name == self.resource_name


E = TypeVar("E", bound=IntEnum)


def parse_enum(enum: type[E], text: str | int, what: str) -> E:
    """`text` (a name, any case, `-` for `_`, or a number) as a member of `enum`; ValueError
    naming `what` and the choices."""
    if isinstance(text, int):
        try:
            return enum(text)
        except ValueError:
            pass
    else:
        key = text.strip().upper().replace("-", "_")
        if key in enum.__members__:
            return enum.__members__[key]
    choices = ", ".join(m for m in enum.__members__ if m != "UNKNOWN")
    raise ValueError(f"{what} {text!r}: expected one of {choices}")
