"""Request validation shared by the controller's operations: topic names, manual replica
assignments, and config changes (IncrementalAlterConfigs). Pure functions; they raise the
BrokerResponseError whose code the response carries.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from client.config.registry import REGISTRY
from client.errors import (
    ErrorCode,
    InvalidConfigError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    error_for_code,
)
from client.protocol.body import Body
from controller.metadata.image import MetadataImage
from controller.metadata.records import RESOURCE_BROKER, RESOURCE_TOPIC, Config
from controller.quorum.topic_configs import validate_topic_config

InvalidReplicaAssignmentError = error_for_code(ErrorCode.INVALID_REPLICA_ASSIGNMENT)
UnknownTopicOrPartitionError = error_for_code(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
InvalidRequestError = error_for_code(ErrorCode.INVALID_REQUEST)

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME = 249

# IncrementalAlterConfigs operations (Kafka's AlterConfigOp.OpType numbers)
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3

# List-typed topic keys (comma-separated values), the only ones APPEND and SUBTRACT take, and
# the broker key whose default they start from when the topic has no value of its own.
LIST_TOPIC_CONFIGS = {"cleanup.policy": "log.cleanup.policy"}

FOLLOWER_THROTTLED_RATE = "follower.replication.throttled.rate"


def _positive_long(v: Any) -> str | None:
    s = str(v).strip() if v is not None else ""
    if not s.isdigit() or int(s) <= 0 or int(s) >= 2**63:
        return f"expected a positive number of bytes per second, not {v!r}"
    return None


# broker configs brokers follow from the metadata log without a restart (resource name: a
# broker id, or "" for every broker); each with its value check
DYNAMIC_BROKER_CONFIGS = {
    # bytes/s a broker copies for the replicas it is adding by a reassignment, not yet in sync
    # (broker/replica/throttle.py); deleted = no bound
    FOLLOWER_THROTTLED_RATE: _positive_long,
}


def check_topic_name(name: Any) -> None:
    if not isinstance(name, str) or not name or name in (".", ".."):
        raise InvalidTopicError(f"illegal topic name {name!r}")
    if len(name) > MAX_TOPIC_NAME:
        raise InvalidTopicError(f"topic name longer than {MAX_TOPIC_NAME} characters")
    if not _LEGAL_TOPIC.match(name):
        raise InvalidTopicError(f"topic name {name!r} has characters outside [a-zA-Z0-9._-]")


def check_assignment(image: MetadataImage, by_p: dict[int, list[int]]) -> dict[int, list[int]]:
    """Manual assignments: equal non-zero sizes, distinct and registered brokers."""
    rfs = {len(v) for v in by_p.values()}
    if len(rfs) != 1 or 0 in rfs:
        raise InvalidReplicaAssignmentError(
            "every partition needs the same, non-zero number of replicas"
        )
    for p, ids in by_p.items():
        if len(set(ids)) != len(ids):
            raise InvalidReplicaAssignmentError(f"partition {p}: duplicate broker ids {ids}")
        unknown = [b for b in ids if b not in image.brokers]
        if unknown:
            raise InvalidReplicaAssignmentError(f"partition {p}: unknown brokers {unknown}")
    return by_p


def check_capacity(rf: int, usable: int, cannot_create: dict[int, str]) -> None:
    """Automatic placement of `rf` replicas over `usable` brokers, when the live brokers in
    `cannot_create` (id -> the reason each reported) are skipped: refused with
    INVALID_REPLICATION_FACTOR, naming each skipped broker and its reason, when too few are
    left (as Kafka answers when too few brokers are registered). Nothing to say otherwise:
    `assign_replicas` checks `rf` against the brokers it is given."""
    if rf > 0 and usable < rf and cannot_create:
        why = "; ".join(f"broker {b}: {r}" for b, r in sorted(cannot_create.items()))
        raise InvalidReplicationFactorError(
            f"replication factor {rf} larger than the {usable} live brokers that can take new"
            f" replicas now ({len(cannot_create)} cannot: {why})"
        )


def check_assigned_capacity(by_p: dict[int, list[int]], cannot_create: dict[int, str]) -> None:
    """Manual assignments must not name a broker that cannot take new replicas now."""
    for p, ids in sorted(by_p.items()):
        for b in ids:
            if b in cannot_create:
                raise InvalidReplicaAssignmentError(
                    f"partition {p}: broker {b} cannot take new replicas now: {cannot_create[b]}"
                )


def _list_value(image: MetadataImage, rtype: int, rname: str, c: Body) -> str:
    """The value an APPEND (2) or SUBTRACT (3) of list-typed key `c["name"]` leaves: the
    current value (the resource's own, else the broker default) with `c["value"]`'s items
    added at the end (those not there yet) or removed, as Kafka's ConfigurationControlManager
    computes it. INVALID_CONFIG on a key that is not a list."""
    name, op, value = c.get("name"), c.get("config_operation"), c.get("value")
    verb = "append" if op == OP_APPEND else "subtract"
    if rtype != RESOURCE_TOPIC or name not in LIST_TOPIC_CONFIGS:
        raise InvalidConfigError(
            f"{name}: config value {verb} is not allowed: it is not a list-typed key"
            f" (list-typed: {', '.join(sorted(LIST_TOPIC_CONFIGS))})"
        )
    if value is None:
        raise InvalidConfigError(f"{name}: a value is required to {verb} it")
    current = image.config_for(rtype, rname).get(name)
    if current is None:
        current = ",".join(REGISTRY.keys[LIST_TOPIC_CONFIGS[name]].default)
    items = [p.strip() for p in current.split(",") if p.strip()]
    given = [p.strip() for p in str(value).split(",") if p.strip()]
    if op == OP_APPEND:
        items += [g for g in dict.fromkeys(given) if g not in items]
    else:
        items = [i for i in items if i not in given]
    return ",".join(items)


def replacing_resource(image: MetadataImage, resource: Body) -> Body:
    """AlterConfigs (33) as an IncrementalAlterConfigs resource: the configs named are set
    (a null value deletes), and every dynamic config the resource has now and the request
    does not name is deleted: AlterConfigs replaces the resource's whole set, as in Kafka."""
    rtype, rname = resource.get("resource_type"), resource.get("resource_name")
    given = resource.get("configs") or []
    named = {c.get("name") for c in given}
    current: Mapping[str, str] = {}  # a malformed resource is refused as it is
    if isinstance(rtype, int) and isinstance(rname, str):
        current = image.config_for(rtype, rname)
    ops = [
        {
            "name": c.get("name"),
            "config_operation": OP_DELETE if c.get("value") is None else OP_SET,
            "value": c.get("value"),
        }
        for c in given
    ]
    ops += [
        {"name": k, "config_operation": OP_DELETE, "value": None}
        for k in sorted(current)
        if k not in named
    ]
    return {"resource_type": rtype, "resource_name": rname, "configs": ops}


def config_change_records(image: MetadataImage, resource: Body) -> list[Config]:
    """Config records for one IncrementalAlterConfigs resource
    `{resource_type, resource_name, configs: [{name, config_operation, value}]}` (operations 0
    set, 1 delete, 2 append, 3 subtract; the last two on list-typed topic keys only). Topic keys
    are validated against topic_configs; broker keys against DYNAMIC_BROKER_CONFIGS."""
    rtype: Any = resource.get("resource_type")
    rname: Any = resource.get("resource_name")
    if rtype == RESOURCE_TOPIC:
        if rname not in image.topics:
            raise UnknownTopicOrPartitionError(f"unknown topic {rname!r}")
    elif rtype == RESOURCE_BROKER:
        if rname != "" and not (str(rname).isdigit() and int(rname) in image.brokers):
            raise InvalidRequestError(f"unknown broker {rname!r}")
        for c in resource.get("configs") or []:
            if c.get("config_operation", OP_SET) in (OP_APPEND, OP_SUBTRACT):
                _list_value(image, rtype, rname, c)  # refused: no broker key is a list
            # Brokers read their static config once at start-up; a change committed here
            # would be accepted and never applied, except for the keys brokers follow live.
            name = c.get("name")
            if name == "leader.replication.throttled.rate":
                raise InvalidConfigError(
                    f"{name}: Gregor bounds catch-up traffic on the follower side only: set"
                    f" {FOLLOWER_THROTTLED_RATE} (the broker adding a replica copies within it)"
                )
            if name not in DYNAMIC_BROKER_CONFIGS:
                raise InvalidConfigError(
                    f"{name}: dynamic broker configs other than"
                    f" {', '.join(sorted(DYNAMIC_BROKER_CONFIGS))} are not supported yet: set"
                    " the key in the broker's config file (or GREGOR_* environment) and"
                    " restart it"
                )
            err = DYNAMIC_BROKER_CONFIGS[name](c.get("value"))
            if err and c.get("config_operation", OP_SET) == OP_SET:
                raise InvalidConfigError(f"{name}: {err}")
    else:
        raise InvalidRequestError(f"unsupported resource type {rtype!r}")
    out = []
    for c in resource.get("configs") or []:
        name, op, value = c.get("name"), c.get("config_operation", OP_SET), c.get("value")
        if op not in (OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT):
            raise InvalidRequestError(f"{name}: unsupported config operation {op!r}")
        if op in (OP_APPEND, OP_SUBTRACT):
            value, op = _list_value(image, rtype, rname, c), OP_SET
        if op == OP_SET and value is None:
            raise InvalidConfigError(f"{name}: a value is required to set it")
        if rtype == RESOURCE_TOPIC:
            err = validate_topic_config(name, None if op == OP_DELETE else value)
            if err:
                raise InvalidConfigError(f"{name}: {err}")
        elif not isinstance(name, str) or not name:
            raise InvalidConfigError(f"bad config name {name!r}")
        out.append(Config(rtype, rname, name, None if op == OP_DELETE else str(value)))
    return out
