"""`gregor acls add|remove|list`: ACLs (docs/security.md, "Authorization"), with the options
of Kafka's kafka-acls.sh.

    gregor acls add --allow-principal User:alice --operation READ --operation DESCRIBE \\
        --topic orders [--resource-pattern-type prefixed] [--allow-host 10.0.0.1]
    gregor acls add --deny-principal User:mallory --operation ALL --topic '*'
    gregor acls add --allow-principal User:bob --operation READ --group billing
    gregor acls add --allow-principal User:CN=broker-2 --operation CLUSTER_ACTION --cluster
    gregor acls remove --allow-principal User:alice --topic orders     (every operation)
    gregor acls list [--topic orders] [--principal User:alice] [--json]

`remove` deletes every ACL the options match (an option left out matches anything; the
pattern type defaults to literal as in Kafka, `any` and `match` are accepted). Connection
settings, credentials included, come from --command-config FILE and -X.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from client.cli.common import CommandError, add_bootstrap, client_config, reports_errors
from client.security.acl import (
    CLUSTER_NAME,
    WILDCARD,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    parse_enum,
)

if TYPE_CHECKING:
    from client import Admin


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("acls", help="add, remove and list ACLs")
    sub = p.add_subparsers(dest="acls_command", metavar="ACTION", required=True)
    for name, func, help_ in (
        ("add", _add, "add ALLOW/DENY ACLs (every principal x host x operation x resource)"),
        ("remove", _remove, "remove the ACLs the options match"),
        ("list", _list, "list the ACLs the options match (all by default)"),
    ):
        c = sub.add_parser(name, help=help_)
        _resource_options(c)
        if name == "list":
            c.add_argument("--principal", help="only the ACLs of this principal")
            c.add_argument("--json", action="store_true", help="print JSON")
        else:
            _entry_options(c)
        add_bootstrap(c)
        c.set_defaults(func=func)


def _resource_options(c: argparse.ArgumentParser) -> None:
    c.add_argument("--topic", action="append", default=[], help="a topic (or '*'); repeatable")
    c.add_argument("--group", action="append", default=[], help="a consumer group; repeatable")
    c.add_argument("--transactional-id", action="append", default=[], help="repeatable")
    c.add_argument("--cluster", action="store_true", help="the cluster resource")
    c.add_argument(
        "--resource-pattern-type",
        default=None,
        help="literal (default), prefixed; remove and list also take any and match",
    )


def _entry_options(c: argparse.ArgumentParser) -> None:
    c.add_argument("--allow-principal", action="append", default=[], help="e.g. User:alice")
    c.add_argument("--deny-principal", action="append", default=[], help="e.g. User:mallory")
    c.add_argument("--allow-host", action="append", default=[], help="default '*'")
    c.add_argument("--deny-host", action="append", default=[], help="default '*'")
    c.add_argument(
        "--operation",
        action="append",
        default=[],
        help="READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS,"
        " ALTER_CONFIGS, IDEMPOTENT_WRITE, ALL; repeatable (add: required)",
    )


def _admin(args: argparse.Namespace) -> Admin:
    from client import Admin

    return Admin(client_config(args))


def _resources(args: argparse.Namespace, required: bool) -> list[tuple[ResourceType, str]]:
    out = [(ResourceType.TOPIC, t) for t in args.topic]
    out += [(ResourceType.GROUP, g) for g in args.group]
    out += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id]
    if args.cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    if required and not out:
        raise CommandError("name a resource: --topic, --group, --transactional-id or --cluster")
    return out


def _pattern(args: argparse.Namespace, allowed: tuple[PatternType, ...]) -> PatternType:
    try:
        p = parse_enum(PatternType, args.resource_pattern_type or "literal", "pattern type")
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
    if p not in allowed:
        raise CommandError(
            f"--resource-pattern-type {p.name.lower()}: expected "
            + " or ".join(a.name.lower() for a in allowed)
        )
    return p


def _operations(args: argparse.Namespace) -> list[AclOperation]:
    try:
        return [parse_enum(AclOperation, o, "operation") for o in args.operation]
    except ValueError as exc:
        raise CommandError(str(exc)) from exc


def _entries(args: argparse.Namespace) -> list[tuple[str, str, AclPermissionType]]:
    """(principal, host, permission) for every principal and host given."""
    out = []
    for principals, hosts, perm in (
        (args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
        (args.deny_principal, args.deny_host, AclPermissionType.DENY),
    ):
        out += [(p, h, perm) for p in principals for h in (hosts or [WILDCARD])]
    return out


@reports_errors
def _add(args: argparse.Namespace) -> int:
    resources = _resources(args, True)
    pattern = _pattern(args, (PatternType.LITERAL, PatternType.PREFIXED))
    ops = _operations(args)
    entries = _entries(args)
    if not ops or not entries:
        raise CommandError("add needs --operation and --allow-principal or --deny-principal")
    bindings = [
        AclBinding(rtype, name, pattern, principal, host, op, perm)
        for rtype, name in resources
        for principal, host, perm in entries
        for op in ops
    ]
    with _admin(args) as admin:
        results = admin.create_acls(bindings)
    failed = [(b, e) for b, e in results.items() if e is not None]
    for b in bindings:
        if results.get(b) is None:
            print(f"added {b}")
    if failed:
        raise CommandError("; ".join(f"{b}: {e}" for b, e in failed))
    return 0


@reports_errors
def _remove(args: argparse.Namespace) -> int:
    resources: list[tuple[ResourceType, str | None]] = [*_resources(args, False)] or [
        (ResourceType.ANY, None)
    ]
    pattern = _pattern(args, tuple(PatternType)[1:])
    ops = _operations(args) or [AclOperation.ANY]
    entries: list[tuple[str | None, str | None, AclPermissionType]] = list(_entries(args))
    if not args.allow_host and not args.deny_host:  # no host given: any host
        entries = [(p, None, perm) for p, _h, perm in entries]
    if not entries:
        entries = [(None, None, AclPermissionType.ANY)]
    filters = [
        AclBindingFilter(rtype, name, pattern, principal, host, op, perm)
        for rtype, name in resources
        for principal, host, perm in entries
        for op in ops
    ]
    with _admin(args) as admin:
        deleted = admin.delete_acls(filters)
    n = 0
    for found in deleted:
        for b in found:
            print(f"removed {b}")
            n += 1
    if not n:
        print("no ACL matched")
    return 0


@reports_errors
def _list(args: argparse.Namespace) -> int:
    resources: list[tuple[ResourceType, str | None]] = [*_resources(args, False)] or [
        (ResourceType.ANY, None)
    ]
    pattern = (
        _pattern(args, tuple(PatternType)[1:]) if args.resource_pattern_type else PatternType.ANY
    )
    found: list[AclBinding] = []
    with _admin(args) as admin:
        for rtype, name in resources:
            flt = AclBindingFilter(rtype, name, pattern, args.principal)
            found += [b for b in admin.describe_acls(flt) if b not in found]
    if args.json:
        rows = [
            {
                "resource_type": b.resource_type.name,
                "resource_name": b.resource_name,
                "pattern_type": b.pattern_type.name,
                "principal": b.principal,
                "host": b.host,
                "operation": b.operation.name,
                "permission_type": b.permission_type.name,
            }
            for b in found
        ]
        print(json.dumps(rows, indent=2))
        return 0
    for b in found:
        print(
            f"{b.resource_type.name}:{b.pattern_type.name}:{b.resource_name}\t{b.principal}"
            f"\t{b.host}\t{b.operation.name}\t{b.permission_type.name}"
        )
    return 0
